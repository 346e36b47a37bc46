package catalog_test

import (
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/offer"
	"github.com/toolgate/toolgate/offer/token"
	"github.com/toolgate/toolgate/tools"
	"github.com/toolgate/toolgate/tools/catalog"
	"github.com/toolgate/toolgate/tools/registry"
)

// TestCeilings holds the registered catalogue under its ceilings. It reads
// the registry when it runs, so a tool added anywhere is counted.
func TestCeilings(t *testing.T) {
	t.Parallel()
	c := catalog.Measure(registry.All())
	require.NoError(t, c.Check())
	require.Len(t, c.Tools, len(registry.All()))
	for _, tt := range c.Tools {
		require.Positive(t, tt.DefinitionChars, tt.Name)
		require.Positive(t, tt.DefinitionTokens, tt.Name)
		require.Less(t, tt.DefinitionTokens, tt.DefinitionChars, tt.Name)
		t.Logf("%-22s %-12s %-18s %5d chars %4d tokens", tt.Name, tt.Family, tt.OfferedWhen, tt.DefinitionChars, tt.DefinitionTokens)
	}
	t.Logf("widest %d chars (%d tokens) of %d; always paid %d chars (%d tokens) of %d; guidance %d chars (%d tokens), %d always paid",
		c.WidestChars, c.WidestTokens, catalog.WidestCeiling, c.AlwaysPaidChars, c.AlwaysPaidTokens, catalog.AlwaysPaidCeiling,
		c.GuidanceChars, c.GuidanceTokens, c.AlwaysPaidGuidanceChars)
}

// def returns a definition whose wire form is exactly chars characters.
func def(t *testing.T, name string, when tools.Offering, chars int) tools.Definition {
	t.Helper()
	d := tools.Definition{Name: name, Family: "test", Offered: when, Schema: json.RawMessage(`{"type":"object"}`)}
	base := utf8.RuneCount(d.Wire())
	require.GreaterOrEqual(t, chars, base)
	d.Description = strings.Repeat("x", chars-base)
	require.Equal(t, chars, utf8.RuneCount(d.Wire()))
	return d
}

func TestCheck(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		give    func(t *testing.T) []tools.Definition
		wantErr string
	}{
		{
			name: "exactly at both ceilings",
			give: func(t *testing.T) []tools.Definition {
				return []tools.Definition{
					def(t, "always", tools.OfferAlways, catalog.AlwaysPaidCeiling),
					def(t, "optional", tools.OfferAllowlisted, catalog.WidestCeiling-catalog.AlwaysPaidCeiling),
				}
			},
		},
		{
			name: "widest one over",
			give: func(t *testing.T) []tools.Definition {
				return []tools.Definition{
					def(t, "always", tools.OfferAlways, 1000),
					def(t, "optional", tools.OfferAllowlisted, catalog.WidestCeiling-1000+1),
				}
			},
			wantErr: "widest catalogue is 40123 characters, over the ceiling of 40122",
		},
		{
			name: "always paid one over, through a workspace tool",
			give: func(t *testing.T) []tools.Definition {
				return []tools.Definition{
					def(t, "always", tools.OfferAlways, catalog.AlwaysPaidCeiling-1000),
					def(t, "workspace", tools.OfferWorkspace, 1001),
				}
			},
			wantErr: "always-paid catalogue is 13457 characters, over the ceiling of 13456",
		},
		{
			name: "switched tools count only in the widest",
			give: func(t *testing.T) []tools.Definition {
				return []tools.Definition{
					def(t, "memory", tools.OfferMemorySwitch, catalog.AlwaysPaidCeiling+1),
					def(t, "budget", tools.OfferBudgetSwitch, 100),
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := catalog.Measure(tt.give(t)).Check()
			if tt.wantErr == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tt.wantErr)
		})
	}
}

