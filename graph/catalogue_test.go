package graph_test

import (
	"encoding/json"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/db"
	"github.com/toolgate/toolgate/db/dbtest"
	"github.com/toolgate/toolgate/graph"
	"github.com/toolgate/toolgate/graph/gid"
	"github.com/toolgate/toolgate/offer"
	"github.com/toolgate/toolgate/offer/token"
	"github.com/toolgate/toolgate/runtime/loop"
	"github.com/toolgate/toolgate/tools"
	"github.com/toolgate/toolgate/tools/catalog"
	"github.com/toolgate/toolgate/tools/registry"
)

var discoveryTools = []any{"search_tools", "list_tools", "get_tool_schema"}

func (b *testBundle) createAgentWith(t testing.TB, token, name string, tools []any) string {
	t.Helper()
	d := b.do(t, token, `mutation($n: String!, $t: [String!]) { createAgent(input: {name: $n, tools: $t}) { id } }`,
		map[string]any{"n": name, "t": tools}).ok(t)
	return get(d, "createAgent", "id").(string)
}

const catalogueQuery = `query($a: ID) { catalogue(agentId: $a) {
  tools { name family offeredWhen alwaysOn offered definitionChars definitionTokens }
  widestChars widestTokens alwaysPaidChars alwaysPaidTokens offeredChars offeredTokens
  guidanceChars guidanceTokens alwaysPaidGuidanceChars
  ceilings { widestChars alwaysPaidChars }
} }`

func TestCatalogue(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, d *db.DB) {
		b := setup(t, d)
		want := catalog.Measure(registry.All())
		bare := b.createAgentWith(t, b.alice.Token, "Bare", []any{})
		finder := b.createAgentWith(t, b.alice.Token, "Finder", discoveryTools)

		check := func(agentID any, wantOffered func(tools.Definition) bool) map[string]any {
			t.Helper()
			c := get(b.do(t, b.bob.Token, catalogueQuery, map[string]any{"a": agentID}).ok(t), "catalogue").(map[string]any)
			require.EqualValues(t, want.WidestChars, c["widestChars"])
			require.EqualValues(t, want.WidestTokens, c["widestTokens"])
			require.EqualValues(t, want.AlwaysPaidChars, c["alwaysPaidChars"])
			require.EqualValues(t, want.AlwaysPaidTokens, c["alwaysPaidTokens"])
			require.EqualValues(t, want.GuidanceChars, c["guidanceChars"])
			require.EqualValues(t, want.GuidanceTokens, c["guidanceTokens"])
			require.EqualValues(t, want.AlwaysPaidGuidanceChars, c["alwaysPaidGuidanceChars"])
			require.Equal(t, map[string]any{"widestChars": float64(40122), "alwaysPaidChars": float64(13456)}, c["ceilings"])
			got := c["tools"].([]any)
			defs := registry.All()
			require.Len(t, got, len(defs))
			sum, offeredChars := 0, 0
			for i, d := range defs {
				tool := got[i].(map[string]any)
				chars := utf8.RuneCount(d.Wire())
				require.Equal(t, d.Name, tool["name"])
				require.Equal(t, d.Family, tool["family"])
				require.Equal(t, string(d.Offered), tool["offeredWhen"])
				require.Equal(t, d.AlwaysOn(), tool["alwaysOn"], d.Name)
				require.Equal(t, wantOffered(d), tool["offered"], d.Name)
				require.EqualValues(t, chars, tool["definitionChars"], d.Name)
				require.EqualValues(t, token.Count(string(d.Wire())), tool["definitionTokens"], d.Name)
				sum += chars
				if wantOffered(d) {
					offeredChars += chars
				}
			}
			require.EqualValues(t, sum, c["widestChars"])
			require.EqualValues(t, offeredChars, c["offeredChars"])
			return c
		}
		alwaysOn := func(d tools.Definition) bool { return d.AlwaysOn() }
		none := check(nil, alwaysOn)
		require.EqualValues(t, want.AlwaysPaidChars, none["offeredChars"])
		// An agent that declares no tools gets no optional tool.
		require.Equal(t, none, check(bare, alwaysOn))
		withDiscovery := check(finder, func(d tools.Definition) bool { return d.AlwaysOn() || d.Family == catalog.Family })
		discovery := 0
		for _, d := range catalog.Definitions {
			discovery += utf8.RuneCount(d.Wire())
		}
		require.EqualValues(t, want.AlwaysPaidChars+discovery, withDiscovery["offeredChars"])

		// Another organisation's agent answers like one that never was.
		foreign := b.do(t, b.eve.Token, catalogueQuery, map[string]any{"a": finder})
		madeUp := b.do(t, b.eve.Token, catalogueQuery, map[string]any{"a": graph.EncodeID(1<<40 + 7)})
		require.Equal(t, "NOT_FOUND", foreign.code(t))
		require.Equal(t, string(madeUp.Raw), string(foreign.Raw))
		require.Equal(t, "UNAUTHENTICATED", b.do(t, "", catalogueQuery, nil).code(t))

		// A turn's scope token does not open it.
		conv := b.startConversation(t, b.alice.Token, finder, "scoped")
		scoped := b.do(t, b.scopeToken(t, conv, "search_tools"), catalogueQuery, nil)
		require.Equal(t, "NOT_FOUND", scoped.code(t))
	})
}

