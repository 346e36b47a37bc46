// Package builtin holds the tools the runtime carries out itself, with no
// resolver route: clarify (control flow: the loop pauses the turn after
// it) and update_tasks (the conversation's task list).
package builtin

import (
	"context"
	"encoding/json"

	"github.com/toolgate/toolgate/ent"
	"github.com/toolgate/toolgate/runtime/dispatch"
	"github.com/toolgate/toolgate/tools"
	"github.com/toolgate/toolgate/tools/tasks"
)

// Install registers the built-in tools on d. client must be unscoped: the
// runtime acts for the turn, within the turn's conversation.
func Install(d *dispatch.Dispatcher, client *ent.Client) {
	d.Builtins[tools.ClarifyTool] = func(_ context.Context, _ dispatch.Scope, args json.RawMessage) (json.RawMessage, error) {
		c, err := tools.ParseClarify(args)
		if err != nil {
			return nil, err
		}
		// An acknowledgement: the turn now waits for the user's answer,
		// which becomes this call's result when the turn resumes.
		return json.Marshal(map[string]any{"asked": c.Question, "waiting": true})
	}
	d.Builtins[tasks.Definition.Name] = func(ctx context.Context, s dispatch.Scope, args json.RawMessage) (json.RawMessage, error) {
		return tasks.Apply(ctx, client, s.ConversationID, args)
	}
}
