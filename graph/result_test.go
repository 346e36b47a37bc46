package graph_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/db"
	"github.com/toolgate/toolgate/db/dbtest"
	"github.com/toolgate/toolgate/ent"
	"github.com/toolgate/toolgate/ent/schematype"
	"github.com/toolgate/toolgate/ent/tenancy"
	"github.com/toolgate/toolgate/ent/turn"
	"github.com/toolgate/toolgate/graph/gid"
	"github.com/toolgate/toolgate/runtime/dispatch"
	"github.com/toolgate/toolgate/tools"
	"github.com/toolgate/toolgate/tools/result"
)

// storeResult adds a finished turn to the conversation (a global id) with
// one tool call whose result is stored under ref, as the runtime stores it.
func storeResult(t testing.TB, c *ent.Client, conversationID, ref string, kind schematype.ResultKind, content string) {
	t.Helper()
	ctx := tenancy.System(context.Background())
	convID, err := gid.Decode(conversationID)
	require.NoError(t, err)
	n := c.Turn.Query().Where(turn.ConversationID(convID)).CountX(ctx)
	tu := c.Turn.Create().SetConversationID(convID).SetNumber(n + 1).SetUserText("look it up").
		SetAnswer("done").SetStatus(turn.StatusCOMPLETED).SaveX(ctx)
	sr := c.StoredResult.Create().SetConversationID(convID).SetRef(ref).SetKind(kind).SetContent([]byte(content)).
		SetChars(int64(utf8.RuneCountInString(content))).SetBytes(int64(len(content))).SetItems(1).SaveX(ctx)
	c.ToolCall.Create().SetTurnID(tu.ID).SetPosition(0).SetName("research_web").
		SetArguments(`{"query":"policy"}`).SetOutcome(schematype.OutcomeHits).SetAttempts(1).
		SetRef(ref).SetResultID(sr.ID).SaveX(ctx)
}

// toolResults is the read_tool_result operation with every field, as a
// portal would ask it.
const toolResultsQuery = `query($c: ID, $refs: [String!]!, $offset: Int, $maxChars: Int, $query: String, $match: MatchMode, $contextChars: Int) {
  toolResults(conversationId: $c, refs: $refs, offset: $offset, maxChars: $maxChars, query: $query, match: $match, contextChars: $contextChars) {
    reads { ref kind text offset nextOffset totalChars bytes truncatedAtSource absent error evidence { ref start end } }
    searches { ref kind hits shown totalChars excerpts { offset text matchOffset edits hits } absent error evidence { ref start end } }
    failures { item input message }
    evidence { ref start end }
  }
}`

// requireSpans checks that each evidence span, sliced out of the stored
// content, is exactly the text shown.
func requireSpans(t *testing.T, content map[string]string, spans any, shown ...string) {
	t.Helper()
	list := spans.([]any)
	require.Len(t, list, len(shown))
	for i, s := range list {
		ref := get(s, "ref").(string)
		start, end := int(get(s, "start").(float64)), int(get(s, "end").(float64))
		require.Equal(t, shown[i], content[ref][start:end], "span %d of %s", i, ref)
	}
}

