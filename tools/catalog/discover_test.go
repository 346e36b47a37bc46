package catalog_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/ent/schematype"
	"github.com/toolgate/toolgate/ent/tenancy"
	"github.com/toolgate/toolgate/offer"
	"github.com/toolgate/toolgate/tools"
	"github.com/toolgate/toolgate/tools/catalog"
)

var testDefs = []tools.Definition{
	{Name: "calculator", Description: "Evaluate arithmetic.", Offered: tools.OfferAlways,
		Schema: json.RawMessage(`{"type":"object","properties":{"expression":{"type":"string"}},"required":["expression"]}`)},
	{Name: "read_file", Description: "Read a workspace file.", Offered: tools.OfferWorkspace,
		Schema: json.RawMessage("{\n \"type\": \"object\",\n \"properties\": {\"path\": {\"type\": \"string\"}}\n}")},
	{Name: "search_files", Description: "Search workspace files for strings.", Offered: tools.OfferWorkspace},
	{Name: "research_web", Description: "Read web pages about a question. " + strings.Repeat("Long words here. ", 20), Offered: tools.OfferAllowlisted},
	{Name: "memory_search", Description: "Search what you remembered.", Offered: tools.OfferMemorySwitch},
	{Name: "budget_check", Description: "This month's spend.", Offered: tools.OfferBudgetSwitch},
}

// testApps: crm's server listed its tools, wiki's did not answer.
var testApps = []catalog.Application{
	{Name: "crm", Allowed: []string{"find_customer", "delete_customer"}, Tools: []tools.Definition{
		{Name: "crm__find_customer", Family: "application", Description: "Find a customer by name or email.",
			Schema: json.RawMessage(`{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}`)},
		{Name: "crm__delete_customer", Family: "application", Description: "Delete a customer."},
	}},
	{Name: "wiki", Allowed: []string{"search"}, Err: errors.New("connection refused")},
}

func testIndex() *catalog.Index {
	a := &offer.Agent{Tools: []string{"research_web", "memory_search", "budget_check", "wiki__search", "crm__find_customer", "nope__x"}, Memory: true, Embeddings: true}
	return catalog.NewIndex(a, testDefs, testApps)
}

func names(bs []catalog.Brief) []string {
	out := make([]string, len(bs))
	for i, b := range bs {
		out[i] = b.Name
	}
	return out
}

func TestListKeepsEveryNameAndShortens(t *testing.T) {
	t.Parallel()
	l := testIndex().List()
	// Offered built-in tools in registration order, then the allowlisted
	// application tools in allowlist order; budget_check's switch is off,
	// delete_customer is not on the agent's list, nope is no application.
	require.Equal(t, []string{"calculator", "read_file", "search_files", "research_web", "memory_search", "wiki__search", "crm__find_customer"}, names(l.Tools))
	for _, b := range l.Tools {
		require.LessOrEqual(t, utf8.RuneCountInString(b.Description), catalog.MaxDescription, b.Name)
	}
	require.True(t, strings.HasSuffix(l.Tools[3].Description, "…"))
	require.True(t, strings.HasPrefix(l.Tools[3].Description, "Read web pages about a question."))
	// Application tools carry their servers' descriptions; a server that
	// did not answer leaves its tools known by name, and says so.
	require.Equal(t, "Find a customer by name or email.", l.Tools[6].Description)
	require.Equal(t, "A tool of application wiki, whose server did not answer: its description is unknown.", l.Tools[5].Description)

	// An agent that declares nothing gets the always-on and workspace tools only.
	bare := catalog.NewIndex(&offer.Agent{}, testDefs, testApps).List()
	require.Equal(t, []string{"calculator", "read_file", "search_files"}, names(bare.Tools))
}

