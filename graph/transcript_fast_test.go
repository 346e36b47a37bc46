package graph_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/vektah/gqlparser/v2/ast"

	"github.com/toolgate/toolgate/db"
	"github.com/toolgate/toolgate/db/dbtest"
	"github.com/toolgate/toolgate/ent/schematype"
	"github.com/toolgate/toolgate/ent/tenancy"
	"github.com/toolgate/toolgate/ent/turn"
	"github.com/toolgate/toolgate/graph"
	"github.com/toolgate/toolgate/graph/console"
	"github.com/toolgate/toolgate/graph/generated"
	"github.com/toolgate/toolgate/graph/gid"
)

// TestFastTranscriptMatchesResolvers reads the same conversations through
// the transcript's hot path and through the resolvers alone, and wants the
// same bytes: every page of the console's query, reshaped selections,
// refusals, and shapes the hot path leaves to the resolvers.
func TestFastTranscriptMatchesResolvers(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, d *db.DB) {
		w := newBothWays(t, d)
		b, slow, counter, same := w.b, w.slow, w.counter, w.same

		agentID := b.createAgent(t, b.alice.Token, "Helper")
		conv := b.startConversation(t, b.alice.Token, agentID, "odd \"quoted\"\ttitle\x01 ✓")
		convID, err := gid.Decode(conv)
		require.NoError(t, err)
		seedTranscript(t, b.client, convID, 7, 3)
		seedOddTurns(t, b, convID)
		untitled := b.startConversation(t, b.alice.Token, agentID, "")

		op := console.Operations()["transcript"]
		t.Run("every page of the console's query", func(t *testing.T) {
			var after any
			for pages := 0; ; pages++ {
				require.Less(t, pages, 10)
				data := same(t, true, b.alice.Token, op, map[string]any{"id": conv, "first": 3, "after": after}).ok(t)
				info := get(data, "conversation", "turns", "pageInfo").(map[string]any)
				if info["hasNextPage"] == false {
					break
				}
				after = info["endCursor"]
			}
			same(t, true, b.alice.Token, op, map[string]any{"id": conv})
			counter.Reset()
			b.do(t, b.alice.Token, op, map[string]any{"id": conv, "first": 100}).ok(t)
			// token, conversation with its user and agent, turns, tool
			// calls with their results, model calls: whatever the length
			// of the conversation.
			require.Len(t, counter.Statements(), 5, counter.Statements())
			// The hot path's statements carry each entity's scope, as ent's
			// would.
			for _, s := range counter.Statements()[1:] {
				require.Contains(t, s, "organization_id", s)
			}
			same(t, true, b.alice.Token, op, map[string]any{"id": conv, "first": 100})
			same(t, true, b.alice.Token, op, map[string]any{"id": untitled})
			data := same(t, true, b.alice.Token, op, map[string]any{"id": conv, "first": 100}).ok(t)
			require.Len(t, get(data, "conversation", "turns", "edges"), 9)
			require.Equal(t, "budget exceeded", get(data, "conversation", "turns", "edges", 7, "node", "toolCalls", 0, "failures", 0, "message"))
		})
		t.Run("other selections", func(t *testing.T) {
			for i, q := range []string{
				`query($id: ID!) { conversation(id: $id) { __typename id t: title ... on Node { id } turns(first: 4, orderBy: [{field: NUMBER}]) {
				  edges { cursor node { __typename ...T } } pageInfo { startCursor hasPreviousPage } } } }
				 fragment T on Turn { n: number toolCalls { result { id kind } failures { kind item } argumentsRef } }`,
				`query($id: ID!) { conversation(id: $id) { turns(first: 2, orderBy: [{field: NUMBER, direction: ASC}]) { edges { node {
				  promptStats { modelCalls inputTokens } modelCalls { prefixTokens costAmount { __typename amount } } } } } } }`,
				`query($id: ID!) { conversation(id: $id) { turns(first: 2, after: "not a cursor", orderBy: [{field: NUMBER}]) { edges { node { id } } } } }`,
				// Shapes the hot path leaves to the resolvers.
				`query($id: ID!) { conversation(id: $id) { turns(first: 3) { totalCount edges { node { id number } } } } }`,
				`query($id: ID!) { conversation(id: $id) { turns(last: 3, orderBy: [{field: NUMBER}]) { edges { node { id number } } } } }`,
				`query($id: ID!) { conversation(id: $id) { turns(first: 0, orderBy: [{field: NUMBER}]) { pageInfo { hasNextPage } } } }`,
				`query($id: ID!) { conversation(id: $id) { turns(first: 3, orderBy: [{field: NUMBER, direction: DESC}]) { edges { node { number } } } } }`,
				`query($id: ID!) { conversation(id: $id) { a: turns(first: 1, orderBy: [{field: NUMBER}]) { edges { node { number } } }
				  b: turns(first: 2, orderBy: [{field: NUMBER}]) { edges { node { number } } } } }`,
			} {
				same(t, i < 2, b.alice.Token, q, map[string]any{"id": conv})
			}
		})
		// Turns created out of their numbers' order: by id they read 12,
		// 11, 10, by number (the contract's default) 10, 11, 12.
		shuffled := b.startConversation(t, b.alice.Token, agentID, "shuffled")
		shuffledID, err := gid.Decode(shuffled)
		require.NoError(t, err)
		for _, n := range []int{12, 11, 10} {
			b.client.Turn.Create().SetConversationID(shuffledID).SetNumber(n).SetUserText(fmt.Sprint("turn ", n)).
				SaveX(tenancy.System(context.Background()))
		}
		t.Run("turns are by number when orderBy is not given", func(t *testing.T) {
			numbers := func(data map[string]any) []any {
				var out []any
				for _, e := range get(data, "conversation", "turns", "edges").([]any) {
					out = append(out, get(e, "node", "number"))
				}
				return out
			}
			for _, q := range []string{
				`query($id: ID!) { conversation(id: $id) { turns(first: 5) { edges { node { number } } } } }`,
				`query($id: ID!) { conversation(id: $id) { turns(first: 5, orderBy: null) { edges { node { number } } } } }`,
				`query($id: ID!) { conversation(id: $id) { turns(last: 5) { edges { node { number } } } } }`,
				`query($id: ID!) { conversation(id: $id) { turns(first: 5) { totalCount edges { node { number } } } } }`,
				`query { conversations(first: 5) { edges { node { title turns(first: 5) { edges { node { number } } } } } } }`,
			} {
				data := same(t, false, b.alice.Token, q, map[string]any{"id": shuffled}).ok(t)
				if strings.Contains(q, "conversations") {
					for _, e := range get(data, "conversations", "edges").([]any) {
						if get(e, "node", "title") == "shuffled" {
							var ns []any
							for _, te := range get(e, "node", "turns", "edges").([]any) {
								ns = append(ns, get(te, "node", "number"))
							}
							require.Equal(t, []any{10.0, 11.0, 12.0}, ns, q)
						}
					}
					continue
				}
				require.Equal(t, []any{10.0, 11.0, 12.0}, numbers(data), q)
			}
		})
		t.Run("generated selections", func(t *testing.T) {
			seed := uint64(time.Now().UnixNano())
			t.Logf("seed %d", seed)
			rnd := rand.New(rand.NewPCG(seed, 33))
			schema := generated.NewExecutableSchema(generated.Config{}).Schema()
			var cursors []string
			for _, e := range get(slow.do(t, b.alice.Token, `query($id: ID!) { conversation(id: $id) { turns(first: 100) { edges { cursor } } } }`,
				map[string]any{"id": conv}).ok(t), "conversation", "turns", "edges").([]any) {
				cursors = append(cursors, get(e, "cursor").(string))
			}
			for range 60 {
				served := rnd.IntN(4) > 0
				q, vars := drawTranscriptQuery(rnd, schema, cursors, served)
				id := conv
				if rnd.IntN(4) == 0 {
					id = shuffled
				}
				vars["id"] = id
				if served {
					takes, err := graph.HotPathTakes(q, vars)
					require.NoError(t, err, q)
					require.True(t, takes, "the hot path leaves %s (%v)", q, vars)
				}
				same(t, false, b.alice.Token, q, vars).ok(t)
			}
		})
		t.Run("refusals", func(t *testing.T) {
			require.Equal(t, "NOT_FOUND", same(t, false, b.bob.Token, op, map[string]any{"id": conv}).code(t), "a colleague's")
			require.Equal(t, "NOT_FOUND", same(t, false, b.eve.Token, op, map[string]any{"id": conv}).code(t), "another organisation's")
			require.Equal(t, "NOT_FOUND", same(t, false, b.alice.Token, op, map[string]any{"id": graph.EncodeID(1<<40 + 77)}).code(t))
			require.Equal(t, "NOT_FOUND", same(t, false, b.scopeToken(t, conv, "calculator"), op, map[string]any{"id": conv}).code(t), "a scope token")
		})
	})
}