func TestReadToolResult(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, d *db.DB) {
		b := setup(t, d)
		agentID := b.createAgent(t, b.alice.Token, "Helper")
		conv := b.startConversation(t, b.alice.Token, agentID, "expenses")
		long := strings.Repeat("Zoë’s café — 30 € ✓ 😀\n", 400) // 22 characters a line, 8,800 in all
		content := map[string]string{"r_long": long, "r_json": `{"claims":[{"who":"Zoë","eur":30}]}`}
		storeResult(t, b.client, conv, "r_long", schematype.KindText, long)
		storeResult(t, b.client, conv, "r_json", schematype.KindJSON, content["r_json"])
		storeResult(t, b.client, conv, "r_empty", schematype.KindText, "")
		storeResult(t, b.client, conv, "r_png", schematype.KindMedia, "\x89PNG\r\n\x1a\n")

		// By hand with an API token: the default window, then on to the end.
		data := b.do(t, b.alice.Token, toolResultsQuery, map[string]any{"c": conv, "refs": []string{"r_long"}}).ok(t)
		read := get(data, "toolResults", "reads", 0)
		text := get(read, "text").(string)
		require.Equal(t, string([]rune(long)[:result.DefaultMaxChars]), text)
		require.EqualValues(t, 0, get(read, "offset"))
		require.EqualValues(t, result.DefaultMaxChars, get(read, "nextOffset"))
		require.EqualValues(t, 22*400, get(read, "totalChars"))
		require.EqualValues(t, len(long), get(read, "bytes"))
		require.Equal(t, "TEXT", get(read, "kind"))
		require.Equal(t, false, get(read, "truncatedAtSource"))
		require.Nil(t, get(read, "error"))
		requireSpans(t, content, get(data, "toolResults", "evidence"), text)
		requireSpans(t, content, get(read, "evidence"), text)
		require.Empty(t, get(data, "toolResults", "searches"))
		require.Empty(t, get(data, "toolResults", "failures"))

		offset := 0
		var pages []string
		for {
			data := b.do(t, b.alice.Token, toolResultsQuery, map[string]any{"c": conv, "refs": []string{"r_long"}, "offset": offset, "maxChars": 3000}).ok(t)
			read := get(data, "toolResults", "reads", 0)
			require.EqualValues(t, offset, get(read, "offset"))
			pages = append(pages, get(read, "text").(string))
			requireSpans(t, content, get(read, "evidence"), pages[len(pages)-1])
			next := get(read, "nextOffset")
			if next == nil {
				break
			}
			offset = int(next.(float64))
		}
		require.Len(t, pages, 3)
		require.Equal(t, long, strings.Join(pages, ""))

		// The portal's readToolResult: the same windows, with or without
		// the conversation.
		const readQuery = `query($c: ID, $refs: [String!]!, $offset: Int, $maxChars: Int) {
  readToolResult(conversationId: $c, refs: $refs, offset: $offset, maxChars: $maxChars) { ref kind text nextOffset totalChars absent error evidence { ref start end } }
}`
		for _, c := range []any{conv, nil} {
			data = b.do(t, b.alice.Token, readQuery, map[string]any{"c": c, "refs": []string{"r_json", "r_long"}, "offset": 10, "maxChars": 1024}).ok(t)
			reads := get(data, "readToolResult").([]any)
			require.Len(t, reads, 2)
			require.Equal(t, content["r_json"][10:], get(reads[0], "text"))
			require.Equal(t, "JSON", get(reads[0], "kind"))
			// One budget for the call: what the short result leaves goes
			// to the long one.
			second := get(reads[1], "text").(string)
			require.Equal(t, 1024-utf8.RuneCountInString(content["r_json"][10:]), utf8.RuneCountInString(second))
			require.EqualValues(t, 10+utf8.RuneCountInString(second), get(reads[1], "nextOffset"))
			requireSpans(t, content, get(reads[0], "evidence"), content["r_json"][10:])
			requireSpans(t, content, get(reads[1], "evidence"), second)
		}

		// One bad ref of three keeps the other two; a row with nothing in
		// it is absent; media give kind and size, never text or evidence.
		data = b.do(t, b.alice.Token, toolResultsQuery, map[string]any{"c": conv, "refs": []string{"r_empty", "r_nowhere", "r_png"}}).ok(t)
		reads := get(data, "toolResults", "reads").([]any)
		require.Equal(t, []any{"r_empty", "r_nowhere", "r_png"}, []any{get(reads[0], "ref"), get(reads[1], "ref"), get(reads[2], "ref")})
		require.Equal(t, true, get(reads[0], "absent"))
		require.Nil(t, get(reads[0], "text"))
		require.Equal(t, `ref "r_nowhere" not found`, get(reads[1], "error"))
		require.Nil(t, get(reads[1], "kind"))
		require.Equal(t, "MEDIA", get(reads[2], "kind"))
		require.EqualValues(t, 8, get(reads[2], "bytes"))
		require.Nil(t, get(reads[2], "text"))
		require.Equal(t, false, get(reads[2], "absent"))
		require.Empty(t, get(data, "toolResults", "evidence"))
		require.Equal(t, []any{map[string]any{"item": 1.0, "input": "r_nowhere", "message": `ref "r_nowhere" not found`}},
			get(data, "toolResults", "failures"))
		data = b.do(t, b.alice.Token, toolResultsQuery, map[string]any{"c": conv, "refs": []string{"r_empty", "r_long", "r_nowhere"}}).ok(t)
		reads = get(data, "toolResults", "reads").([]any)
		require.Equal(t, true, get(reads[0], "absent"))
		require.Equal(t, string([]rune(long)[:result.DefaultMaxChars]), get(reads[1], "text"))
		require.NotNil(t, get(reads[2], "error"))
		requireSpans(t, content, get(data, "toolResults", "evidence"), get(reads[1], "text").(string))
	})
}

