package tasks

import (
	"encoding/json"

	"github.com/toolgate/toolgate/tools"
)

// Definition is update_tasks, offered when the agent lists it. The runtime
// carries it out itself with Apply, so it has no Operation; the list is
// read in GraphQL as Conversation.tasks.
var Definition = tools.Definition{
	Name:        "update_tasks",
	Family:      "tasks",
	Description: "Replace this conversation's task list, shown to the person: at most 20 tasks, at most one in_progress. Send the whole list each time.",
	Schema: json.RawMessage(`{"type":"object","properties":{` +
		`"tasks":{"type":"array","maxItems":20,"items":{"type":"object","properties":{` +
		`"title":{"type":"string","maxLength":200},` +
		`"status":{"type":"string","enum":["pending","in_progress","done"]}},` +
		`"required":["title","status"],"additionalProperties":false}}},` +
		`"required":["tasks"],"additionalProperties":false}`),
	Offered: tools.OfferAllowlisted,
	// The whole list is replaced: applying it twice is applying it once.
	Effect:  tools.EffectIdempotent,
	Writes:  []tools.Resource{tools.ResourceTasks},
	Preview: tools.PreviewExempt,
	Limits: map[string]int{
		"tasks":      MaxTasks,
		"inProgress": MaxInProgress,
		"titleChars": MaxTitleChars,
	},
}