func TestSearch(t *testing.T) {
	t.Parallel()
	ix := testIndex()
	tests := []struct {
		name         string
		give         []string
		wantQueries  []string
		wantNames    [][]string
		wantNote     string
		wantFailures []schematype.ItemFailure
	}{
		{
			name:        "name words before description words, prefixes match",
			give:        []string{"search"},
			wantQueries: []string{"search"},
			wantNames:   [][]string{{"search_files", "memory_search", "wiki__search"}},
		},
		{
			name:        "more query words matched ranks first, then whole words before prefixes; case ignored",
			give:        []string{"SEARCH Files"},
			wantQueries: []string{"SEARCH Files"},
			wantNames:   [][]string{{"search_files", "memory_search", "wiki__search", "read_file"}},
		},
		{
			name:        "answered in query order",
			give:        []string{"web", "customer", "arithmetic"},
			wantQueries: []string{"web", "customer", "arithmetic"},
			wantNames:   [][]string{{"research_web"}, {"crm__find_customer"}, {"calculator"}},
		},
		{
			name:        "an exact name comes first",
			give:        []string{"read_file"},
			wantQueries: []string{"read_file"},
			wantNames:   [][]string{{"read_file", "search_files", "research_web"}},
		},
		{
			name:        "stop words are not matched",
			give:        []string{"how do I find the customer"},
			wantQueries: []string{"how do I find the customer"},
			wantNames:   [][]string{{"crm__find_customer"}},
		},
		{
			name:        "duplicates collapsed and said so",
			give:        []string{"web", "Web ", "customer", "  web", "CUSTOMER"},
			wantQueries: []string{"web", "customer"},
			wantNames:   [][]string{{"research_web"}, {"crm__find_customer"}},
			wantNote:    "items 1, 3, 4 repeat earlier queries: answered once",
		},
		{
			name:         "blank items fail alone",
			give:         []string{"web", "  ", "zebra"},
			wantQueries:  []string{"web", "zebra"},
			wantNames:    [][]string{{"research_web"}, {}},
			wantFailures: []schematype.ItemFailure{{Item: 1, Input: "  ", Kind: schematype.FailureRefused, Message: "blank"}},
		},
		{
			name:        "six items, five distinct",
			give:        []string{"a1", "b2", "c3", "d4", "e5", "a1"},
			wantQueries: []string{"a1", "b2", "c3", "d4", "e5"},
			wantNames:   [][]string{{}, {}, {}, {}, {}},
			wantNote:    "item 5 repeats an earlier query: answered once",
		},
		{
			name:        "application tools by application name",
			give:        []string{"crm"},
			wantQueries: []string{"crm"},
			wantNames:   [][]string{{"crm__find_customer"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := ix.Search(tenancy.System(context.Background()), tt.give)
			require.NoError(t, err)
			var queries []string
			var found [][]string
			for _, r := range got.Results {
				queries = append(queries, r.Query)
				found = append(found, names(r.Tools))
			}
			require.Equal(t, tt.wantQueries, queries)
			require.Equal(t, tt.wantNames, found)
			if tt.wantNote == "" {
				require.Nil(t, got.Note)
			} else {
				require.Equal(t, tt.wantNote, *got.Note)
			}
			if tt.wantFailures == nil {
				tt.wantFailures = []schematype.ItemFailure{}
			}
			require.Equal(t, tt.wantFailures, got.Failures)
		})
	}
}

func TestSearchRefuses(t *testing.T) {
	t.Parallel()
	tests := []struct {
		give []string
		want string
	}{
		{give: nil, want: "queries: give at least one query"},
		{give: []string{"a", "b", "c", "d", "e", "f"}, want: "queries: 6 distinct, at most 5 per call"},
	}
	for _, tt := range tests {
		_, err := testIndex().Search(tenancy.System(context.Background()), tt.give)
		require.EqualError(t, err, tt.want)
		require.EqualError(t, catalog.CheckQueries(tt.give), tt.want)
	}
}

func TestNothingFound(t *testing.T) {
	t.Parallel()
	ix := testIndex()
	tests := []struct {
		give []string
		want bool
	}{
		{give: []string{"zebra", "quokka"}, want: true},
		{give: []string{"zebra", "web"}, want: false},
		{give: []string{" "}, want: true},
	}
	for _, tt := range tests {
		s, err := ix.Search(tenancy.System(context.Background()), tt.give)
		require.NoError(t, err)
		raw, err := json.Marshal(map[string]any{"results": lower(s.Results)})
		require.NoError(t, err)
		require.Equal(t, tt.want, catalog.NothingFound(raw), tt.give)
	}
	require.False(t, catalog.NothingFound(json.RawMessage(`not json`)))
}

// lower renders results with the field names the GraphQL operation selects.
func lower(rs []catalog.Found) []map[string]any {
	out := make([]map[string]any, len(rs))
	for i, r := range rs {
		out[i] = map[string]any{"query": r.Query, "tools": r.Tools}
	}
	return out
}

func TestSchemas(t *testing.T) {
	t.Parallel()
	ix := testIndex()
	got, err := ix.Schemas([]string{"read_file", "nope", "calculator", "read_file", "budget_check", "crm__delete_customer"})
	require.NoError(t, err)
	require.Len(t, got.Tools, 2)
	require.Equal(t, "read_file", got.Tools[0].Name)
	require.Equal(t, "Read a workspace file.", got.Tools[0].Description)
	require.Equal(t, "calculator", got.Tools[1].Name)
	// Whole: the schema the model receives with the tool.
	for i, d := range []tools.Definition{testDefs[1], testDefs[0]} {
		var wire struct{ Parameters json.RawMessage }
		require.NoError(t, json.Unmarshal(d.Wire(), &wire))
		require.Equal(t, string(wire.Parameters), string(got.Tools[i].Parameters))
		require.JSONEq(t, string(d.Schema), string(got.Tools[i].Parameters))
	}
	// Not offered (switch off, not allowlisted) reads like a made-up name.
	require.Equal(t, []string{"nope", "budget_check", "crm__delete_customer"}, got.Missing)
	require.Equal(t, catalog.Hint, *got.Hint)
	require.Empty(t, got.Failures)

	// An application tool comes with the schema its server lists; one whose
	// server did not answer fails as an item.
	app, err := ix.Schemas([]string{"crm__find_customer", "wiki__search"})
	require.NoError(t, err)
	require.Len(t, app.Tools, 1)
	require.Equal(t, "Find a customer by name or email.", app.Tools[0].Description)
	require.JSONEq(t, string(testApps[0].Tools[0].Schema), string(app.Tools[0].Parameters))
	require.Equal(t, []schematype.ItemFailure{{Item: 1, Input: "wiki__search", Kind: schematype.FailureOutage,
		Message: "the server of application wiki did not answer: its schema is unknown; try again later"}}, app.Failures)

	// The long description comes whole.
	long, err := ix.Schemas([]string{"research_web"})
	require.NoError(t, err)
	require.Equal(t, testDefs[3].Description, long.Tools[0].Description)
	require.Empty(t, long.Missing)
	require.Nil(t, long.Hint)
}

func TestSchemasRefuses(t *testing.T) {
	t.Parallel()
	many := make([]string, catalog.MaxNames+1)
	for i := range many {
		many[i] = "tool_" + strings.Repeat("x", i+1)
	}
	tests := []struct {
		give []string
		want string
	}{
		{give: nil, want: "names: give at least one tool name"},
		{give: many, want: "names: 21 distinct, at most 20 per call"},
	}
	for _, tt := range tests {
		_, err := testIndex().Schemas(tt.give)
		require.EqualError(t, err, tt.want)
	}
	// Repeats do not count against the limit.
	_, err := testIndex().Schemas(append(many[:catalog.MaxNames], many[0]))
	require.NoError(t, err)
}

func TestShorten(t *testing.T) {
	t.Parallel()
	tests := []struct {
		give string
		want string
	}{
		{give: "  short  ", want: "short"},
		{give: strings.Repeat("é", 200), want: strings.Repeat("é", 200)},
		{give: strings.Repeat("é", 201), want: strings.Repeat("é", 199) + "…"},
		{give: strings.Repeat("word ", 60), want: strings.TrimSpace(strings.Repeat("word ", 39)) + "…"},
	}
	for _, tt := range tests {
		got := catalog.Shorten(tt.give)
		require.Equal(t, tt.want, got)
		require.LessOrEqual(t, utf8.RuneCountInString(got), catalog.MaxDescription)
	}
}

func TestSchemaGQL(t *testing.T) {
	t.Parallel()
	var s catalog.Schema
	require.NoError(t, s.UnmarshalGQL(map[string]any{"type": "object"}))
	var b strings.Builder
	s.MarshalGQL(&b)
	require.JSONEq(t, `{"type":"object"}`, b.String())
	b.Reset()
	catalog.Schema(nil).MarshalGQL(&b)
	require.Equal(t, "null", b.String())
}
