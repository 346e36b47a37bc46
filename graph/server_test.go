package graph_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/db"
	"github.com/toolgate/toolgate/db/dbtest"
	"github.com/toolgate/toolgate/ent"
	"github.com/toolgate/toolgate/ent/schematype"
	"github.com/toolgate/toolgate/ent/tenancy"
	"github.com/toolgate/toolgate/ent/turn"
	"github.com/toolgate/toolgate/graph"
	"github.com/toolgate/toolgate/graph/auth"
	"github.com/toolgate/toolgate/graph/gid"
	"github.com/toolgate/toolgate/runtime/scope"
	"github.com/toolgate/toolgate/tools/code"
)

type testBundle struct {
	db     *db.DB
	srv    *httptest.Server
	client *ent.Client // unscoped, for seeding
	// alice is the admin of Acme, bob a member of Acme, eve the admin of Evil.
	alice, bob, eve *auth.Grant
	signer          *scope.Signer
}

// scopeToken starts a RUNNING turn in the conversation (a global id) and
// returns a scope token for it, offered the named tools, as the runtime
// would mint it.
func (b *testBundle) scopeToken(t testing.TB, conversationID string, tools ...string) string {
	t.Helper()
	ctx := tenancy.System(context.Background())
	convID, err := gid.Decode(conversationID)
	require.NoError(t, err)
	conv := b.client.Conversation.GetX(ctx, convID)
	n := b.client.Turn.Query().Where(turn.ConversationID(convID)).CountX(ctx)
	tu := b.client.Turn.Create().SetConversationID(convID).SetNumber(n + 1).SetUserText("scoped").SaveX(ctx)
	tok, err := b.signer.Mint(scope.Claims{
		OrganizationID: conv.OrganizationID, UserID: conv.UserID, AgentID: conv.AgentID,
		ConversationID: convID, TurnID: tu.ID, Tools: tools,
	})
	require.NoError(t, err)
	return tok
}

func setup(t testing.TB, d *db.DB) *testBundle {
	t.Helper()
	return setupWith(t, d, nil)
}

// setupWith lets the test change the server's configuration.
func setupWith(t testing.TB, d *db.DB, configure func(*graph.Config)) *testBundle {
	t.Helper()
	ctx := tenancy.System(context.Background())
	b := &testBundle{db: d, client: d.Client()}
	var err error
	b.alice, err = auth.Bootstrap(ctx, b.client, "Acme", "Alice", "Research")
	require.NoError(t, err)
	b.bob, err = auth.Bootstrap(ctx, b.client, "Acme", "Bob", "Sales")
	require.NoError(t, err)
	b.eve, err = auth.Bootstrap(ctx, b.client, "Evil", "Eve", "Ops")
	require.NoError(t, err)
	secret, err := scope.GenerateSecret()
	require.NoError(t, err)
	b.signer, err = scope.NewSigner(secret, nil, 10*time.Minute)
	require.NoError(t, err)
	sandbox := code.New(os.Args[0])
	t.Cleanup(func() { _ = sandbox.Close() })
	cfg := graph.Config{DB: d, Signer: b.signer, Sandbox: sandbox}
	if configure != nil {
		configure(&cfg)
	}
	b.srv = httptest.NewUnstartedServer(nil)
	b.srv.Config = graph.NewServer(cfg).HTTPServer()
	b.srv.Start()
	t.Cleanup(b.srv.Close)
	return b
}

// response is a GraphQL response, with the raw body kept for byte-for-byte
// comparisons.
type response struct {
	Status int
	Raw    []byte
	Data   map[string]any
	Errors []struct {
		Message    string         `json:"message"`
		Extensions map[string]any `json:"extensions"`
	}
}

func (b *testBundle) do(t testing.TB, token, query string, vars map[string]any) *response {
	t.Helper()
	body, err := json.Marshal(map[string]any{"query": query, "variables": vars})
	require.NoError(t, err)
	return b.post(t, token, "application/json", body)
}

