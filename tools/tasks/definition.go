package tasks

import (
	"encoding/json"

	"github.com/toolgate/toolgate/tools"
)

// Definition is update_tasks, offered when the agent lists it. The runtime
// carries it out itself (Run: Apply), so it has no Operation; the list is
// read in GraphQL as Conversation.tasks.
var Definition = tools.Definition{
	Name:   "update_tasks",
	Brief:  "Replace the task list the person sees for this conversation.",
	Family: "tasks",
	Description: "Replace the task list the person sees for this conversation: send the whole list each time " +
		"(tasks left out are dropped), at most 20, at most one in_progress. Use it for work of three " +
		"steps or more, updating as steps finish. Don't call it for a one- or two-step request, or after " +
		"every small action.",
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
	// The list is the whole state: dropping a task that does not fit would
	// drop it from what the person sees.
	Atomic: true,
	Run:    Apply,
	Limits: map[string]int{
		"tasks":      MaxTasks,
		"inProgress": MaxInProgress,
		"titleChars": MaxTitleChars,
	},
}
