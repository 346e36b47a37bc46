package loop_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/db"
	"github.com/toolgate/toolgate/db/dbtest"
	"github.com/toolgate/toolgate/ent/schematype"
	"github.com/toolgate/toolgate/ent/tenancy"
	"github.com/toolgate/toolgate/ent/turn"
	"github.com/toolgate/toolgate/runtime/dispatch"
	"github.com/toolgate/toolgate/runtime/loop"
	"github.com/toolgate/toolgate/runtime/model"
	"github.com/toolgate/toolgate/runtime/preview"
	"github.com/toolgate/toolgate/tools"
	"github.com/toolgate/toolgate/tools/registry"
)

func TestLargeResultIsPreviewedStoredWholeAndReadByRef(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, d *db.DB) {
		// 60 records of ~300 characters: about 19,000 characters of JSON.
		var records []map[string]any
		for i := range 60 {
			records = append(records, map[string]any{
				"id":   i,
				"text": fmt.Sprintf("Region %02d: the reimbursement deadline is the last working day of the month. %s", i, strings.Repeat("Receipts must be attached. ", 8)),
			})
		}
		big, err := json.Marshal(map[string]any{"records": records})
		require.NoError(t, err)

		p := &scripted{answers: []model.Response{
			{ToolCalls: []model.ToolCall{call("f", "fetch_policy", `{}`)}},
			{Text: "Read it."},
		}}
		fetch := tools.Definition{Name: "fetch_policy", Family: "test", Offered: tools.OfferAlways, Effect: tools.EffectRead,
			Preview: tools.PreviewLarge, Schema: json.RawMessage(`{"type":"object","additionalProperties":false}`)}
		h := newHarness(t, d, p, func(c *loop.Config) { c.Tools = append(registry.All(), fetch) })
		h.disp.Builtins["fetch_policy"] = func(context.Context, dispatch.Scope, json.RawMessage) (json.RawMessage, error) {
			return big, nil
		}
		conv := h.conversation(t)
		first := h.send(t, conv, "Fetch the policy", "")
		got := h.wait(t, first)
		require.Equal(t, turn.StatusCOMPLETED, got.Status, got.Error)
		read := h.calls(t, first)[0]
		require.Equal(t, schematype.OutcomeHits, read.Outcome)
		stored := h.client.StoredResult.GetX(tenancy.System(context.Background()), *read.ResultID)
		require.Equal(t, string(big), string(stored.Content), "stored whole")
		require.EqualValues(t, len(big), stored.Bytes)
		// The model heard a preview within 6,000 characters: valid JSON
		// with the ref and the original counts.
		heard := *read.Heard
		require.LessOrEqual(t, utf8.RuneCountInString(heard), preview.DefaultLimit)
		require.Equal(t, heard, lastTool(p.request(1)).Text)
		var pv map[string]any
		require.NoError(t, json.Unmarshal([]byte(heard), &pv), heard)
		ctxv := pv["_toolResultContext"].(map[string]any)
		require.Equal(t, *read.Ref, ctxv["ref"])
		require.Equal(t, true, ctxv["partial"])
		require.NotEmpty(t, read.Evidence, "what the preview showed is evidence")
		for _, e := range read.Evidence {
			require.Equal(t, *read.Ref, e.Ref)
			require.LessOrEqual(t, e.End, stored.Bytes)
		}

		// The next turn reads further by ref, and searches with a typo.
		readArgs, _ := json.Marshal(map[string]any{"refs": []string{*read.Ref}, "offset": 12000, "maxChars": 1024})
		searchArgs, _ := json.Marshal(map[string]any{"refs": []string{*read.Ref}, "query": "reimbursment deadline", "match": "fuzzy", "maxChars": 1024})
		p.mu.Lock()
		p.answers = []model.Response{
			{ToolCalls: []model.ToolCall{call("x", "read_tool_result", string(readArgs)), call("y", "read_tool_result", string(searchArgs))}},
			{Text: "Done."},
		}
		p.mu.Unlock()
		second := h.send(t, conv, "What does it say further down?", "")
		require.Equal(t, turn.StatusCOMPLETED, h.wait(t, second).Status)
		rc := h.calls(t, second)
		require.Equal(t, schematype.OutcomeHits, rc[0].Outcome, *rc[0].Heard)
		require.Equal(t, schematype.OutcomeHits, rc[1].Outcome, *rc[1].Heard)
		require.Contains(t, *rc[1].Heard, "reimbursement deadline")
		for _, c := range rc {
			require.NotEmpty(t, c.Evidence, c.Name)
			for _, e := range c.Evidence {
				require.Equal(t, *read.Ref, e.Ref)
				// Each span is text the model was shown.
				require.Contains(t, *c.Heard, jsonText(string(big[e.Start:min(e.End, e.Start+40)])))
			}
		}
	})
}

