package graph_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"unicode/utf8"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/db"
	"github.com/toolgate/toolgate/db/dbtest"
	"github.com/toolgate/toolgate/graph"
	"github.com/toolgate/toolgate/runtime/mcp"
	"github.com/toolgate/toolgate/tools/catalog"
)

// lookupDescription is longer than the catalogue keeps.
var lookupDescription = "Find a contact in the CRM by name, email or company, with their open deals and the last time " +
	"anyone spoke to them. " + strings.Repeat("Matches ignore case and accents. ", 6)

const lookupSchema = `{"type":"object","properties":{"name":{"type":"string","description":"a name, email or company"}},"required":["name"],"additionalProperties":false}`

// crmServer is an MCP application served by the SDK's own server side,
// with one described tool and bulk tools whose schemas are large. It
// counts the tool listings it answers.
func crmServer(t *testing.T, bulk int) (string, *atomic.Int32) {
	t.Helper()
	server := sdk.NewServer(&sdk.Implementation{Name: "crm", Version: "1"}, nil)
	handler := func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "ok"}}}, nil
	}
	server.AddTool(&sdk.Tool{Name: "lookup", Description: lookupDescription, InputSchema: json.RawMessage(lookupSchema)}, handler)
	for i := range bulk {
		schema := fmt.Sprintf(`{"type":"object","properties":{"rows":{"type":"array","description":%q}}}`, strings.Repeat("row ", 500))
		server.AddTool(&sdk.Tool{Name: fmt.Sprintf("bulk_%d", i), Description: "Import rows.", InputSchema: json.RawMessage(schema)}, handler)
	}
	var listings atomic.Int32
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return server }, nil)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if bytes.Contains(body, []byte(`"method":"tools/list"`)) {
			listings.Add(1)
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, &listings
}

// withApps serves the bundle's API with a pool that reaches applications.
func (b *testBundle) withApps(t *testing.T) {
	t.Helper()
	pool := mcp.NewPool(nil)
	t.Cleanup(pool.Close)
	srv := httptest.NewServer(graph.NewServer(graph.Config{DB: b.db, Signer: b.signer, Apps: pool}))
	t.Cleanup(srv.Close)
	b.srv = srv
}

// TestApplicationToolsInDiscoveryAndCatalogue: discovery describes
// application tools as their servers do (cut to 200 characters) and gives
// their real schemas; the catalogue measures an agent's real deck, and an
// agent whose deck would pass the widest ceiling is refused. (Discovery
// used to say "tool of application X" and refuse their schemas; the
// catalogue measured built-in tools only.)
func TestApplicationToolsInDiscoveryAndCatalogue(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, d *db.DB) {
		b := setup(t, d)
		b.withApps(t)
		const bulk = 30
		url, listings := crmServer(t, bulk)
		allowed := []any{"lookup"}
		for i := range bulk {
			allowed = append(allowed, fmt.Sprintf("bulk_%d", i))
		}
		b.do(t, b.alice.Token, `mutation($u: String!, $a: [String!]!) { registerApplication(input: {name: "crm", url: $u, allowedTools: $a}) { id } }`,
			map[string]any{"u": url, "a": allowed}).ok(t)
		b.do(t, b.alice.Token, `mutation { registerApplication(input: {name: "down", url: "http://127.0.0.1:1/mcp", allowedTools: ["ping"]}) { id } }`, nil).ok(t)

		agent := b.createAgentWith(t, b.alice.Token, "Finder", append([]any{"crm__lookup", "down__ping"}, discoveryTools...))
		conv := b.startConversation(t, b.alice.Token, agent, "find")
		scope := b.scopeToken(t, conv, "search_tools", "list_tools", "get_tool_schema")

		// list_tools: the server's description, cut to 200 characters.
		listed := get(b.call(t, scope, "list_tools", nil, nil).ok(t), "listTools", "tools").([]any)
		byName := map[string]string{}
		for _, tool := range listed {
			byName[get(tool, "name").(string)] = get(tool, "description").(string)
		}
		lookup := byName["crm__lookup"]
		require.LessOrEqual(t, utf8.RuneCountInString(lookup), catalog.MaxDescription)
		require.True(t, strings.HasPrefix(lookup, "Find a contact in the CRM by name, email or company"), lookup)
		require.True(t, strings.HasSuffix(lookup, "…"))
		require.Contains(t, byName["down__ping"], "whose server did not answer")

		// search_tools finds it by the words of that description.
		s := get(b.call(t, scope, "search_tools", nil, map[string]any{"queries": []any{"open deals"}}).ok(t), "searchTools")
		require.Equal(t, "crm__lookup", get(s, "results", 0, "tools", 0, "name"))

		// get_tool_schema: the real schema; the silent server's tool fails as an item.
		g := get(b.call(t, scope, "get_tool_schema", nil, map[string]any{"names": []any{"crm__lookup", "down__ping"}}).ok(t), "getToolSchema")
		require.Equal(t, "crm__lookup", get(g, "tools", 0, "name"))
		params, err := json.Marshal(get(g, "tools", 0, "parameters"))
		require.NoError(t, err)
		require.JSONEq(t, lookupSchema, string(params))
		require.Equal(t, "down__ping", get(g, "failures", 0, "input"))
		require.Equal(t, "OUTAGE", get(g, "failures", 0, "kind"), "it never ran")
		require.Contains(t, get(g, "failures", 0, "message"), "did not answer")

		// catalogue(agentId): the real deck, with a warning for the server
		// that could not be measured.
		c := get(b.do(t, b.bob.Token, `query($a: ID) { catalogue(agentId: $a) { tools { name family offered definitionChars }
		  offeredChars applicationChars applicationTokens warnings } }`, map[string]any{"a": agent}).ok(t), "catalogue")
		bare := get(b.do(t, b.bob.Token, `query { catalogue { offeredChars } }`, nil).ok(t), "catalogue", "offeredChars").(float64)
		tools := get(c, "tools").([]any)
		last := tools[len(tools)-1]
		require.Equal(t, "crm__lookup", get(last, "name"))
		require.Equal(t, "application", get(last, "family"))
		require.Equal(t, true, get(last, "offered"))
		require.Equal(t, get(last, "definitionChars"), get(c, "applicationChars"))
		require.Positive(t, get(c, "applicationTokens"))
		discovery := 0
		for _, d := range catalog.Definitions {
			discovery += utf8.RuneCount(d.Wire())
		}
		require.EqualValues(t, int(bare)+discovery+int(get(c, "applicationChars").(float64)), get(c, "offeredChars"))
		require.Len(t, get(c, "warnings"), 1)
		require.Contains(t, get(c, "warnings", 0), "application down: its server did not answer")

		// The server was asked for its tools once: the pool keeps the list
		// for the session.
		require.EqualValues(t, 1, listings.Load())

		// An agent whose turns would carry every bulk tool is refused, and
		// says by how much; none is created.
		var every []any
		for _, name := range allowed {
			every = append(every, "crm__"+name.(string))
		}
		r := b.do(t, b.alice.Token, `mutation($t: [String!]) { createAgent(input: {name: "Importer", tools: $t}) { id } }`,
			map[string]any{"t": every})
		require.Equal(t, "BAD_USER_INPUT", r.code(t))
		require.Contains(t, r.Errors[0].Message, "over the widest ceiling of 40122: allow fewer application tools")
		agents := get(b.do(t, b.alice.Token, `query { agents(first: 100) { totalCount } }`, nil).ok(t), "agents", "totalCount")
		require.EqualValues(t, 1, agents)
	})
}