// bothWays is a test server over a database whose every statement is
// counted, and a twin over the same database that answers with the
// resolvers alone.
type bothWays struct {
	b, slow *testBundle
	counter *dbtest.Counter
}

func newBothWays(t *testing.T, d *db.DB) *bothWays {
	t.Helper()
	w := &bothWays{counter: dbtest.Count(d)}
	w.b = setup(t, d)
	slow := *w.b
	slow.srv = httptest.NewServer(graph.NewServer(graph.Config{DB: d, Signer: w.b.signer, ResolveTranscripts: true}))
	t.Cleanup(slow.srv.Close)
	w.slow = &slow
	return w
}

// same reads query from both servers and wants the same bytes. hot says
// the hot path answers it: the server's own decision must take it
// (HotPathTakes), and it sends at most 5 statements, the caller's token
// included, none numbering rows (it pages with LIMIT).
func (w *bothWays) same(t *testing.T, hot bool, token, query string, vars map[string]any) *response {
	t.Helper()
	if hot {
		takes, err := graph.HotPathTakes(query, vars)
		require.NoError(t, err, query)
		require.True(t, takes, "the hot path leaves %s (%v)", query, vars)
	}
	w.counter.Reset()
	fast := w.b.do(t, token, query, vars)
	fastStatements := w.counter.Statements()
	want := w.slow.do(t, token, query, vars)
	require.Equal(t, string(want.Raw), string(fast.Raw), "%s %v", query, vars)
	if hot {
		require.LessOrEqual(t, len(fastStatements), 5, fastStatements)
		for _, s := range fastStatements {
			require.NotContains(t, strings.ToUpper(s), "ROW_NUMBER", s)
		}
	}
	return fast
}