// jsonText is how a stretch of text appears inside a JSON string.
func jsonText(s string) string {
	b, _ := json.Marshal(s)
	return string(b[1 : len(b)-1])
}

func TestForeignRefInArgumentsIsRefusedLikeANonexistentOne(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, d *db.DB) {
		p := &scripted{answers: []model.Response{
			{ToolCalls: []model.ToolCall{call("c", "calculator", `{"expression": "1+2"}`)}},
			{Text: "3"},
		}}
		h := newHarness(t, d, p)
		// A result of another conversation of the same user: real, but not
		// this turn's to read.
		elsewhere := h.send(t, h.conversation(t), "add", "")
		h.wait(t, elsewhere)
		foreign := *h.calls(t, elsewhere)[0].Ref
		madeUp := "r_" + strings.Repeat("A", len(foreign)-2)

		p.mu.Lock()
		p.answers = []model.Response{
			{ToolCalls: []model.ToolCall{
				call("f", "read_tool_result", `{"refs": ["`+foreign+`"]}`),
				call("m", "read_tool_result", `{"refs": ["`+madeUp+`"]}`),
			}},
			{Text: "Nothing there."},
		}
		p.mu.Unlock()
		id := h.send(t, h.conversation(t), "peek at the other result", "")
		require.Equal(t, turn.StatusCOMPLETED, h.wait(t, id).Status)
		calls := h.calls(t, id)
		require.Len(t, calls, 2)
		require.Equal(t, calls[0].Outcome, calls[1].Outcome)
		require.NotEqual(t, schematype.OutcomeHits, calls[0].Outcome)
		// Word for word the same, but for the ref the model itself sent.
		require.Equal(t, strings.ReplaceAll(*calls[0].Heard, foreign, "REF"), strings.ReplaceAll(*calls[1].Heard, madeUp, "REF"))
		require.Contains(t, *calls[0].Heard, "not found")
		require.Empty(t, calls[0].Evidence, "a failed read shows nothing")
	})
}

func TestReplayLinesHoldAcrossTurns(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, d *db.DB) {
		big := strings.Repeat("All receipts go to finance within 30 days. ", 150)
		args, err := json.Marshal(map[string]any{"files": []map[string]any{{"path": "a.txt", "content": big[:3900]}}})
		require.NoError(t, err)
		p := &scriptedCycle{answers: []model.Response{
			{ToolCalls: []model.ToolCall{call("w", "write_file", string(args))}},
			{ToolCalls: []model.ToolCall{call("r", "read_file", `{"path": "a.txt"}`)}},
			{Text: "ok"},
		}}
		rec := &recording{inner: p}
		h := newHarness(t, d, rec)
		conv := h.conversation(t)
		var turns []string
		for i := range 4 {
			id := h.send(t, conv, fmt.Sprintf("turn %d", i+1), "")
			require.Equal(t, turn.StatusCOMPLETED, h.wait(t, id).Status)
			turns = append(turns, id)
		}
		ref := *h.calls(t, turns[0])[1].Ref
		// What turn 1's read replays as, seen from the first model call of
		// turns 2, 3 and 4.
		replayed := func(turnIndex int) string {
			req := rec.first(turnIndex)
			for _, m := range req.Messages {
				if m.Role == model.RoleTool && strings.Contains(m.Text, ref) {
					return m.Text
				}
			}
			return ""
		}
		inWindow, stillIn, outside := replayed(1), replayed(2), replayed(3)
		require.Contains(t, inWindow, "chars cut; read_tool_result ref "+ref)
		require.Equal(t, inWindow, stillIn, "the line is written once and does not change")
		line := inWindow[strings.LastIndex(inWindow, "\n")+1:]
		require.Equal(t, "[HITS] "+line, outside, "outside the window, the same line beside the outcome")
		// The write's acknowledgement crossed whole: it carries no line.
		writes := 0
		for _, m := range rec.first(3).Messages {
			if m.Role == model.RoleTool && m.ToolName == "write_file" {
				writes++
				require.NotContains(t, m.Text, "chars cut", m.Text)
			}
		}
		require.Equal(t, 3, writes)
	})
}

// recording keeps the first request of each turn.
type recording struct {
	inner model.Provider
	mu    sync.Mutex
	turns []model.Request
	last  string
}

func (r *recording) Name() string { return r.inner.Name() }

func (r *recording) Complete(ctx context.Context, req model.Request) (*model.Response, error) {
	opening := req.Messages[len(req.Messages)-1]
	r.mu.Lock()
	if opening.Role == model.RoleUser && opening.Text != r.last {
		r.turns = append(r.turns, req)
		r.last = opening.Text
	}
	r.mu.Unlock()
	return r.inner.Complete(ctx, req)
}

func (r *recording) first(turn int) model.Request {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.turns[turn]
}

