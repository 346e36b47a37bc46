package interact

import (
	"encoding/json"

	"github.com/toolgate/toolgate/tools"
)

// Clarify asks the person a question and waits for the answer. The
// runtime carries it out itself (ParseClarify), so it has no Operation:
// the turn pauses, and answerClarification resumes it.
var Clarify = tools.Definition{
	Name:        "clarify",
	Family:      "interact",
	Description: "Ask the person one question when you cannot go on without the answer; the turn waits for it. Offer options when there are few; recommend one of them if you would.",
	Schema: json.RawMessage(`{"type":"object","properties":{` +
		`"question":{"type":"string"},` +
		`"options":{"type":"array","items":{"type":"string"},"maxItems":6},` +
		`"recommended":{"type":"string","description":"one of options"}},` +
		`"required":["question"],"additionalProperties":false}`),
	Offered: tools.OfferAlways,
	// Control flow, never sent twice.
	Effect:  tools.EffectWrite,
	Pauses:  true,
	Preview: tools.PreviewExempt,
	Limits: map[string]int{
		"options":       MaxOptions,
		"optionChars":   MaxOptionChars,
		"questionChars": MaxQuestionChars,
	},
}

// Suggest stores follow-ups the portal shows as buttons under the answer.
var Suggest = tools.Definition{
	Name:        "suggest_next_actions",
	Family:      "interact",
	Description: "Offer the person up to 5 short next messages they might send, shown as buttons under your answer.",
	Schema: json.RawMessage(`{"type":"object","properties":{` +
		`"suggestions":{"type":"array","items":{"type":"string","maxLength":200},"minItems":1,"maxItems":5}},` +
		`"required":["suggestions"],"additionalProperties":false}`),
	Offered: tools.OfferAlways,
	// Storing the same list again changes nothing.
	Effect:  tools.EffectIdempotent,
	Preview: tools.PreviewExempt,
	Limits: map[string]int{
		"suggestions":     MaxSuggestions,
		"suggestionChars": MaxSuggestionChars,
	},
	Operation: `mutation($conversationId: ID, $suggestions: [String!]!) {
  suggestNextActions(conversationId: $conversationId, suggestions: $suggestions) { ok saved }
}`,
	Field: "suggestNextActions",
}

// Definitions are the family's tools, in registration order.
var Definitions = []tools.Definition{Clarify, Suggest}