func (b *testBundle) post(t testing.TB, token, accept string, body []byte) *response {
	t.Helper()
	return b.postWith(t, token, accept, body, nil)
}

// postWith posts with extra headers.
func (b *testBundle) postWith(t testing.TB, token, accept string, body []byte, header http.Header) *response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, b.srv.URL+"/graphql", bytes.NewReader(body))
	require.NoError(t, err)
	for k, v := range header {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", accept)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	r := &response{Status: res.StatusCode, Raw: raw}
	require.NoError(t, json.Unmarshal(raw, r), string(raw))
	return r
}

// ok fails the test when the response has errors and returns its data.
func (r *response) ok(t testing.TB) map[string]any {
	t.Helper()
	require.Empty(t, r.Errors, string(r.Raw))
	return r.Data
}

func (r *response) code(t testing.TB) string {
	t.Helper()
	require.NotEmpty(t, r.Errors, string(r.Raw))
	c, _ := r.Errors[0].Extensions["code"].(string)
	return c
}

// get walks a decoded JSON value by keys and indexes.
func get(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			v = v.(map[string]any)[k]
		case int:
			v = v.([]any)[k]
		}
	}
	return v
}

func (b *testBundle) createAgent(t testing.TB, token, name string) string {
	t.Helper()
	d := b.do(t, token, `mutation($n: String!) { createAgent(input: {name: $n, instructions: "Be brief.", tools: ["calculator"]}) { id name tools } }`,
		map[string]any{"n": name}).ok(t)
	return get(d, "createAgent", "id").(string)
}

func (b *testBundle) startConversation(t testing.TB, token, agentID, title string) string {
	t.Helper()
	d := b.do(t, token, `mutation($a: ID!, $t: String) { startConversation(input: {agentId: $a, title: $t}) { id title } }`,
		map[string]any{"a": agentID, "t": title}).ok(t)
	return get(d, "startConversation", "id").(string)
}

func TestNewUserFlow(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, d *db.DB) {
		b := setup(t, d)
		viewer := b.do(t, b.alice.Token, `{ viewer { id name department organizationName admin } }`, nil).ok(t)
		require.Equal(t, "Alice", get(viewer, "viewer", "name"))
		require.Equal(t, "Research", get(viewer, "viewer", "department"))
		require.Equal(t, "Acme", get(viewer, "viewer", "organizationName"))
		require.Equal(t, true, get(viewer, "viewer", "admin"))
		require.Equal(t, graph.EncodeID(b.alice.UserID), get(viewer, "viewer", "id"))

		agentID := b.createAgent(t, b.alice.Token, "Helper")
		first := b.startConversation(t, b.alice.Token, agentID, "first")
		second := b.startConversation(t, b.alice.Token, agentID, "second")

		list := b.do(t, b.alice.Token, `{ conversations { totalCount edges { node { id title agent { name } user { name } } } } }`, nil).ok(t)
		require.EqualValues(t, 2, get(list, "conversations", "totalCount"))
		// Most recent first by default.
		require.Equal(t, second, get(list, "conversations", "edges", 0, "node", "id"))
		require.Equal(t, first, get(list, "conversations", "edges", 1, "node", "id"))
		require.Equal(t, "Helper", get(list, "conversations", "edges", 0, "node", "agent", "name"))

		filtered := b.do(t, b.alice.Token, `{ conversations(where: {titleContains: "fir"}) { totalCount edges { node { id } } } }`, nil).ok(t)
		require.EqualValues(t, 1, get(filtered, "conversations", "totalCount"))
		require.Equal(t, first, get(filtered, "conversations", "edges", 0, "node", "id"))

		page := b.do(t, b.alice.Token, `{ conversations(first: 1, orderBy: [{field: TITLE, direction: ASC}]) { edges { cursor node { title } } pageInfo { hasNextPage endCursor } } }`, nil).ok(t)
		require.Equal(t, "first", get(page, "conversations", "edges", 0, "node", "title"))
		require.Equal(t, true, get(page, "conversations", "pageInfo", "hasNextPage"))
		next := b.do(t, b.alice.Token, `query($c: Cursor) { conversations(first: 1, after: $c, orderBy: [{field: TITLE, direction: ASC}]) { edges { node { title } } } }`,
			map[string]any{"c": get(page, "conversations", "pageInfo", "endCursor")}).ok(t)
		require.Equal(t, "second", get(next, "conversations", "edges", 0, "node", "title"))

		node := b.do(t, b.alice.Token, `query($id: ID!) { node(id: $id) { id ... on Conversation { title } } }`, map[string]any{"id": first}).ok(t)
		require.Equal(t, "first", get(node, "node", "title"))
	})
}