func TestReadToolResultThroughScopeToken(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, d *db.DB) {
		b := setup(t, d)
		agentID := b.createAgent(t, b.alice.Token, "Helper")
		conv := b.startConversation(t, b.alice.Token, agentID, "expenses")
		policy := strings.Repeat("Travel is booked through the portal. ", 60) +
			"Claims: the Reimbursement Deadline is 30 days after the trip. " +
			strings.Repeat("Hotels are approved by a manager. ", 60) +
			"Late claims miss the reimbursement deadline — they are refused."
		content := map[string]string{"r_policy": policy}
		storeResult(t, b.client, conv, "r_policy", schematype.KindText, policy)
		tok := b.scopeToken(t, conv, result.Definition.Name)

		// The runtime posts the definition's operation with the model's
		// arguments, its conversation left to the token.
		run := func(args map[string]any) map[string]any {
			t.Helper()
			data := b.do(t, tok, result.Definition.Operation, args).ok(t)
			return get(data, result.Definition.Field).(map[string]any)
		}
		got := run(map[string]any{"refs": []string{"r_policy"}, "maxChars": 1024})
		text := get(got, "reads", 0, "text").(string)
		require.Equal(t, string([]rune(policy)[:1024]), text)
		requireSpans(t, content, get(got, "evidence"), text)
		raw, err := json.Marshal(got)
		require.NoError(t, err)
		require.False(t, result.Definition.Absent(raw))

		tests := []struct {
			name      string
			query     string
			match     string
			wantHits  int
			wantEdits int
		}{
			{name: "exact, any case", query: "REIMBURSEMENT deadline", match: "exact", wantHits: 2},
			{name: "exact, default", query: "reimbursement deadline", wantHits: 2},
			{name: "exact misses a typo", query: "reimbursment deadline", match: "exact"},
			{name: "fuzzy, one typo", query: "reimbursment deadline", match: "fuzzy", wantHits: 2, wantEdits: 1},
			{name: "fuzzy, two typos", query: "reimbursment dedline", match: "fuzzy", wantHits: 2, wantEdits: 2},
		}
		for _, tt := range tests {
			args := map[string]any{"refs": []string{"r_policy"}, "query": tt.query, "contextChars": 40}
			if tt.match != "" {
				args["match"] = tt.match
			}
			got := run(args)
			search := get(got, "searches", 0)
			require.EqualValues(t, tt.wantHits, get(search, "hits"), tt.name)
			excerpts := get(search, "excerpts").([]any)
			require.Len(t, excerpts, tt.wantHits, tt.name)
			var shown []string
			for _, ex := range excerpts {
				text := get(ex, "text").(string)
				require.Contains(t, strings.ToLower(text), "deadline", tt.name)
				require.EqualValues(t, tt.wantEdits, get(ex, "edits"), tt.name)
				shown = append(shown, text)
			}
			requireSpans(t, content, get(got, "evidence"), shown...)
			raw, err := json.Marshal(got)
			require.NoError(t, err)
			require.Equal(t, tt.wantHits == 0, result.Definition.Absent(raw), tt.name)
		}

		// The portal's search field, by hand.
		data := b.do(t, b.alice.Token, `query($c: ID, $refs: [String!]!) {
  searchToolResults(conversationId: $c, refs: $refs, query: "reimbursment deadline", match: fuzzy, contextChars: 0) { ref hits shown excerpts { text edits } evidence { ref start end } }
}`, map[string]any{"c": conv, "refs": []string{"r_policy"}}).ok(t)
		search := get(data, "searchToolResults", 0)
		require.EqualValues(t, 2, get(search, "hits"))
		require.Equal(t, "Reimbursement Deadline", get(search, "excerpts", 0, "text"))
		requireSpans(t, content, get(search, "evidence"), "Reimbursement Deadline", "reimbursement deadline")

		// MatchMode's SCREAMING_CASE values mean what the deprecated
		// lower-case ones do, as literals and as variables.
		for _, tt := range []struct {
			give     string
			wantHits int
		}{{"FUZZY", 2}, {"fuzzy", 2}, {"EXACT", 0}, {"exact", 0}} {
			d := b.do(t, b.alice.Token, `query($c: ID, $refs: [String!]!, $m: MatchMode) {
  toolResults(conversationId: $c, refs: $refs, query: "reimbursment deadline", match: $m) { searches { hits } }
}`, map[string]any{"c": conv, "refs": []string{"r_policy"}, "m": tt.give}).ok(t)
			require.EqualValues(t, tt.wantHits, get(d, "toolResults", "searches", 0, "hits"), tt.give)
			d = b.do(t, b.alice.Token, `query($c: ID, $refs: [String!]!) {
  toolResults(conversationId: $c, refs: $refs, query: "reimbursment deadline", match: `+tt.give+`) { searches { hits } }
}`, map[string]any{"c": conv, "refs": []string{"r_policy"}}).ok(t)
			require.EqualValues(t, tt.wantHits, get(d, "toolResults", "searches", 0, "hits"), tt.give)
		}

		// A token not offered the tool, or naming another conversation,
		// reaches nothing.
		other := b.startConversation(t, b.alice.Token, agentID, "other")
		for name, r := range map[string]*response{
			"not offered":        b.do(t, b.scopeToken(t, conv, "calculator"), result.Definition.Operation, map[string]any{"refs": []string{"r_policy"}}),
			"other conversation": b.do(t, tok, result.Definition.Operation, map[string]any{"refs": []string{"r_policy"}, "conversationId": other}),
			"portal field":       b.do(t, tok, `{ readToolResult(refs: ["r_policy"]) { text } }`, nil),
		} {
			require.Equal(t, "NOT_FOUND", r.code(t), name)
		}
	})
}

