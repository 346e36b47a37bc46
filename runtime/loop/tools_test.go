package loop_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/db"
	"github.com/toolgate/toolgate/ent/schematype"
	"github.com/toolgate/toolgate/ent/tenancy"
	"github.com/toolgate/toolgate/ent/turn"
	"github.com/toolgate/toolgate/runtime/model"
)

// TestEveryTurnToolsRunThroughATurn drives the tools every turn pays for,
// and update_tasks, through the runtime: the same operations as the
// playground, under the turn's scope token.
func TestEveryTurnToolsRunThroughATurn(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, d *db.DB) {
		p := &scripted{answers: []model.Response{{Text: "First answer."}}}
		h := newHarness(t, d, p)
		conv := h.conversation(t, "update_tasks")
		h.wait(t, h.send(t, conv, "Remember the plan: budget first.", ""))

		p.mu.Lock()
		p.answers = []model.Response{
			{ToolCalls: []model.ToolCall{
				call("w", "write_file", `{"files": [{"path": "notes/plan.md", "content": "1. budget\n2. hiring\n"}]}`),
				call("t", "update_tasks", `{"tasks": [{"title": "Budget", "status": "in_progress"}, {"title": "Hiring", "status": "pending"}]}`),
				call("r", "read_transcript", `{"words": "budget plan"}`),
				call("c", "calculator", `{"expression": "2/3"}`),
			}},
			{ToolCalls: []model.ToolCall{
				call("l", "list_files", `{}`),
				call("s", "search_files", `{"strings": ["hiring"], "contextLines": 1}`),
				call("e", "edit_file", `{"path": "notes/plan.md", "edits": [{"old": "hiring", "new": "hiring (Q3)"}]}`),
			}},
			// Calls of one answer run concurrently: the read comes a step
			// before the delete.
			{ToolCalls: []model.ToolCall{call("f", "read_file", `{"path": "notes/plan.md"}`)}},
			{ToolCalls: []model.ToolCall{
				call("x", "delete_file", `{"path": "notes/plan.md"}`),
				call("bad", "update_tasks", `{"tasks": [{"title": "A", "status": "in_progress"}, {"title": "B", "status": "in_progress"}]}`),
				call("esc", "read_file", `{"path": "../../etc/passwd"}`),
			}},
			{Text: "All done."},
		}
		p.mu.Unlock()
		id := h.send(t, conv, "Write the plan down and track it", "")
		got := h.wait(t, id)
		require.Equal(t, turn.StatusCOMPLETED, got.Status, got.Error)

		calls := h.calls(t, id)
		by := map[string]string{}
		outcome := map[string]schematype.Outcome{}
		for _, c := range calls {
			by[c.CallID] = *c.Heard
			outcome[c.CallID] = c.Outcome
		}
		for _, okCall := range []string{"w", "t", "r", "c", "l", "s", "e", "f", "x"} {
			require.Equal(t, schematype.OutcomeHits, outcome[okCall], "%s: %s", okCall, by[okCall])
		}
		require.Contains(t, by["r"], "Remember the plan: budget first.", "the transcript reads the earlier turn")
		require.NotContains(t, by["r"], "Write the plan down", "the asking turn is left out")
		require.Contains(t, by["c"], "0.666666666667")
		require.Contains(t, by["s"], "hiring")
		require.Contains(t, by["f"], "hiring (Q3)")
		require.Equal(t, schematype.OutcomeRefused, outcome["bad"], "a limit refused: nothing ran")
		require.Contains(t, by["bad"], "at most 1 task in_progress")
		require.Equal(t, schematype.OutcomeRefused, outcome["esc"], "a path outside the workspace refused: nothing ran")

		// The task list is the conversation's, visible to the portal.
		data := h.gql(t, `query($c: ID!) { conversation(id: $c) { tasks { title status } } }`, map[string]any{"c": conv})
		tasks := data["conversation"].(map[string]any)["tasks"].([]any)
		require.Len(t, tasks, 2)
		require.Equal(t, map[string]any{"title": "Budget", "status": "IN_PROGRESS"}, tasks[0])

		// The deleted file is gone.
		list := h.client.WorkspaceFile.Query().CountX(tenancy.System(context.Background()))
		require.Zero(t, list)
		require.True(t, strings.HasPrefix(by["esc"], "Refused: nothing ran. Why: "), by["esc"])
	})
}