func TestScopeRefusesIdentically(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, d *db.DB) {
		b := setup(t, d)
		agentID := b.createAgent(t, b.alice.Token, "Helper")
		convID := b.startConversation(t, b.alice.Token, agentID, "secret plans")
		madeUp := graph.EncodeID(1<<40 + 12345)

		const q = `query($id: ID!) { conversation(id: $id) { id title } }`
		foreign := b.do(t, b.eve.Token, q, map[string]any{"id": convID})
		nothing := b.do(t, b.eve.Token, q, map[string]any{"id": madeUp})
		garbage := b.do(t, b.eve.Token, q, map[string]any{"id": "not-an-id"})
		noToken := b.do(t, "", q, map[string]any{"id": convID})
		badToken := b.do(t, "tg_forged", q, map[string]any{"id": convID})
		colleague := b.do(t, b.bob.Token, q, map[string]any{"id": convID})
		for name, r := range map[string]*response{"made-up": nothing, "garbage": garbage, "colleague": colleague} {
			require.Equal(t, string(foreign.Raw), string(r.Raw), name)
			require.Equal(t, foreign.Status, r.Status, name)
		}
		require.Equal(t, "NOT_FOUND", foreign.code(t))
		// No token and a forged one: 401, one answer for both.
		require.Equal(t, http.StatusUnauthorized, noToken.Status)
		require.Equal(t, "UNAUTHENTICATED", noToken.code(t))
		require.Equal(t, string(noToken.Raw), string(badToken.Raw))
		require.Equal(t, noToken.Status, badToken.Status)

		// node() and the lists say the same.
		const nq = `query($id: ID!) { node(id: $id) { id } }`
		require.Equal(t, string(b.do(t, b.eve.Token, nq, map[string]any{"id": convID}).Raw),
			string(b.do(t, b.eve.Token, nq, map[string]any{"id": madeUp}).Raw))
		require.EqualValues(t, 0, get(b.do(t, b.eve.Token, `{ conversations { totalCount } }`, nil).ok(t), "conversations", "totalCount"))
		require.EqualValues(t, 0, get(b.do(t, b.eve.Token, `{ agents { totalCount } }`, nil).ok(t), "agents", "totalCount"))
		require.EqualValues(t, 0, get(b.do(t, b.bob.Token, `{ conversations { totalCount } }`, nil).ok(t), "conversations", "totalCount"))

		// Another organisation's agent cannot start a conversation.
		r := b.do(t, b.eve.Token, `mutation($a: ID!) { startConversation(input: {agentId: $a}) { id } }`, map[string]any{"a": agentID})
		require.Equal(t, "NOT_FOUND", r.code(t))

		// The admin of the organisation reaches every conversation in it.
		got := b.do(t, b.alice.Token, q, map[string]any{"id": convID}).ok(t)
		require.Equal(t, "secret plans", get(got, "conversation", "title"))
		bobAgent := b.createAgent(t, b.bob.Token, "Bob's")
		bobConv := b.startConversation(t, b.bob.Token, bobAgent, "bob's")
		require.Equal(t, "bob's", get(b.do(t, b.alice.Token, q, map[string]any{"id": bobConv}).ok(t), "conversation", "title"))

		// Admin-only mutation.
		r = b.do(t, b.bob.Token, `mutation { registerApplication(input: {name: "crm", url: "http://127.0.0.1:1/mcp", allowedTools: ["find"]}) { id } }`, nil)
		require.Equal(t, "FORBIDDEN", r.code(t))
		app := b.do(t, b.alice.Token, `mutation { registerApplication(input: {name: "crm", url: "http://127.0.0.1:1/mcp", allowedTools: ["find", "find"]}) { id name url allowedTools } }`, nil).ok(t)
		require.Equal(t, []any{"find"}, get(app, "registerApplication", "allowedTools"))

		// A revoked token is a bad token.
		require.NoError(t, b.client.APIToken.Update().SetRevokedAt(time.Now()).Exec(tenancy.System(context.Background())))
		require.Equal(t, string(noToken.Raw), string(b.do(t, b.alice.Token, q, map[string]any{"id": convID}).Raw))
	})
}

