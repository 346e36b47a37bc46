package loop_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/db"
	"github.com/toolgate/toolgate/ent/turn"
	"github.com/toolgate/toolgate/runtime/model"
)

// TestTranscriptKeepsTheAssistantsWords: what the model wrote in a step
// that also called tools (a "let me check", a partial answer over two
// lines) is stored on the model call, and read_transcript gives it back
// verbatim, before that step's calls and in order, beside the answer;
// words only a step wrote find the turn. The model's own request after
// the read carries it.
func TestTranscriptKeepsTheAssistantsWords(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, d *db.DB) {
		partial := "So far: two thirds is 0.667.\nNow the square root."
		p := &scripted{answers: []model.Response{
			{Text: "Let me check the tide table first.", ToolCalls: []model.ToolCall{call("a", "calculator", `{"expression":"2/3"}`)}},
			{Text: partial, ToolCalls: []model.ToolCall{call("b", "calculator", `{"expression":"sqrt(2)"}`), call("c", "calculator", `{"expression":"1+1"}`)}},
			{Text: "High tide is at six."},
		}}
		h := newHarness(t, d, p)
		conv := h.conversation(t)
		first := h.send(t, conv, "When is high tide?", "")
		require.Equal(t, turn.StatusCOMPLETED, h.wait(t, first).Status)
		calls := h.calls(t, first)
		require.Len(t, calls, 3)

		p.mu.Lock()
		p.answers = []model.Response{
			{ToolCalls: []model.ToolCall{call("r", "read_transcript", `{"fromTurn":1,"toTurn":1}`), call("w", "read_transcript", `{"words":"TABLE first"}`)}},
			{Text: "Read."},
		}
		p.mu.Unlock()
		second := h.send(t, conv, "What did you say before?", "")
		require.Equal(t, turn.StatusCOMPLETED, h.wait(t, second).Status)
		told := toolTexts(p.request(4))
		want := "user: When is high tide?\n" +
			"assistant: Let me check the tide table first.\n" +
			"tool calculator {\"expression\":\"2/3\"} ref " + *calls[0].Ref + "\n" +
			"assistant: " + partial + "\n" +
			"tool calculator {\"expression\":\"sqrt(2)\"} ref " + *calls[1].Ref + "\n" +
			"tool calculator {\"expression\":\"1+1\"} ref " + *calls[2].Ref + "\n" +
			"assistant: High tide is at six.\n"
		for _, id := range []string{"r", "w"} {
			require.Contains(t, told[id], jsonText(want), id)
			require.Equal(t, 1, strings.Count(told[id], "High tide is at six."), "the answer once: %s", id)
		}
	})
}