// operation returns the discovery tool's definition, whose Operation is
// what the runtime posts.
func operation(t testing.TB, name string) tools.Definition {
	t.Helper()
	d, ok := registry.ByName(name)
	require.True(t, ok, name)
	return d
}

// call runs a tool's operation as the runtime does (token, arguments plus
// conversationId) and returns the response.
func (b *testBundle) call(t testing.TB, token, tool string, conv any, args map[string]any) *response {
	t.Helper()
	vars := map[string]any{"conversationId": conv}
	for k, v := range args {
		vars[k] = v
	}
	return b.do(t, token, operation(t, tool).Operation, vars)
}

func TestDiscoveryTools(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, d *db.DB) {
		b := setup(t, d)
		b.do(t, b.alice.Token, `mutation { registerApplication(input: {name: "crm", url: "http://127.0.0.1:1/mcp", allowedTools: ["find_customer", "drop_customer"]}) { id } }`, nil).ok(t)
		agent := b.createAgentWith(t, b.alice.Token, "Finder", append([]any{"crm__find_customer"}, discoveryTools...))
		conv := b.startConversation(t, b.alice.Token, agent, "find")

		var wantNames []any
		var offered []string // as the turn's scope token lists them
		for _, d := range registry.All() {
			if d.AlwaysOn() || d.Family == catalog.Family {
				wantNames = append(wantNames, d.Name)
				offered = append(offered, d.Name)
			}
		}
		wantNames = append(wantNames, "crm__find_customer")
		scope := b.scopeToken(t, conv, offered...)

		// By hand with an API token, and the same through the turn's scope token.
		list := b.call(t, b.alice.Token, "list_tools", conv, nil)
		require.Equal(t, string(list.Raw), string(b.call(t, scope, "list_tools", nil, nil).Raw))
		listed := get(list.ok(t), "listTools", "tools").([]any)
		var gotNames []any
		for _, tool := range listed {
			gotNames = append(gotNames, get(tool, "name"))
			require.LessOrEqual(t, utf8.RuneCountInString(get(tool, "description").(string)), 200)
		}
		require.Equal(t, wantNames, gotNames)
		// This server reaches no application: its tool is known by name.
		unknown := "A tool of application crm, whose server did not answer: its description is unknown."
		require.Equal(t, unknown, get(listed[len(listed)-1], "description"))

		// Queries answered in order, repeats collapsed and said so.
		args := map[string]any{"queries": []any{"schema", "Schema", "customer", " ", "tools"}}
		search := b.call(t, b.alice.Token, "search_tools", conv, args)
		require.Equal(t, string(search.Raw), string(b.call(t, scope, "search_tools", nil, args).Raw))
		s := get(search.ok(t), "searchTools")
		require.Equal(t, "schema", get(s, "results", 0, "query"))
		require.Equal(t, "get_tool_schema", get(s, "results", 0, "tools", 0, "name"))
		require.Equal(t, "customer", get(s, "results", 1, "query"))
		require.Equal(t, []any{map[string]any{"name": "crm__find_customer", "description": unknown}}, get(s, "results", 1, "tools"))
		require.Equal(t, "tools", get(s, "results", 2, "query"))
		require.Len(t, get(s, "results"), 3)
		require.Equal(t, "item 1 repeats an earlier query: answered once", get(s, "note"))
		require.Equal(t, []any{map[string]any{"item": float64(3), "input": " ", "kind": "REFUSED", "message": "blank"}}, get(s, "failures"))
		var searchNames []any
		for _, tool := range get(s, "results", 2, "tools").([]any) {
			searchNames = append(searchNames, get(tool, "name"))
		}
		require.Subset(t, searchNames, discoveryTools)

		// More than 5 distinct queries are refused; 6 with a repeat are not.
		tooMany := b.call(t, scope, "search_tools", nil, map[string]any{"queries": []any{"a", "b", "c", "d", "e", "f"}})
		require.Equal(t, "BAD_USER_INPUT", tooMany.code(t))
		require.Equal(t, "queries: 6 distinct, at most 5 per call", tooMany.Errors[0].Message)
		b.call(t, scope, "search_tools", nil, map[string]any{"queries": []any{"a", "b", "c", "d", "e", "A"}}).ok(t)

		// get_tool_schema: whole, unknown names in missing with the hint.
		args = map[string]any{"names": []any{"get_tool_schema", "made_up", "crm__drop_customer", "crm__find_customer"}}
		schemas := b.call(t, b.alice.Token, "get_tool_schema", conv, args)
		require.Equal(t, string(schemas.Raw), string(b.call(t, scope, "get_tool_schema", nil, args).Raw))
		g := get(schemas.ok(t), "getToolSchema")
		def := operation(t, "get_tool_schema")
		require.Equal(t, def.Name, get(g, "tools", 0, "name"))
		require.Equal(t, def.Description, get(g, "tools", 0, "description"))
		params, err := json.Marshal(get(g, "tools", 0, "parameters"))
		require.NoError(t, err)
		require.JSONEq(t, string(def.Schema), string(params))
		require.Len(t, get(g, "tools"), 1)
		require.Equal(t, []any{"made_up", "crm__drop_customer"}, get(g, "missing"))
		require.Equal(t, catalog.Hint, get(g, "hint"))
		require.Equal(t, float64(3), get(g, "failures", 0, "item"))

		tooManyNames := make([]any, catalog.MaxNames+1)
		for i := range tooManyNames {
			tooManyNames[i] = "tool_" + string(rune('a'+i))
		}
		r := b.call(t, scope, "get_tool_schema", nil, map[string]any{"names": tooManyNames})
		require.Equal(t, "BAD_USER_INPUT", r.code(t))
		require.Equal(t, "names: 21 distinct, at most 20 per call", r.Errors[0].Message)
	})
}