func TestBadInput(t *testing.T) {
	t.Parallel()
	b := setup(t, dbtest.Open(t, dbtest.SQLite))
	tok := b.alice.Token
	tests := []struct {
		name       string
		give       string
		accept     string
		wantStatus int
		wantMsg    string
	}{
		{name: "malformed query, graphql-response", give: `{"query": "{ viewer { id "}`, accept: "application/graphql-response+json", wantStatus: 400, wantMsg: "Expected Name"},
		{name: "malformed query, json", give: `{"query": "{ viewer { id "}`, accept: "application/json", wantStatus: 200, wantMsg: "Expected Name"},
		{name: "unknown field", give: `{"query": "{ viewer { password } }"}`, accept: "application/graphql-response+json", wantStatus: 400, wantMsg: `Cannot query field "password"`},
		{name: "wrong variable type", give: `{"query": "query($n: Int) { conversations(first: $n) { totalCount } }", "variables": {"n": "ten"}}`, accept: "application/graphql-response+json", wantStatus: 400, wantMsg: "cannot use string as Int"},
		{name: "not json", give: `{"query": `, accept: "application/json", wantStatus: 400, wantMsg: "json request body could not be decoded"},
		{name: "page too large", give: `{"query": "{ conversations(first: 1000) { totalCount } }"}`, accept: "application/graphql-response+json", wantStatus: 400, wantMsg: "between 0 and 100"},
		{name: "nested connection without size", give: `{"query": "{ conversations { edges { node { turns { totalCount } } } } }"}`, accept: "application/json", wantStatus: 200, wantMsg: "give first or last"},
		{name: "too complex", give: `{"query": "{ conversations(first: 100) { edges { node { turns(first: 100) { edges { node { toolCalls { id name arguments } } } } } } } }"}`, accept: "application/graphql-response+json", wantStatus: 400, wantMsg: "exceeds the limit"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := b.post(t, tok, tt.accept, []byte(tt.give))
			require.Equal(t, tt.wantStatus, r.Status, string(r.Raw))
			require.NotEmpty(t, r.Errors)
			require.Contains(t, r.Errors[0].Message, tt.wantMsg)
			require.NotContains(t, string(r.Raw), "goroutine")
		})
	}

	t.Run("body over 1 MiB", func(t *testing.T) {
		big := fmt.Sprintf(`{"query": "{ viewer { id } }", "variables": {"pad": %q}}`, strings.Repeat("x", graph.MaxBodyBytes))
		r := b.post(t, tok, "application/json", []byte(big))
		require.Equal(t, http.StatusRequestEntityTooLarge, r.Status)
		require.Contains(t, r.Errors[0].Message, "request body over")
	})
	t.Run("invalid agent name", func(t *testing.T) {
		r := b.do(t, tok, `mutation { createAgent(input: {name: ""}) { id } }`, nil)
		require.Equal(t, "BAD_USER_INPUT", r.code(t))
		require.Equal(t, "invalid name: value is less than the required length", r.Errors[0].Message)
	})
	t.Run("invalid application url", func(t *testing.T) {
		r := b.do(t, tok, `mutation { registerApplication(input: {name: "crm", url: "ftp://x", allowedTools: ["a"]}) { id } }`, nil)
		require.Equal(t, "BAD_USER_INPUT", r.code(t))
		require.Contains(t, r.Errors[0].Message, "is not an absolute http or https url")
	})
}

