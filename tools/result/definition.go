package result

import (
	"encoding/json"

	"github.com/toolgate/toolgate/tools"
)

// Definition is read_tool_result as the runtime offers it, on every turn.
//
// Its result is not previewed: the model chose the budget (at most
// MaxMaxChars), and a preview would cut a window it asked for.
var Definition = tools.Definition{
	Name:   "read_tool_result",
	Family: "result",
	Description: "Read a stored tool result by its ref: maxChars (default 4000) from offset, with nextOffset and " +
		"totalChars; with query, only the passages that match, in context (match fuzzy forgives typos). " +
		"Call it when a result reached you cut (_toolResultContext, or a line naming a ref), and when a " +
		"person pastes a ref into the chat: read it and show them what it holds. Don't call it for a " +
		"result you saw whole, don't page through a long result when a query finds the part you need, " +
		"don't run the original tool again to see the rest, and don't make refs up: one not from this " +
		"conversation reads as not found.",
	Schema: json.RawMessage(`{"type":"object","properties":{` +
		`"refs":{"type":"array","items":{"type":"string"},"minItems":1,"maxItems":3},` +
		`"offset":{"type":"integer","minimum":0},` +
		`"maxChars":{"type":"integer","minimum":1024,"maximum":20000,"description":"shared by refs"},` +
		`"query":{"type":"string"},` +
		`"match":{"type":"string","enum":["exact","fuzzy"],"description":"default exact; fuzzy allows typos"},` +
		`"contextChars":{"type":"integer","minimum":0,"maximum":1000,"description":"default 200"}},` +
		`"required":["refs"],"additionalProperties":false}`),
	Guidance: "Large tool results reach you cut: _toolResultContext, or a line " +
		"\"" + tools.CutLine("N", "M", "R") + "\"" +
		", gives the ref R under which the whole result is stored, from this turn or an earlier one; " +
		"an earlier call's long arguments carry \"" + tools.ArgumentsLine([]string{tools.ArgumentCut("P", "N")}, "R") + "\". " +
		"Read more with read_tool_result (each answer gives nextOffset and " +
		"totalChars), or find something in it with query instead of paging through. Only what you were shown " +
		"counts: never quote the rest.",
	GuidanceKey: "results",
	Offered:     tools.OfferAlways,
	Effect:      tools.EffectRead,
	Preview:     tools.PreviewExempt,
	// What it read counts where the result it read is evidence itself
	// (runtime/loop): a skill's instructions, a listing or a call's saved
	// arguments read back are still none.
	Evidence: tools.EvidenceWindows,
	Limits: map[string]int{
		"refs":                MaxRefs,
		"defaultMaxChars":     DefaultMaxChars,
		"minMaxChars":         MinMaxChars,
		"maxChars":            MaxMaxChars,
		"defaultContextChars": DefaultContextChars,
		"contextChars":        MaxContextChars,
	},
	Operation: `query($conversationId: ID, $refs: [String!]!, $offset: Int, $maxChars: Int, $query: String, $match: MatchMode, $contextChars: Int) {
  toolResults(conversationId: $conversationId, refs: $refs, offset: $offset, maxChars: $maxChars, query: $query, match: $match, contextChars: $contextChars) {
    reads { ref kind text offset nextOffset totalChars bytes truncatedAtSource absent error }
    searches { ref kind hits shown totalChars bytes truncatedAtSource excerpts { offset text edits } absent error }
    failures { item input kind message }
    evidence { ref start end }
  }
}`,
	Field:  "toolResults",
	Absent: Absent,
}

// Absent reports whether a result of the tool showed nothing: every ref
// refused or with nothing readable, or, searching, not a single match.
// A read of a found ref is never absent, even past its end: the model
// learns where the end is.
func Absent(result json.RawMessage) bool {
	var r struct {
		Reads []struct {
			Absent bool    `json:"absent"`
			Error  *string `json:"error"`
		} `json:"reads"`
		Searches []struct {
			Hits int `json:"hits"`
		} `json:"searches"`
	}
	if err := json.Unmarshal(result, &r); err != nil {
		return tools.IsAbsent(result)
	}
	for _, it := range r.Reads {
		if it.Error == nil && !it.Absent {
			return false
		}
	}
	for _, it := range r.Searches {
		if it.Hits > 0 {
			return false
		}
	}
	return true
}