func TestDiscoveryToolsRefuse(t *testing.T) {
	t.Parallel()
	b := setup(t, dbtest.Open(t, dbtest.SQLite))
	bare := b.createAgentWith(t, b.alice.Token, "Bare", []any{})
	conv := b.startConversation(t, b.alice.Token, bare, "mine")
	madeUp := graph.EncodeID(1<<40 + 99)
	for _, tool := range []string{"search_tools", "list_tools", "get_tool_schema"} {
		args := map[string]any{"queries": []any{"files"}, "names": []any{"calculator"}}
		if tool == "list_tools" {
			args = nil
		}
		// Another organisation's conversation answers like a made-up one.
		foreign := b.call(t, b.eve.Token, tool, conv, args)
		require.Equal(t, "NOT_FOUND", foreign.code(t), tool)
		require.Equal(t, string(b.call(t, b.eve.Token, tool, madeUp, args).Raw), string(foreign.Raw), tool)
		// An API token must name the conversation.
		require.Equal(t, "BAD_USER_INPUT", b.call(t, b.alice.Token, tool, nil, args).code(t), tool)
		// A scope token not offered the tool, or naming another conversation.
		require.Equal(t, "NOT_FOUND", b.call(t, b.scopeToken(t, conv, "calculator"), tool, nil, args).code(t), tool)
		other := b.startConversation(t, b.alice.Token, bare, "other")
		require.Equal(t, "NOT_FOUND", b.call(t, b.scopeToken(t, conv, tool), tool, other, args).code(t), tool)
	}

	// The agent declares no tools: only always-on and workspace tools are found.
	var want []any
	for _, d := range registry.All() {
		if d.AlwaysOn() {
			want = append(want, d.Name)
		}
	}
	var got []any
	for _, tool := range get(b.call(t, b.alice.Token, "list_tools", conv, nil).ok(t), "listTools", "tools").([]any) {
		got = append(got, get(tool, "name"))
	}
	require.Equal(t, want, got)
	g := get(b.call(t, b.alice.Token, "get_tool_schema", conv, map[string]any{"names": []any{"search_tools"}}).ok(t), "getToolSchema")
	require.Equal(t, []any{"search_tools"}, get(g, "missing"))
	r := b.call(t, b.alice.Token, "search_tools", conv, map[string]any{"queries": []any{}})
	require.Equal(t, "queries: give at least one query", r.Errors[0].Message)
}