func TestReadToolResultRefusesIdentically(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, d *db.DB) {
		b := setup(t, d)
		agentID := b.createAgent(t, b.alice.Token, "Helper")
		conv := b.startConversation(t, b.alice.Token, agentID, "mine")
		sibling := b.startConversation(t, b.alice.Token, agentID, "another of mine")
		bobConv := b.startConversation(t, b.bob.Token, b.createAgent(t, b.bob.Token, "Bob's"), "bob's")
		eveConv := b.startConversation(t, b.eve.Token, b.createAgent(t, b.eve.Token, "Eve's"), "eve's")
		storeResult(t, b.client, conv, "r_mine", schematype.KindText, "mine to read")
		storeResult(t, b.client, sibling, "r_sibling", schematype.KindText, "same user, other conversation")
		storeResult(t, b.client, bobConv, "r_bobbob", schematype.KindText, "same organisation, other user")
		storeResult(t, b.client, eveConv, "r_eveeve", schematype.KindText, "another organisation")
		tok := b.scopeToken(t, conv, result.Definition.Name)
		const madeUp = "r_madeup"

		// Every refused ref gets the same bytes as a made-up one, once the
		// ref itself (which the answer repeats) is masked.
		answer := func(r *response, ref string) string {
			return strings.ReplaceAll(string(r.Raw), ref, "REF")
		}
		calls := map[string]func(ref string) *response{
			"scope token, read": func(ref string) *response {
				return b.do(t, tok, result.Definition.Operation, map[string]any{"refs": []string{ref}})
			},
			"scope token, search": func(ref string) *response {
				return b.do(t, tok, result.Definition.Operation, map[string]any{"refs": []string{ref}, "query": "other", "match": "fuzzy"})
			},
			"api token, conversation": func(ref string) *response {
				return b.do(t, b.alice.Token, toolResultsQuery, map[string]any{"c": conv, "refs": []string{ref}})
			},
			"api token, portal read": func(ref string) *response {
				return b.do(t, b.alice.Token, `query($c: ID, $refs: [String!]!) { readToolResult(conversationId: $c, refs: $refs) { ref text error } }`,
					map[string]any{"c": conv, "refs": []string{ref}})
			},
		}
		for name, call := range calls {
			want := answer(call(madeUp), madeUp)
			require.Contains(t, want, `ref \"REF\" not found`, name)
			for _, ref := range []string{"r_sibling", "r_bobbob", "r_eveeve"} {
				require.Equal(t, want, answer(call(ref), ref), "%s: %s", name, ref)
			}
			require.NotContains(t, answer(call("r_mine"), "r_mine"), "not found", name)
		}

		// Without a conversation an API token reaches what it may read:
		// Bob reaches his own result, not Alice's, nor Eve's, and is told
		// so in the made-up ref's words.
		const q = `query($refs: [String!]!) { readToolResult(refs: $refs) { ref text error } }`
		bob := func(ref string) string {
			return answer(b.do(t, b.bob.Token, q, map[string]any{"refs": []string{ref}}), ref)
		}
		require.Equal(t, "same organisation, other user", get(b.do(t, b.bob.Token, q, map[string]any{"refs": []string{"r_bobbob"}}).ok(t), "readToolResult", 0, "text"))
		for _, ref := range []string{"r_mine", "r_sibling", "r_eveeve"} {
			require.Equal(t, bob(madeUp), bob(ref), ref)
		}
		// A conversation out of reach is refused as a whole, like any id.
		r := b.do(t, b.eve.Token, toolResultsQuery, map[string]any{"c": conv, "refs": []string{"r_mine"}})
		require.Equal(t, "NOT_FOUND", r.code(t))
		require.Equal(t, string(r.Raw), string(b.do(t, b.eve.Token, toolResultsQuery, map[string]any{"c": gid.Encode(1<<40 + 7), "refs": []string{"r_mine"}}).Raw))
	})
}