// drawTranscriptQuery draws a read of a conversation from the schema:
// random fields of the transcript's types, aliases,
// __typename, fragments named and inline, and the turns paged forward or
// backward, from a cursor or none, ordered by number either way or not at
// all, with arguments written or passed as variables.
//
// served draws only fields the hot path writes, so that it must take the
// read; otherwise any field may be drawn, and the read may fall back.
func drawTranscriptQuery(rnd *rand.Rand, schema *ast.Schema, cursors []string, served bool) (string, map[string]any) {
	d := &drawer{rnd: rnd, schema: schema, served: served}
	selection, fragments := d.selection, &d.fragments
	vars := map[string]any{}
	var decl, args []string
	arg := func(name, typ string, v any) {
		if rnd.IntN(2) == 0 {
			vars[name] = v
			decl = append(decl, "$"+name+": "+typ)
			args = append(args, name+": $"+name)
			return
		}
		text, _ := json.Marshal(v)
		if m, isMap := v.([]map[string]any); isMap {
			var os []string
			for _, o := range m {
				part := "field: " + o["field"].(string)
				if d, ok := o["direction"]; ok {
					part += ", direction: " + d.(string)
				}
				os = append(os, "{"+part+"}")
			}
			text = []byte("[" + strings.Join(os, ",") + "]")
		}
		args = append(args, name+": "+string(text))
	}
	n := 1 + rnd.IntN(12)
	backward := rnd.IntN(2) == 0
	if backward {
		arg("last", "Int", n)
	} else {
		arg("first", "Int", n)
	}
	if rnd.IntN(2) == 0 {
		c := cursors[rnd.IntN(len(cursors))]
		if backward {
			arg("before", "Cursor", c)
		} else {
			arg("after", "Cursor", c)
		}
	}
	switch rnd.IntN(4) {
	case 1:
		arg("orderBy", "[TurnOrder!]", []map[string]any{{"field": "NUMBER"}})
	case 2:
		arg("orderBy", "[TurnOrder!]", []map[string]any{{"field": "NUMBER", "direction": "ASC"}})
	case 3:
		arg("orderBy", "[TurnOrder!]", []map[string]any{{"field": "NUMBER", "direction": "DESC"}})
	}
	node := selection("Turn", 1)
	if node == "" {
		node = "id"
	}
	conn := "edges { " + map[bool]string{true: "cursor ", false: ""}[rnd.IntN(2) == 0] + "node { " + node + " } }"
	if rnd.IntN(2) == 0 {
		conn += " pageInfo { hasNextPage hasPreviousPage startCursor endCursor }"
	}
	top := selection("Conversation", 0)
	q := "query($id: ID!" + strings.Join(append([]string{""}, decl...), ", ") + ") { conversation(id: $id) { " + top +
		" turns(" + strings.Join(args, ", ") + ") { " + conn + " } } } " + strings.Join(*fragments, " ")
	return q, vars
}