// TestToolLoading: createAgent and updateAgent set how an agent's turns
// send definitions, the catalogue says what they then send, and
// get_tool_schema answers a turn from the turn's own tool list, which may
// hold tools the agent's rules alone do not (an attachment's).
func TestToolLoading(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, d *db.DB) {
		b := setup(t, d)
		created := b.do(t, b.alice.Token, `mutation { createAgent(input: {name: "Lean", tools: ["update_tasks"], toolLoading: DEFERRED}) { id toolLoading } }`, nil).ok(t)
		require.Equal(t, "DEFERRED", get(created, "createAgent", "toolLoading"))
		id := get(created, "createAgent", "id")
		query := `query($a: ID) { catalogue(agentId: $a) { deferring sentChars sentTokens offeredChars offeredTokens
			tools { name offered deferred definitionChars stubChars stubTokens } } }`
		c := get(b.do(t, b.alice.Token, query, map[string]any{"a": id}).ok(t), "catalogue").(map[string]any)
		require.Equal(t, true, c["deferring"])
		sent, sentTokens := 0, 0
		for _, raw := range c["tools"].([]any) {
			tool := raw.(map[string]any)
			def, _ := registry.ByName(tool["name"].(string))
			kept := offer.Keeps(def)
			if kept {
				require.EqualValues(t, 0, tool["stubChars"], def.Name)
			} else {
				require.EqualValues(t, utf8.RuneCount(def.Stub().Wire()), tool["stubChars"], def.Name)
			}
			require.Equal(t, tool["offered"] == true && !kept, tool["deferred"], def.Name)
			switch {
			case tool["deferred"] == true:
				sent += utf8.RuneCount(def.Stub().Wire())
				sentTokens += token.Count(string(def.Stub().Wire()))
			case tool["offered"] == true || def.Name == tools.SchemaTool:
				sent += utf8.RuneCount(def.Wire())
				sentTokens += token.Count(string(def.Wire()))
			}
		}
		require.EqualValues(t, sent, c["sentChars"])
		require.EqualValues(t, sentTokens, c["sentTokens"])
		require.Less(t, c["sentChars"].(float64), c["offeredChars"].(float64))

		updated := b.do(t, b.alice.Token, `mutation($a: ID!) { updateAgent(input: {id: $a, toolLoading: FULL}) { agent { toolLoading } } }`,
			map[string]any{"a": id}).ok(t)
		require.Equal(t, "FULL", get(updated, "updateAgent", "agent", "toolLoading"))
		c = get(b.do(t, b.alice.Token, query, map[string]any{"a": id}).ok(t), "catalogue").(map[string]any)
		require.Equal(t, false, c["deferring"])
		require.Equal(t, c["offeredChars"], c["sentChars"])
		bad := b.do(t, b.alice.Token, `mutation($a: ID!) { updateAgent(input: {id: $a, toolLoading: LAZY}) { agent { id } } }`, map[string]any{"a": id})
		require.Equal(t, "GRAPHQL_VALIDATION_FAILED", bad.code(t))

		// A turn's get_tool_schema reads the turn's own list: a tool of an
		// attachment it names is there, one it does not name is missing.
		conv := b.startConversation(t, b.alice.Token, id.(string), "loading")
		schema := func(token string) map[string]any {
			return get(b.call(t, token, tools.SchemaTool, conv, map[string]any{"names": []string{"search_attachments"}}).ok(t), "getToolSchema").(map[string]any)
		}
		got := schema(b.scopeToken(t, conv, tools.SchemaTool, "search_attachments"))
		require.Len(t, got["tools"], 1)
		require.Equal(t, "search_attachments", got["tools"].([]any)[0].(map[string]any)["name"])
		got = schema(b.scopeToken(t, conv, tools.SchemaTool))
		require.Empty(t, got["tools"])
		require.Equal(t, []any{"search_attachments"}, got["missing"])
	})
}