func TestReadToolResultLimits(t *testing.T) {
	t.Parallel()
	b := setup(t, dbtest.Open(t, dbtest.SQLite))
	agentID := b.createAgent(t, b.alice.Token, "Helper")
	conv := b.startConversation(t, b.alice.Token, agentID, "limits")
	storeResult(t, b.client, conv, "r_a", schematype.KindText, strings.Repeat("a", 30000))
	tok := b.scopeToken(t, conv, result.Definition.Name)
	tests := []struct {
		name    string
		give    map[string]any
		wantMsg string
	}{
		{name: "maxChars below", give: map[string]any{"refs": []string{"r_a"}, "maxChars": 1023}, wantMsg: "maxChars out of range: 1023 is not between 1024 and 20000"},
		{name: "maxChars above", give: map[string]any{"refs": []string{"r_a"}, "maxChars": 20001}, wantMsg: "maxChars out of range: 20001 is not between 1024 and 20000"},
		{name: "search maxChars above", give: map[string]any{"refs": []string{"r_a"}, "query": "a", "maxChars": 50000}, wantMsg: "maxChars out of range: 50000 is not between 1024 and 20000"},
		{name: "four refs", give: map[string]any{"refs": []string{"r_a", "r_a", "r_a", "r_a"}}, wantMsg: "refs: at most 3 refs per call, got 4"},
		{name: "no refs", give: map[string]any{"refs": []string{}}, wantMsg: "refs: name 1 to 3 refs"},
		{name: "empty query", give: map[string]any{"refs": []string{"r_a"}, "query": "  "}, wantMsg: "query is empty"},
		{name: "contextChars", give: map[string]any{"refs": []string{"r_a"}, "query": "a", "contextChars": 5000}, wantMsg: "contextChars: 5000 is not between 0 and 1000"},
		{name: "match without query", give: map[string]any{"refs": []string{"r_a"}, "match": "fuzzy"}, wantMsg: "match and contextChars go with query"},
		{name: "offset in search", give: map[string]any{"refs": []string{"r_a"}, "query": "a", "offset": 5}, wantMsg: "offset pages reads, not searches"},
		{name: "negative offset", give: map[string]any{"refs": []string{"r_a"}, "offset": -5}, wantMsg: "offset: -5 is negative"},
	}
	for _, tt := range tests {
		r := b.do(t, tok, result.Definition.Operation, tt.give)
		require.Equal(t, "BAD_USER_INPUT", r.code(t), tt.name)
		require.Contains(t, r.Errors[0].Message, tt.wantMsg, tt.name)
	}
	r := b.do(t, tok, result.Definition.Operation, map[string]any{"refs": []string{"r_a"}, "query": "a", "match": "regex"})
	require.NotEmpty(t, r.Errors)
	require.Contains(t, r.Errors[0].Message, "regex")

	// The bounds themselves, and the default.
	for _, n := range []any{1024, 20000, nil} {
		data := b.do(t, tok, result.Definition.Operation, map[string]any{"refs": []string{"r_a"}, "maxChars": n}).ok(t)
		want := result.DefaultMaxChars
		if n != nil {
			want = n.(int)
		}
		require.Len(t, get(data, "toolResults", "reads", 0, "text"), want, fmt.Sprint(n))
	}
	// An API token names the conversation.
	r = b.do(t, b.alice.Token, toolResultsQuery, map[string]any{"refs": []string{"r_a"}})
	require.Equal(t, "BAD_USER_INPUT", r.code(t))
	require.Contains(t, r.Errors[0].Message, "conversationId is required")
}