func TestMeasure(t *testing.T) {
	t.Parallel()
	shared := "Queries that never ran are outages, not absences."
	defs := []tools.Definition{
		// Characters, not bytes: "π≈" is two characters and five bytes.
		{Name: "pi", Family: "calc", Description: "π≈", Offered: tools.OfferAlways, Guidance: " Use pi.\n"},
		{Name: "files", Family: "workspace", Description: "Files.", Offered: tools.OfferWorkspace,
			Schema: json.RawMessage("{\n  \"type\": \"object\"\n}")},
		{Name: "one", Family: "search", Description: "One.", Offered: tools.OfferAllowlisted, Guidance: shared, GuidanceKey: "queries"},
		{Name: "two", Family: "search", Description: "Two.", Offered: tools.OfferMemorySwitch, Guidance: shared, GuidanceKey: "queries"},
	}
	c := catalog.Measure(defs)

	wantChars := []int{
		len(`{"name":"pi","description":"","parameters":{"type":"object"}}`) + 2,
		len(`{"name":"files","description":"Files.","parameters":{"type":"object"}}`),
		len(`{"name":"one","description":"One.","parameters":{"type":"object"}}`),
		len(`{"name":"two","description":"Two.","parameters":{"type":"object"}}`),
	}
	require.Len(t, c.Tools, 4)
	for i, tt := range c.Tools {
		require.Equal(t, defs[i].Name, tt.Name)
		require.Equal(t, defs[i].Family, tt.Family)
		require.Equal(t, string(defs[i].Offered), tt.OfferedWhen)
		require.Equal(t, wantChars[i], tt.DefinitionChars, tt.Name)
		require.Equal(t, token.Count(string(defs[i].Wire())), tt.DefinitionTokens, tt.Name)
	}
	require.Equal(t, []bool{true, true, false, false}, []bool{c.Tools[0].AlwaysOn, c.Tools[1].AlwaysOn, c.Tools[2].AlwaysOn, c.Tools[3].AlwaysOn})
	require.Equal(t, wantChars[0]+wantChars[1]+wantChars[2]+wantChars[3], c.WidestChars)
	require.Equal(t, wantChars[0]+wantChars[1], c.AlwaysPaidChars)
	require.Equal(t, c.Tools[0].DefinitionTokens+c.Tools[1].DefinitionTokens, c.AlwaysPaidTokens)
	// No agent: offered is the always-on part.
	require.Equal(t, c.AlwaysPaidChars, c.OfferedChars)
	require.Equal(t, c.AlwaysPaidTokens, c.OfferedTokens)
	// The shared paragraph is collected once; paragraphs are trimmed.
	require.Equal(t, len("Use pi.")+len(shared), c.GuidanceChars)
	require.Equal(t, token.Count("Use pi.")+token.Count(shared), c.GuidanceTokens)
	require.Equal(t, len("Use pi."), c.AlwaysPaidGuidanceChars)
	require.Equal(t, catalog.Ceilings{WidestChars: 40122, AlwaysPaidChars: 13456}, c.Ceilings)

	agent := c.For(&offer.Agent{Tools: []string{"one", "two"}})
	require.Equal(t, []bool{true, true, true, false}, []bool{agent.Tools[0].Offered, agent.Tools[1].Offered, agent.Tools[2].Offered, agent.Tools[3].Offered})
	require.Equal(t, wantChars[0]+wantChars[1]+wantChars[2], agent.OfferedChars)
	require.False(t, c.Tools[2].Offered, "For leaves the catalogue it was called on alone")
}

// TestCatalogueSaysWhyNotOffered: each tool of the catalogue carries the
// reason it is not offered, and an embedding model that does not answer
// is a warning naming the tools it holds back.
func TestCatalogueSaysWhyNotOffered(t *testing.T) {
	t.Parallel()
	defs := []tools.Definition{
		{Name: "calc", Offered: tools.OfferAlways, Schema: json.RawMessage(`{"type":"object"}`)},
		{Name: "mem", Brief: "m", Offered: tools.OfferMemorySwitch, Schema: json.RawMessage(`{"type":"object"}`)},
		{Name: "opt", Brief: "o", Offered: tools.OfferAllowlisted, Schema: json.RawMessage(`{"type":"object"}`)},
	}
	down := "the embedding model bge-small does not answer (503 Service Unavailable)"
	c := catalog.Measure(defs).For(&offer.Agent{Tools: []string{"mem"}, Memory: true, Embeddings: true, EmbeddingsDown: down})
	require.Nil(t, c.Tools[0].NotOfferedReason())
	require.Equal(t, down, *c.Tools[1].NotOfferedReason())
	require.False(t, c.Tools[1].Offered)
	require.Equal(t, "not in the agent's tools", *c.Tools[2].NotOfferedReason())
	require.Equal(t, []string{down + ", so mem is not offered until it answers"}, c.Warnings)

	up := catalog.Measure(defs).For(&offer.Agent{Tools: []string{"mem"}, Memory: true, Embeddings: true})
	require.True(t, up.Tools[1].Offered)
	require.Empty(t, up.Warnings)
}