func TestHTTPEndpoints(t *testing.T) {
	t.Parallel()
	b := setup(t, dbtest.Open(t, dbtest.SQLite))
	b.do(t, b.alice.Token, `{ viewer { id } }`, nil).ok(t)
	tests := []struct {
		path string
		want string
	}{
		{path: "/healthz", want: "ok"},
		{path: "/readyz", want: "ready"},
		{path: "/playground", want: "Authorization"},
		{path: "/metrics", want: `toolgate_graphql_operation_duration_seconds_count{errors="false",field="viewer",type="query"} 1`},
		{path: "/metrics", want: "go_goroutines"},
		{path: "/metrics", want: `toolgate_http_request_duration_seconds_count{code="200",handler="/graphql",method="post"}`},
	}
	for _, tt := range tests {
		res, err := http.Get(b.srv.URL + tt.path)
		require.NoError(t, err)
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		require.Equal(t, http.StatusOK, res.StatusCode, tt.path)
		require.Contains(t, string(body), tt.want, tt.path)
	}

	// GET serves queries, never mutations, and needs a token like POST.
	fetch := func(query string, token string) (int, string) {
		req, err := http.NewRequest(http.MethodGet, b.srv.URL+"/graphql?query="+query, nil)
		require.NoError(t, err)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		res, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		return res.StatusCode, string(body)
	}
	status, body := fetch("%7B%20__typename%20%7D", "")
	require.Equal(t, http.StatusUnauthorized, status)
	require.Contains(t, body, "UNAUTHENTICATED")
	_, body = fetch("%7B%20__typename%20%7D", b.alice.Token)
	require.Contains(t, body, `"__typename":"Query"`)
	_, body = fetch("mutation%7BcreateAgent(input%3A%7Bname%3A%22x%22%7D)%7Bid%7D%7D", b.alice.Token)
	require.Contains(t, string(body), "GET requests only allow query operations")
}

// seedTranscript adds turns×calls tool calls, each with a stored result,
// to a conversation, straight through ent.
// longConversation is a conversation of Alice's on backend with turns ×
// calls seeded, and a counter of the statements sent from then on.
func longConversation(b *testing.B, backend dbtest.Backend, turns, calls int) (*testBundle, *dbtest.Counter, string) {
	b.Helper()
	d := dbtest.Open(b, backend)
	counter := dbtest.Count(d)
	tb := setup(b, d)
	agentID := tb.createAgent(b, tb.alice.Token, "Helper")
	conv := tb.startConversation(b, tb.alice.Token, agentID, "long")
	convID, err := gid.Decode(conv)
	require.NoError(b, err)
	seedTranscript(b, tb.client, convID, turns, calls)
	if backend == dbtest.Postgres {
		// The planner's statistics, as autovacuum (on by default) gathers
		// them after that many rows: plans for empty tables read a
		// transcript several times slower.
		_, err = d.SQL.Exec("ANALYZE")
		require.NoError(b, err)
	}
	return tb, counter, conv
}