// TestCatalogueResultsBypassPreviews lists more tools than fit a preview:
// every name comes back, whole.
func TestCatalogueResultsBypassPreviews(t *testing.T) {
	t.Parallel()
	p := &scripted{answers: []model.Response{
		{ToolCalls: []model.ToolCall{call("l", "list_tools", `{}`)}},
		{Text: "Listed."},
	}}
	h := newHarness(t, dbtest.Open(t, dbtest.SQLite), p)
	var allowed []string
	for i := range 150 {
		allowed = append(allowed, fmt.Sprintf("export_pipeline_report_number_%03d", i))
	}
	h.gql(t, `mutation($a: [String!]!) { registerApplication(input: {name: "crm", url: "http://127.0.0.1:9/mcp", allowedTools: $a}) { id } }`,
		map[string]any{"a": allowed})
	listed := []string{"list_tools"}
	for _, name := range allowed {
		listed = append(listed, "crm__"+name)
	}
	id := h.send(t, h.conversation(t, listed...), "What can you do?", "")
	require.Equal(t, turn.StatusCOMPLETED, h.wait(t, id).Status)
	c := h.calls(t, id)[0]
	require.Equal(t, schematype.OutcomeHits, c.Outcome)
	require.Greater(t, utf8.RuneCountInString(*c.Heard), preview.DefaultLimit, "larger than any preview")
	stored := h.client.StoredResult.GetX(tenancy.System(context.Background()), *c.ResultID)
	require.Equal(t, string(stored.Content), *c.Heard, "passed whole")
	for _, name := range allowed {
		require.Contains(t, *c.Heard, "crm__"+name)
	}
}

// TestLongArgumentsAreNotReplayedToLaterTurns writes a 240,000-character
// file, then asks again: the later turn's request replays what was asked
// (400 characters of the content) with a line naming the cut and a ref
// that reads the arguments whole. (The payload used to go into every later
// model call.)
func TestLongArgumentsAreNotReplayedToLaterTurns(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, d *db.DB) {
		content := strings.Repeat("Line of the quarterly ledger.\n", 8_000)
		args, err := json.Marshal(map[string]any{"files": []map[string]any{{"path": "ledger.txt", "content": content}}})
		require.NoError(t, err)
		p := &scripted{answers: []model.Response{
			{ToolCalls: []model.ToolCall{call("w", "write_file", string(args))}},
			{Text: "Saved."},
			{Text: "It is saved."},
		}}
		h := newHarness(t, d, p)
		conv := h.conversation(t)
		first := h.send(t, conv, "Save the ledger", "")
		require.Equal(t, turn.StatusCOMPLETED, h.wait(t, first).Status)
		second := h.send(t, conv, "Is it saved?", "")
		require.Equal(t, turn.StatusCOMPLETED, h.wait(t, second).Status)

		w := h.calls(t, first)[0]
		require.Equal(t, schematype.OutcomeHits, w.Outcome)
		require.JSONEq(t, string(args), w.Arguments, "the record keeps the arguments whole")
		require.NotNil(t, w.ArgumentsRef)

		// The second step of the first turn still sees its own call whole.
		require.Greater(t, requestChars(p.request(1)), len(content))
		later := p.request(2)
		require.Less(t, requestChars(later), 20_000, "the payload is not replayed")
		var line string
		for _, m := range later.Messages {
			if m.Role == model.RoleTool && m.ToolName == "write_file" {
				line = m.Text[strings.LastIndex(m.Text, "\n")+1:]
			}
		}
		require.Equal(t, "[arguments cut: files[0].content ~240000 chars; read_tool_result ref "+*w.ArgumentsRef+" has them whole]", line)

		// The ref reads them whole, as any stored result of the conversation.
		data := h.gql(t, `query($c: ID, $r: [String!]!) { toolResults(conversationId: $c, refs: $r, maxChars: 20000) { reads { totalChars text } } }`,
			map[string]any{"c": conv, "r": []string{*w.ArgumentsRef}})
		read := data["toolResults"].(map[string]any)["reads"].([]any)[0].(map[string]any)
		require.EqualValues(t, utf8.RuneCount(args), read["totalChars"])
		require.True(t, strings.HasPrefix(string(args), read["text"].(string)))
		// And read_transcript names it beside the cut arguments.
		tr := h.gql(t, `query($c: ID!) { transcript(conversationId: $c, fromTurn: 1, toTurn: 1) { text turns { toolCalls { argumentsTruncated argumentsRef } } } }`,
			map[string]any{"c": conv})["transcript"].(map[string]any)
		require.Contains(t, tr["text"], "arguments ref "+*w.ArgumentsRef)
	})
}

func requestChars(req model.Request) int {
	n := 0
	for _, m := range req.Messages {
		n += len(m.Text)
		for _, c := range m.ToolCalls {
			n += len(c.Arguments)
		}
	}
	return n
}