// BenchmarkMeasure measures the registry as a catalogue request does: token
// counts of unchanged definitions are remembered.
func BenchmarkMeasure(b *testing.B) {
	defs := registry.All()
	catalog.Measure(defs)
	b.ReportAllocs()
	for b.Loop() {
		catalog.Measure(defs)
	}
}

// BenchmarkTokens counts the tokens of every registered definition afresh:
// what the first catalogue request pays.
func BenchmarkTokens(b *testing.B) {
	var wires []string
	for _, d := range registry.All() {
		wires = append(wires, string(d.Wire()))
	}
	token.Count("")
	b.ReportAllocs()
	for b.Loop() {
		for _, w := range wires {
			token.Count(w)
		}
	}
}

// TestDeckCountsApplicationTools: an agent's real deck is its built-in
// tools and its allowlisted application tools as their servers list them.
// (The catalogue once measured built-in tools only: an agent with 40
// application tools passed both ceilings unseen.)
func TestDeckCountsApplicationTools(t *testing.T) {
	t.Parallel()
	builtin := []tools.Definition{
		{Name: "calc", Family: "calc", Description: "Add.", Offered: tools.OfferAlways},
	}
	big := func(name string) tools.Definition {
		return tools.Definition{Name: "erp__" + name, Family: "application", Description: "A tool.",
			Schema: json.RawMessage(`{"type":"object","description":"` + strings.Repeat("x", 2000) + `"}`)}
	}
	var erp []tools.Definition
	var allowed, allowlist []string
	for i := range 25 {
		name := "t" + strconv.Itoa(i)
		erp = append(erp, big(name))
		allowed = append(allowed, name)
		allowlist = append(allowlist, "erp__"+name)
	}
	apps := []catalog.Application{
		{Name: "erp", Allowed: allowed, Tools: erp},
		{Name: "wiki", Allowed: []string{"search"}, Err: errors.New("connection refused")},
	}
	base := catalog.Measure(builtin)

	small := &offer.Agent{Tools: []string{"erp__t0", "erp__t1", "wiki__search"}}
	c := base.For(small).WithApplications(small, apps)
	require.Equal(t, []string{"calc", "erp__t0", "erp__t1"}, toolNames(c.Tools))
	one := utf8.RuneCount(erp[0].Wire())
	require.Equal(t, 2*one, c.ApplicationChars)
	require.Equal(t, base.AlwaysPaidChars+2*one, c.OfferedChars)
	require.Equal(t, c.Tools[1].DefinitionTokens+c.Tools[2].DefinitionTokens, c.ApplicationTokens)
	require.True(t, c.Tools[1].Offered)
	require.Equal(t, []string{"application wiki: its server did not answer (connection refused), so its tools are not measured"}, c.Warnings)
	require.NoError(t, c.CheckDeck())
	require.Equal(t, base.WidestChars, c.WidestChars, "the ceilings' figures stay the built-in catalogue's")

	wide := &offer.Agent{Tools: allowlist}
	c = base.For(wide).WithApplications(wide, apps)
	require.Greater(t, c.OfferedChars, catalog.WidestCeiling)
	err := c.CheckDeck()
	require.ErrorContains(t, err, "over the widest ceiling of 40122: allow fewer application tools")
	require.Equal(t, []string{err.Error()}, c.Warnings)
}

func toolNames(ts []catalog.Tool) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.Name
	}
	return out
}
