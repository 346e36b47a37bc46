package interact

import (
	"context"
	"encoding/json"

	"github.com/toolgate/toolgate/ent"
	"github.com/toolgate/toolgate/tools"
)

// Clarify asks the person a question and waits for the answer. The
// runtime carries it out itself (Run: the question checked and
// acknowledged), so it has no Operation: the turn pauses, and
// answerClarification resumes it.
var Clarify = tools.Definition{
	Name:   tools.ClarifyTool,
	Family: "interact",
	Description: "Ask the person one question and pause the turn until they answer. Offer options when the " +
		"answers are few; recommend at most one. Don't call it when a sensible default exists (take it " +
		"and say so), when the answer is already in the conversation, the files or a tool you could " +
		"call, to ask leave for a step that only reads, to bundle several questions (ask the one that " +
		"blocks you), or to ask \"anything else?\" at the end (suggest_next_actions does that).",
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
	Run:     clarify,
	Limits: map[string]int{
		"options":       tools.MaxClarifyOptions,
		"optionChars":   tools.MaxClarifyOptionChars,
		"questionChars": tools.MaxClarifyQuestionChars,
	},
}

// Suggest stores follow-ups the portal shows as buttons under the answer.
var Suggest = tools.Definition{
	Name:   "suggest_next_actions",
	Family: "interact",
	Description: "Offer up to 5 short follow-ups the person might send next, shown as buttons under your answer; " +
		"word each as they would type it. Don't call it mid-task or twice in a turn, for a step you " +
		"should simply take yourself, or to ask a question (use clarify).",
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
  suggestNextActions(conversationId: $conversationId, suggestions: $suggestions) { saved }
}`,
	Field: "suggestNextActions",
}

// Definitions are the family's tools, in registration order.
var Definitions = []tools.Definition{Clarify, Suggest}

// clarify checks the question and acknowledges it: the turn now waits for
// the person's answer, which becomes the call's result when it resumes.
func clarify(_ context.Context, _ *ent.Client, _ int, args json.RawMessage) (json.RawMessage, error) {
	c, err := tools.ParseClarify(args)
	if err != nil {
		return nil, err
	}
	return json.Marshal(map[string]any{"asked": c.Question, "waiting": true})
}
