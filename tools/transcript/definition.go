package transcript

import (
	"encoding/json"

	"github.com/toolgate/toolgate/tools"
)

// Definition is read_transcript as the runtime offers it, on every turn.
//
// Its result is not previewed: the read keeps to its own budget, cut on
// whole turns, and a preview would cut it again inside a turn.
var Definition = tools.Definition{
	Name:   "read_transcript",
	Family: "transcript",
	Description: "Earlier turns of this conversation, verbatim: user text, answers, tool calls (400 chars of arguments, ref). " +
		"By turn range or words (all must appear).",
	Schema: json.RawMessage(`{"type":"object","properties":{` +
		`"fromTurn":{"type":"integer","minimum":1},` +
		`"toTurn":{"type":"integer","minimum":1},` +
		`"words":{"type":"string"},` +
		`"offset":{"type":"integer","minimum":0,"description":"nextOffset of a truncated read"},` +
		`"maxChars":{"type":"integer","minimum":1,"maximum":20000,"description":"default 6000"}},` +
		`"additionalProperties":false}`),
	Offered: tools.OfferAlways,
	Effect:  tools.EffectRead,
	Preview: tools.PreviewExempt,
	Limits: map[string]int{
		"defaultChars":  DefaultChars,
		"maxChars":      MaxChars,
		"argumentChars": ArgumentChars,
		"words":         MaxWords,
	},
	Operation: `query($conversationId: ID!, $fromTurn: Int, $toTurn: Int, $words: String, $offset: Int, $maxChars: Int) {
  transcript(conversationId: $conversationId, fromTurn: $fromTurn, toTurn: $toTurn, words: $words, offset: $offset, maxChars: $maxChars) {
    text truncated nextOffset
  }
}`,
	Field: "transcript",
}