// drawer draws selections of the transcript's types from the schema:
// random fields, aliases, __typename, fragments named and inline. served
// draws only fields the hot path writes; root draws a turn's conversation
// too (with its user and agent), as the root turns field reads it.
type drawer struct {
	rnd       *rand.Rand
	schema    *ast.Schema
	served    bool
	root      bool
	fragments []string
	aliases   int
}

func (d *drawer) selection(typ string, depth int) string {
	rnd := d.rnd
	def := d.schema.Types[typ]
	var parts []string
	for _, f := range def.Fields {
		if strings.HasPrefix(f.Name, "__") || len(f.Arguments) > 0 || rnd.IntN(3) == 0 {
			continue
		}
		if _, fast := graph.FastFields(typ)[f.Name]; d.served && !fast {
			continue
		}
		named := d.schema.Types[f.Type.Name()]
		if named.Kind == ast.Object || named.Kind == ast.Interface {
			// Up the graph again, or beyond the transcript: left out.
			if depth > 3 || f.Name == "conversation" && (!d.root || typ != "Turn") || f.Name == "turn" || f.Name == "user" && typ != "Conversation" ||
				f.Name == "agent" && typ != "Conversation" || typ == "Conversation" && f.Name != "user" && f.Name != "agent" && rnd.IntN(4) > 0 {
				continue
			}
			inner := d.selection(named.Name, depth+1)
			if inner == "" {
				continue
			}
			parts = append(parts, f.Name+" { "+inner+" }")
			continue
		}
		name := f.Name
		if rnd.IntN(5) == 0 {
			d.aliases++
			name = fmt.Sprintf("a%d: %s", d.aliases, name)
		}
		parts = append(parts, name)
	}
	if rnd.IntN(4) == 0 {
		parts = append(parts, "__typename")
	}
	if len(parts) == 0 {
		return ""
	}
	rnd.Shuffle(len(parts), func(i, j int) { parts[i], parts[j] = parts[j], parts[i] })
	body := strings.Join(parts, " ")
	switch rnd.IntN(5) {
	case 0:
		name := fmt.Sprintf("F%d", len(d.fragments))
		d.fragments = append(d.fragments, "fragment "+name+" on "+typ+" { "+body+" }")
		return "..." + name
	case 1:
		return "... on " + typ + " { " + body + " }"
	}
	return body
}

