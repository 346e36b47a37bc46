package loop_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/db"
	"github.com/toolgate/toolgate/ent/schematype"
	"github.com/toolgate/toolgate/ent/turn"
	"github.com/toolgate/toolgate/runtime/model"
)

// toolTexts returns what the tool messages of a request told the model,
// by call id.
func toolTexts(req model.Request) map[string]string {
	out := map[string]string{}
	for _, m := range req.Messages {
		if m.Role == model.RoleTool {
			out[m.ToolCallID] = m.Text
		}
	}
	return out
}

// TestOnlyContentIsEvidence: of what the model is shown, only content
// counts as evidence. A skill's instructions (loaded, and their ref read
// back), a listing of files or of tools, and a call's saved arguments read
// back reach the model through its own requests, yet none of them is in
// ToolCall.evidence or Turn.grounding; a calculator's answer, and a window
// of it read back, are.
func TestOnlyContentIsEvidence(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, d *db.DB) {
		policy := strings.Repeat("Receipts go to finance within 30 days. ", 20)
		write, err := json.Marshal(map[string]any{"files": []map[string]any{{"path": "policy.md", "content": policy}}})
		require.NoError(t, err)
		p := &scripted{answers: []model.Response{
			{ToolCalls: []model.ToolCall{call("w", "write_file", string(write))}},
			{ToolCalls: []model.ToolCall{
				call("s", "load_skill", `{"name":"notes"}`),
				call("l", "list_files", `{}`),
				call("t", "list_tools", `{}`),
				call("c", "calculator", `{"expression":"2/3"}`),
			}},
			{Text: "Ready."},
		}}
		h := newHarness(t, d, p)
		h.gql(t, `mutation { publishSkill(input: {name: "notes", description: "Notes.", instructions: "SKILL-STEPS: decisions first."}) { id } }`, nil)
		conv := h.agent(t, map[string]any{"tools": []string{"list_tools"}, "skills": []string{"notes"}})
		first := h.send(t, conv, "Set up", "")
		require.Equal(t, turn.StatusCOMPLETED, h.wait(t, first).Status)
		calls := h.calls(t, first)
		require.Len(t, calls, 5)
		byName := map[string]int{}
		for i, c := range calls {
			require.Equal(t, schematype.OutcomeHits, c.Outcome, "%s: %s", c.Name, *c.Heard)
			byName[c.Name] = i
		}
		told := toolTexts(p.request(2))
		require.Contains(t, told["l"], "policy.md", "the model saw the listing")
		require.Contains(t, told["t"], "calculator", "the model saw the tool list")
		require.Contains(t, told["s"], "SKILL-STEPS", "the model saw the instructions")
		require.Empty(t, calls[byName["list_files"]].Evidence, "a listing holds no content")
		require.Empty(t, calls[byName["list_tools"]].Evidence, "a tool list is workflow")
		require.Empty(t, calls[byName["load_skill"]].Evidence, "instructions are workflow")
		calc := calls[byName["calculator"]]
		require.Equal(t, []schematype.Span{{Ref: *calc.Ref, Start: 0, End: int64(len(*calc.Heard))}}, calc.Evidence)
		writeCall := calls[byName["write_file"]]
		require.NotNil(t, writeCall.ArgumentsRef, "the long arguments are saved under a ref of their own")

		// The next turn reads every one of those refs back.
		skillRef, listRef, toolsRef := *calls[byName["load_skill"]].Ref, *calls[byName["list_files"]].Ref, *calls[byName["list_tools"]].Ref
		read := func(refs ...string) string {
			b, err := json.Marshal(map[string]any{"refs": refs})
			require.NoError(t, err)
			return string(b)
		}
		p.mu.Lock()
		p.answers = []model.Response{
			{ToolCalls: []model.ToolCall{
				call("r1", "read_tool_result", read(skillRef, listRef, *writeCall.ArgumentsRef)),
				call("r2", "read_tool_result", read(toolsRef, *calc.Ref)),
			}},
			{Text: "Read."},
		}
		p.mu.Unlock()
		second := h.send(t, conv, "Read them back", "")
		require.Equal(t, turn.StatusCOMPLETED, h.wait(t, second).Status)
		reads := h.calls(t, second)
		require.Len(t, reads, 2)
		told = toolTexts(p.request(4))
		require.Contains(t, told["r1"], "SKILL-STEPS", "the window of the instructions reached the model")
		require.Contains(t, told["r1"], "policy.md")
		require.Contains(t, told["r1"], "Receipts go to finance", "the saved arguments reached the model")
		require.Contains(t, told["r2"], "0.666666666667")
		require.Empty(t, reads[0].Evidence, "windows of instructions, a listing and saved arguments are no evidence")
		require.Equal(t, []schematype.Span{{Ref: *calc.Ref, Start: 0, End: int64(len(*calc.Heard))}}, reads[1].Evidence,
			"the window of the calculator's answer is; the tool list beside it is not")

		for _, id := range []string{first, second} {
			data := h.gql(t, `query($id: ID!) { node(id: $id) { ... on Turn { grounding { sources { ref start end } coveredChars } } } }`,
				map[string]any{"id": id})
			g := data["node"].(map[string]any)["grounding"].(map[string]any)
			require.Equal(t, []any{map[string]any{"ref": *calc.Ref, "start": 0.0, "end": float64(len(*calc.Heard))}}, g["sources"], "turn %s", id)
		}
	})
}