func seedTranscript(t testing.TB, c *ent.Client, convID, turns, calls int) {
	t.Helper()
	ctx := tenancy.System(context.Background())
	for n := 1; n <= turns; n++ {
		tu := c.Turn.Create().SetConversationID(convID).SetNumber(n).SetUserText(fmt.Sprintf("question %d", n)).
			SetAnswer(fmt.Sprintf("answer %d", n)).SetStatus("COMPLETED").SaveX(ctx)
		conv := c.Conversation.GetX(ctx, convID)
		for step := range 2 {
			c.ModelCall.Create().SetTurnID(tu.ID).SetOrganizationID(conv.OrganizationID).SetAgentID(conv.AgentID).
				SetUserID(conv.UserID).SetStep(step).SetText(fmt.Sprintf("step %d", step)).SetProvider("openai").
				SetModel("gpt-4.1").SetInputTokens(100).SetOutputTokens(10).ExecX(ctx)
		}
		results := make([]*ent.StoredResultCreate, calls)
		for i := range results {
			results[i] = c.StoredResult.Create().SetConversationID(convID).SetRef(fmt.Sprintf("r-%d-%d-%d", convID, n, i)).
				SetKind(schematype.KindJSON).SetContent([]byte(`{"rows":[1,2,3]}`)).SetChars(16).SetBytes(16).SetItems(1)
		}
		rs := c.StoredResult.CreateBulk(results...).SaveX(ctx)
		tcs := make([]*ent.ToolCallCreate, calls)
		for i := range tcs {
			tcs[i] = c.ToolCall.Create().SetTurnID(tu.ID).SetPosition(i).SetName("calculator").
				SetArguments(`{"expression":"1+1"}`).SetOutcome(schematype.OutcomeHits).SetAttempts(1).
				SetRef(rs[i].Ref).SetResultID(rs[i].ID)
		}
		c.ToolCall.CreateBulk(tcs...).SaveX(ctx)
	}
}

const transcriptQuery = `query($id: ID!, $after: Cursor) {
  conversation(id: $id) {
    id title createdAt
    agent { name }
    turns(first: 100, after: $after) {
      totalCount
      pageInfo { hasNextPage endCursor }
      edges { node {
        id number status startedAt timeZone userText answer suggestions
        toolCalls { id name arguments outcome attempts ref failures { item message }
          result { ref kind chars bytes items truncatedAtSource } }
        modelCalls { step text model inputTokens outputTokens cost }
      } }
    }
  }
}`

func TestTranscriptStatementsBounded(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, d *db.DB) {
		counter := dbtest.Count(d)
		b := setup(t, d)
		agentID := b.createAgent(t, b.alice.Token, "Helper")
		small := b.startConversation(t, b.alice.Token, agentID, "small")
		large := b.startConversation(t, b.alice.Token, agentID, "large")
		smallID, err := gid.Decode(small)
		require.NoError(t, err)
		largeID, err := gid.Decode(large)
		require.NoError(t, err)
		seedTranscript(t, b.client, smallID, 2, 1)
		seedTranscript(t, b.client, largeID, 50, 4)

		count := func(id string) (int, map[string]any) {
			counter.Reset()
			data := b.do(t, b.alice.Token, transcriptQuery, map[string]any{"id": id}).ok(t)
			return len(counter.Statements()), data
		}
		nSmall, _ := count(small)
		nLarge, data := count(large)
		edges := get(data, "conversation", "turns", "edges").([]any)
		require.Len(t, edges, 50)
		require.Equal(t, "r-"+fmt.Sprint(largeID)+"-50-3", get(edges[49], "node", "toolCalls", 3, "result", "ref"))
		for i := range 4 {
			require.Equal(t, fmt.Sprintf("r-%d-50-%d", largeID, i), get(edges[49], "node", "toolCalls", i, "ref"), "tool calls in position order")
		}
		require.Equal(t, "step 1", get(edges[49], "node", "modelCalls", 1, "text"))
		// token, conversation, agent, turns, turn count, tool calls,
		// results, model calls.
		require.Equal(t, 8, nLarge, counter.Statements())
		require.Equal(t, nSmall, nLarge, "statements must not grow with the conversation")
	})
}