// TestCatalogueLoadingCost: the catalogue shows what a turn of the agent
// is expected to pay for its definitions each way at the model's price,
// and AUTO's choice follows it: a lean agent whole, one offered the wide
// catalogue deferred. With no price known there is no estimate.
func TestCatalogueLoadingCost(t *testing.T) {
	t.Parallel()
	d := dbtest.Open(t, dbtest.SQLite)
	rates := &offer.Rates{Input: 2, CacheRead: 0.5, CacheWrite: 2, Output: 8}
	runner, err := loop.New(loop.Config{Client: d.Client(), Queue: d.Queue(), EncodeID: gid.Encode, Rates: rates})
	require.NoError(t, err)
	b := setupWith(t, d, func(c *graph.Config) { c.Runner = runner })
	var every []string
	for _, def := range registry.All() {
		if def.Offered == tools.OfferAllowlisted {
			every = append(every, def.Name)
		}
	}
	query := `query($a: ID) { catalogue(agentId: $a) { deferring offeredTokens sentTokens
		loadingCost { full { micros currency } deferred { micros } fullTokens deferredTokens readTokens calls } } }`
	for _, tc := range []struct {
		tools  []string
		defers bool
	}{{nil, false}, {every, true}} {
		allow := []any{}
		for _, n := range tc.tools {
			allow = append(allow, n)
		}
		id := b.createAgentWith(t, b.alice.Token, "Priced", allow)
		c := get(b.do(t, b.alice.Token, query, map[string]any{"a": id}).ok(t), "catalogue").(map[string]any)
		cost := c["loadingCost"].(map[string]any)
		full, deferred := int(cost["fullTokens"].(float64)), int(cost["deferredTokens"].(float64))
		want := rates.Estimate(full, deferred, int(cost["readTokens"].(float64)))
		require.EqualValues(t, want.FullMicros, get(cost, "full", "micros"))
		require.EqualValues(t, want.DeferredMicros, get(cost, "deferred", "micros"))
		require.Equal(t, "USD", get(cost, "full", "currency"))
		require.EqualValues(t, offer.AutoCalls, cost["calls"])
		require.Equal(t, c["offeredTokens"], cost["fullTokens"])
		require.Equal(t, tc.defers, c["deferring"], "%d tools", len(tc.tools))
		require.Equal(t, tc.defers, want.DeferredMicros < want.FullMicros)
		if tc.defers {
			require.Equal(t, c["sentTokens"], cost["deferredTokens"])
		}
	}

	plain := setup(t, dbtest.Open(t, dbtest.SQLite))
	var allow []any
	for _, n := range every {
		allow = append(allow, n)
	}
	id := plain.createAgentWith(t, plain.alice.Token, "Unpriced", allow)
	c := get(plain.do(t, plain.alice.Token, query, map[string]any{"a": id}).ok(t), "catalogue").(map[string]any)
	require.Nil(t, c["loadingCost"])
}
