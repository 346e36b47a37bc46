package catalog_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/offer"
	"github.com/toolgate/toolgate/tools"
	"github.com/toolgate/toolgate/tools/catalog"
	"github.com/toolgate/toolgate/tools/registry"
)

// gpt41 is gpt-4.1's list price.
var gpt41 = offer.Rates{Input: 2, CacheRead: 0.5, CacheWrite: 2, Output: 8}

// TestAutoLoadingByPrice: AUTO defers when a turn pays less for its
// definitions deferred, at the model's price: an agent of the always-on
// tools alone keeps them whole (the extra call costs more than the stubs
// save), and one offered every built-in tool defers at gpt-4.1's price. With no
// price the old rule holds: defer past AutoDeferTokens. FULL and DEFERRED
// are obeyed whatever the price.
func TestAutoLoadingByPrice(t *testing.T) {
	t.Parallel()
	all := registry.All()
	every := allowlisted(all)
	measure := func(a *offer.Agent) catalog.Catalogue { return catalog.Measure(all).For(a) }
	priced := func(loading string, r *offer.Rates, tools ...string) *offer.Agent {
		return &offer.Agent{Loading: loading, Tools: tools, Memory: true, BudgetCheck: true, PastConversationSearch: true,
			WebResearch: true, Knowledge: true, Embeddings: true, Browser: true, Rates: r}
	}

	lean := measure(priced(offer.LoadAuto, &gpt41))
	require.True(t, lean.Loading.Priced)
	require.Less(t, lean.Loading.FullMicros, lean.Loading.DeferredMicros)
	require.False(t, lean.Deferring)
	require.NotNil(t, lean.LoadingCost())

	wide := measure(priced(offer.LoadAuto, &gpt41, every...))
	require.Less(t, wide.Loading.DeferredMicros, wide.Loading.FullMicros, "%+v", wide.Loading)
	require.True(t, wide.Deferring)
	require.Less(t, wide.Loading.DeferredTokens, wide.Loading.FullTokens)
	require.Equal(t, wide.OfferedTokens, wide.Loading.FullTokens)
	require.Equal(t, wide.SentTokens, wide.Loading.DeferredTokens, "deferring, each call sends what was priced")
	require.Positive(t, wide.Loading.ReadTokens)
	t.Logf("at gpt-4.1's price, a turn's definitions: lean %+v; every built-in tool %+v", lean.Loading, wide.Loading)

	unpriced := measure(priced(offer.LoadAuto, nil, every...))
	require.False(t, unpriced.Loading.Priced)
	require.Nil(t, unpriced.LoadingCost())
	require.Equal(t, unpriced.OfferedTokens > offer.AutoDeferTokens, unpriced.Deferring)

	require.False(t, measure(priced(offer.LoadFull, &gpt41, every...)).Deferring)
	require.True(t, measure(priced(offer.LoadDeferred, &gpt41)).Deferring)
}

// TestCatalogueMeasuresTheDeck: with the model's price known, a turn's
// deck is deferred exactly when the catalogue says the agent's turns
// defer, and sends what the catalogue measured: a lean agent whole, one
// offered every built-in tool deferred.
func TestCatalogueMeasuresTheDeck(t *testing.T) {
	t.Parallel()
	all := registry.All()
	every := allowlisted(all)
	rates := &gpt41
	for _, allow := range [][]string{nil, {"search_web", "write_file"}, every} {
		a := &offer.Agent{Tools: allow, Memory: true, BudgetCheck: true, WebResearch: true, Embeddings: true, Browser: true, Rates: rates}
		c := catalog.Measure(all).For(a)
		deck := offer.Build(a, all, nil)
		require.Equal(t, c.Deferring, deck.Deferred, "%d tools allowed", len(allow))
		require.Equal(t, c.SentTokens, deck.SentTokens, "%d tools allowed", len(allow))
	}
	require.False(t, offer.Build(&offer.Agent{Rates: rates}, all, nil).Deferred)
	require.True(t, offer.Build(&offer.Agent{Tools: every, Memory: true, WebResearch: true, Embeddings: true, Browser: true, Rates: rates}, all, nil).Deferred)
}

// allowlisted names the tools of defs an agent gets by listing them.
func allowlisted(defs []tools.Definition) []string {
	var out []string
	for _, d := range defs {
		if d.Offered == tools.OfferAllowlisted {
			out = append(out, d.Name)
		}
	}
	return out
}