// seedOddTurns adds turns whose values stress the encoding: text to escape,
// nulls, failures, a flagged result, a result out of reach and a cost.
func seedOddTurns(t testing.TB, b *testBundle, convID int) {
	t.Helper()
	ctx := tenancy.System(context.Background())
	c := b.client
	conv := c.Conversation.GetX(ctx, convID)
	n := c.Turn.Query().Where(turn.ConversationID(convID)).CountX(ctx)
	finished := time.Date(2026, 3, 4, 5, 6, 7, 891_000_000, time.UTC)
	odd := c.Turn.Create().SetConversationID(convID).SetNumber(n + 1).SetUserText("line\nbreak \"quote\" back\\slash \x00\x1f tab\t é ✓ 😀").
		SetStatus(turn.StatusFAILED).SetError("model said <no>").SetFinishedAt(finished).SetTimeZone("Asia/Kolkata").SetReplayed(true).SaveX(ctx)
	c.ModelCall.Create().SetTurnID(odd.ID).SetOrganizationID(conv.OrganizationID).SetAgentID(conv.AgentID).SetUserID(conv.UserID).
		SetStep(0).SetText("t").SetProvider("openai").SetModel("gpt-4.1").SetInputTokens(1234).SetCacheReadTokens(1000).
		SetCacheWriteTokens(7).SetOutputTokens(89).SetPrefixTokens(900).SetDurationMs(4321).SetCostMicros(1_234_567).ExecX(ctx)
	// A result stored in another conversation of the same user.
	other := b.startConversation(t, b.alice.Token, b.createAgent(t, b.alice.Token, "Other"), "other")
	otherID, err := gid.Decode(other)
	require.NoError(t, err)
	foreign := c.StoredResult.Create().SetConversationID(otherID).SetRef("foreign").SetKind(schematype.KindJSON).
		SetContent([]byte(`{}`)).SetChars(2).SetBytes(2).SetItems(1).SaveX(ctx)
	c.ToolCall.Create().SetTurnID(odd.ID).SetPosition(0).SetName("search_documents").SetArguments(`{"queries":["a","b"]}`).
		SetOutcome(schematype.OutcomeOutage).SetAttempts(3).SetMessage("unreachable \"backend\"").SetGuardrail("looked like an instruction").
		SetFailures([]schematype.ItemFailure{{Item: 0, Input: "a", Kind: schematype.FailureOutage, Message: "budget exceeded"}, {Item: 1, Message: "no kind"}}).
		SetFinishedAt(finished).SetResultID(foreign.ID).SetRef("foreign").SetArgumentsRef("args-ref").ExecX(ctx)
	c.ToolCall.Create().SetTurnID(odd.ID).SetPosition(1).SetName("calculator").SetArguments(`{}`).
		SetOutcome(schematype.OutcomeRefused).SetAttempts(0).ExecX(ctx)
	c.Turn.Create().SetConversationID(convID).SetNumber(n + 2).SetUserText("running").SaveX(ctx)
}

// TestToolCallsReadOnlyAskedColumns checks that the resolvers read a tool
// call's JSON columns only for a selection that asks for them, and that two
// selections of one response, asking differently, each get theirs.
func TestToolCallsReadOnlyAskedColumns(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, d *db.DB) {
		counter := dbtest.Count(d)
		b := setup(t, d)
		conv := b.startConversation(t, b.alice.Token, b.createAgent(t, b.alice.Token, "Helper"), "columns")
		convID, err := gid.Decode(conv)
		require.NoError(t, err)
		seedTranscript(t, b.client, convID, 2, 2)
		seedOddTurns(t, b, convID)
		counter.Reset()
		data := b.do(t, b.alice.Token, `query($id: ID!) { conversation(id: $id) { turns(first: 10) { totalCount edges { node {
		  plain: toolCalls { name } full: toolCalls { name failures { message } } } } } } }`, map[string]any{"id": conv}).ok(t)
		odd := get(data, "conversation", "turns", "edges", 2, "node")
		require.Equal(t, "budget exceeded", get(odd, "full", 0, "failures", 0, "message"))
		require.Equal(t, map[string]any{"name": "search_documents"}, get(odd, "plain", 0))
		var calls []string
		for _, s := range counter.Statements() {
			if strings.Contains(s, "tool_calls") {
				calls = append(calls, s)
			}
		}
		require.Len(t, calls, 2, "one statement per set of columns")
		for _, s := range calls {
			require.NotContains(t, s, "evidence")
			require.NotContains(t, s, "repairs")
			require.NotContains(t, s, "heard")
		}
		require.NotEqual(t, strings.Contains(calls[0], "failures"), strings.Contains(calls[1], "failures"))
	})
}
