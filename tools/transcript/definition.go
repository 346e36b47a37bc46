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
	Description: "Read earlier turns of this conversation verbatim: what the person wrote, your answers, each " +
		"tool call (name, first 400 chars of arguments, ref). Select by turn range or by words that must " +
		"all appear. Call it when a summary or the person points at something said earlier that you no " +
		"longer see in full. Don't call it for what is still in front of you or for this turn (left " +
		"out), and don't read a tool's output with it: use read_tool_result with the ref it gives.",
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