// TestReadToolResultThroughDispatch runs the tool as a turn does: the
// runtime's dispatcher posts the operation with the model's arguments and
// lifts evidence and failures from the answer; what the model hears of
// the read's own result passes whole.
func TestReadToolResultThroughDispatch(t *testing.T) {
	t.Parallel()
	b := setup(t, dbtest.Open(t, dbtest.SQLite))
	ctx := tenancy.System(context.Background())
	agentID := b.createAgent(t, b.alice.Token, "Helper")
	conv := b.startConversation(t, b.alice.Token, agentID, "expenses")
	policy := strings.Repeat("Trips are booked through the portal — ✓. ", 150) + "The reimbursement deadline is 30 days."
	storeResult(t, b.client, conv, "r_policy", schematype.KindText, policy)
	storeResult(t, b.client, conv, "r_empty", schematype.KindText, "")
	d := dispatch.New(b.srv.URL+"/graphql", http.DefaultClient, nil)
	s := dispatch.Scope{Token: b.scopeToken(t, conv, result.Definition.Name),
		Offered: map[string]tools.Definition{result.Definition.Name: result.Definition}}
	call := func(args string) dispatch.Result {
		return d.Do(ctx, s, dispatch.Call{ID: "c1", Name: result.Definition.Name, Arguments: json.RawMessage(args)})
	}

	res := call(`{"refs": ["r_policy", "r_guessed"], "offset": 100, "maxChars": 1024}`)
	require.Equal(t, schematype.OutcomeHits, res.Outcome, res.Message)
	want := string([]rune(policy)[100 : 100+1024])
	start := int64(len(string([]rune(policy)[:100])))
	require.Equal(t, []schematype.Span{{Ref: "r_policy", Start: start, End: start + int64(len(want))}}, res.Evidence)
	require.Equal(t, []schematype.ItemFailure{{Item: 1, Input: "r_guessed", Kind: schematype.FailureRefused, Message: `ref "r_guessed" not found`}}, res.Failures)
	heard, err := dispatch.Render(res, result.Definition, "r_read", false)
	require.NoError(t, err)
	require.Contains(t, heard.Text, `"nextOffset":1124`)
	require.Equal(t, want, get(decode(t, res.Content), "reads", 0, "text"))

	res = call(`{"refs": ["r_policy"], "query": "reimbursment deadline", "match": "fuzzy", "contextChars": 0}`)
	require.Equal(t, schematype.OutcomeHits, res.Outcome, res.Message)
	require.Len(t, res.Evidence, 1)
	require.Equal(t, "reimbursement deadline", policy[res.Evidence[0].Start:res.Evidence[0].End])

	// Nothing to show is an absence, and shows nothing.
	for _, args := range []string{
		`{"refs": ["r_empty", "r_guessed"]}`,
		`{"refs": ["r_policy"], "query": "no such words"}`,
	} {
		res = call(args)
		require.Equal(t, schematype.OutcomeAbsence, res.Outcome, args)
		require.Empty(t, res.Evidence, args)
	}
	res = call(`{"refs": ["r_policy"], "maxChars": 100}`)
	require.Equal(t, schematype.OutcomeRefused, res.Outcome, "the schema refuses it before it is sent")
}

func decode(t *testing.T, raw []byte) any {
	t.Helper()
	var v any
	require.NoError(t, json.Unmarshal(raw, &v))
	return v
}