// BenchmarkTranscript reads a transcript of 200 turns × 5 tool calls, in
// two pages of 100 turns, and reports SQL statements per read.
func BenchmarkTranscript(b *testing.B) {
	for _, backend := range []dbtest.Backend{dbtest.SQLite, dbtest.Postgres} {
		b.Run(string(backend), func(b *testing.B) {
			tb, counter, conv := longConversation(b, backend, 200, 5)
			counter.Reset()
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				var after any
				for page := 0; page < 2; page++ {
					data := tb.do(b, tb.alice.Token, transcriptQuery, map[string]any{"id": conv, "after": after}).ok(b)
					after = get(data, "conversation", "turns", "pageInfo", "endCursor")
				}
			}
			b.ReportMetric(float64(len(counter.Statements()))/float64(b.N), "stmts/op")
		})
	}
}

func TestScopeTokenOpensOnlyItsTools(t *testing.T) {
	t.Parallel()
	b := setup(t, dbtest.Open(t, dbtest.SQLite))
	agentID := b.createAgent(t, b.alice.Token, "Helper")
	conv := b.startConversation(t, b.alice.Token, agentID, "scoped")
	tok := b.scopeToken(t, conv, "calculator")

	// Nothing outside the tool fields: not the viewer, not the conversation.
	r := b.do(t, tok, `{ viewer { id } }`, nil)
	require.Equal(t, "NOT_FOUND", r.code(t))
	r = b.do(t, tok, `query($id: ID!) { conversation(id: $id) { id } }`, map[string]any{"id": conv})
	require.Equal(t, "NOT_FOUND", r.code(t))
	// A forged or foreign-signed token is a bad token.
	require.Equal(t, string(b.do(t, "", `{ viewer { id } }`, nil).Raw), string(b.do(t, "tgs_forged.x", `{ viewer { id } }`, nil).Raw))
}

func TestAutomaticPersistedQueries(t *testing.T) {
	t.Parallel()
	b := setup(t, dbtest.Open(t, dbtest.SQLite))
	const query = `{ viewer { name } }`
	sum := sha256.Sum256([]byte(query))
	ext := map[string]any{"persistedQuery": map[string]any{"version": 1, "sha256Hash": hex.EncodeToString(sum[:])}}
	post := func(body map[string]any) *response {
		raw, err := json.Marshal(body)
		require.NoError(t, err)
		return b.post(t, b.alice.Token, "application/json", raw)
	}
	// The hash alone, before the server has seen the query: ask for it.
	r := post(map[string]any{"extensions": ext})
	require.Equal(t, "PersistedQueryNotFound", r.Errors[0].Message)
	// Hash and query: stored and run.
	require.Equal(t, "Alice", get(post(map[string]any{"query": query, "extensions": ext}).ok(t), "viewer", "name"))
	// Then the hash alone is enough.
	require.Equal(t, "Alice", get(post(map[string]any{"extensions": ext}).ok(t), "viewer", "name"))
	// A hash that does not match its query is refused.
	bad := map[string]any{"persistedQuery": map[string]any{"version": 1, "sha256Hash": strings.Repeat("0", 64)}}
	r = post(map[string]any{"query": query, "extensions": bad})
	require.NotEmpty(t, r.Errors)
}

func TestReadyzFailsWithoutTheDatabase(t *testing.T) {
	t.Parallel()
	d := dbtest.Open(t, dbtest.SQLite)
	srv := httptest.NewServer(graph.NewServer(graph.Config{DB: d}))
	t.Cleanup(srv.Close)
	get := func(path string) int {
		res, err := http.Get(srv.URL + path)
		require.NoError(t, err)
		res.Body.Close()
		return res.StatusCode
	}
	require.Equal(t, http.StatusOK, get("/readyz"))
	require.NoError(t, d.SQL.Close())
	require.Equal(t, http.StatusServiceUnavailable, get("/readyz"))
	require.Equal(t, http.StatusOK, get("/healthz"), "alive, though not ready")
}
