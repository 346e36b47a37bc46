package offer_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/ent"
	"github.com/toolgate/toolgate/offer"
	"github.com/toolgate/toolgate/offer/token"
	"github.com/toolgate/toolgate/tools"
)

func def(name string, o tools.Offering) tools.Definition {
	return tools.Definition{Name: name, Offered: o, Schema: json.RawMessage(`{"type":"object"}`)}
}

var builtins = []tools.Definition{
	def("clarify", tools.OfferAlways),
	def("read_file", tools.OfferWorkspace),
	def("search_web", tools.OfferAllowlisted),
	def("search_docs", tools.OfferAllowlisted),
	def("remember", tools.OfferMemorySwitch),
	def("check_budget", tools.OfferBudgetSwitch),
	def("search_conversations", tools.OfferPastConversationsSwitch),
}

func names(defs []tools.Definition) []string {
	out := make([]string, len(defs))
	for i, d := range defs {
		out[i] = d.Name
	}
	return out
}

// withEmbeddings reads an agent's rules on a server with an embedding
// model, as memory needs.
func withEmbeddings(a *ent.Agent) *offer.Agent {
	return offer.RulesOf(a, nil, offer.Server{Embeddings: true})
}

func TestRegister(t *testing.T) {
	t.Parallel()
	apps := []tools.Definition{def("crm__lookup", tools.OfferAllowlisted), def("crm__purge", tools.OfferAllowlisted)}
	tests := []struct {
		name string
		give *ent.Agent
		want []string
	}{
		{name: "no tools declared: always-on and workspace only", give: &ent.Agent{}, want: []string{"clarify", "read_file"}},
		{name: "allowlist in registration order", give: &ent.Agent{Tools: []string{"search_docs", "search_web", "unknown"}},
			want: []string{"clarify", "read_file", "search_web", "search_docs"}},
		{name: "each switch its own tool", give: &ent.Agent{Memory: true, PastConversationSearch: true,
			Tools: []string{"remember", "search_conversations", "check_budget"}},
			want: []string{"clarify", "read_file", "remember", "search_conversations"}},
		{name: "a switch alone offers nothing", give: &ent.Agent{BudgetCheck: true, Memory: true}, want: []string{"clarify", "read_file"}},
		{name: "budget switch", give: &ent.Agent{BudgetCheck: true, Tools: []string{"check_budget"}}, want: []string{"clarify", "read_file", "check_budget"}},
		{name: "application tools the agent lists, in its order", give: &ent.Agent{Tools: []string{"crm__purge", "crm__lookup", "crm__missing"}},
			want: []string{"clarify", "read_file", "crm__purge", "crm__lookup"}},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, names(offer.Register(withEmbeddings(tt.give), builtins, apps)), tt.name)
	}
	noModel := &ent.Agent{Memory: true, Tools: []string{"remember"}}
	require.Equal(t, []string{"clarify", "read_file"}, names(offer.Register(offer.AgentOf(noModel), builtins, apps)),
		"memory needs an embedding model")
}

// TestBuildDefers: FULL sends every definition whole; DEFERRED keeps the
// always-on tools whole, adds get_tool_schema and sends the rest as stubs;
// AUTO defers only past
// offer.AutoDeferTokens of definitions.
func TestBuildDefers(t *testing.T) {
	t.Parallel()
	schemaTool := def(tools.SchemaTool, tools.OfferAllowlisted)
	all := append(slices.Clone(builtins), schemaTool)
	big := def("erp__report", tools.OfferAllowlisted)
	big.Description = "Build a report. " + strings.Repeat("Every column is explained here at length. ", 1000)
	apps := []tools.Definition{def("crm__lookup", tools.OfferAllowlisted), big}
	agent := func(loading string, tools ...string) *offer.Agent {
		return &offer.Agent{Loading: loading, Tools: tools}
	}

	deck := offer.Build(agent(offer.LoadFull, "search_web", "crm__lookup"), all, apps)
	require.False(t, deck.Deferred)
	require.Equal(t, []string{"clarify", "read_file", "search_web", "crm__lookup"}, names(deck.Offered))
	require.Equal(t, deck.Offered, deck.Sent)
	require.Equal(t, token.Definitions(deck.Offered), deck.SentTokens)

	deck = offer.Build(agent(offer.LoadDeferred, "search_web", "erp__report"), all, apps)
	require.True(t, deck.Deferred)
	offered := deck.Offered
	require.Equal(t, []string{"clarify", "read_file", "search_web", tools.SchemaTool, "erp__report"}, names(offered))
	for i, d := range deck.Sent {
		if d.Name == "clarify" || d.Name == tools.SchemaTool {
			require.Equal(t, offered[i], d, d.Name)
		} else {
			require.Equal(t, offered[i].Stub(), d, d.Name)
		}
	}
	require.Equal(t, "Build a report.", deck.Sent[4].Description, "an application tool's stub: its first sentence")
	require.Equal(t, token.Definitions(deck.Sent), deck.SentTokens)
	require.Less(t, deck.SentTokens, token.Definitions(offered))

	// AUTO: a small deck goes whole; the big application tool tips it.
	require.False(t, offer.Build(agent(offer.LoadAuto, "search_web", "crm__lookup"), all, apps).Deferred)
	require.True(t, offer.Build(agent("", "search_web", "erp__report"), all, apps).Deferred, "AUTO is the zero value")
	require.False(t, offer.Build(agent(offer.LoadFull, "search_web", "erp__report"), all, apps).Deferred)
}
