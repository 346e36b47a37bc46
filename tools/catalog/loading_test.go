package catalog_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/ent/schematype"
	"github.com/toolgate/toolgate/tools"
	"github.com/toolgate/toolgate/tools/catalog"
	"github.com/toolgate/toolgate/tools/registry"
)

// gpt41 is gpt-4.1's list price.
var gpt41 = catalog.Rates{Input: 2, CacheRead: 0.5, CacheWrite: 2, Output: 8}

// TestLoadingEstimate prices a turn each way by hand: sent whole, 4 calls
// pay the definitions once at the cache-write price and 3 times cached;
// deferred, 5 calls pay the smaller deck likewise, the definitions read
// back ride uncached once and cached 3 times, and the extra call reads
// 3,000 tokens of messages from the cache and writes 60.
func TestLoadingEstimate(t *testing.T) {
	t.Parallel()
	e := gpt41.Estimate(4000, 1500, 900)
	require.True(t, e.Priced)
	require.Equal(t, schematype.Micros(4000*(2+3*0.5)), e.FullMicros)
	require.Equal(t, schematype.Micros(1500*(2+4*0.5)+900*(2+3*0.5)+3000*0.5+60*8), e.DeferredMicros)

	// A model without cache prices pays the input price throughout.
	plain := catalog.Rates{Input: 1, Output: 4}.Estimate(1000, 500, 200)
	require.Equal(t, schematype.Micros(1000*4), plain.FullMicros)
	require.Equal(t, schematype.Micros(500*5+200*4+3000+60*4), plain.DeferredMicros)

	require.Equal(t, 0, catalog.ReadTokens(nil))
	require.Equal(t, 30, catalog.ReadTokens([]int{10, 20}), "fewer than three: all of them")
	require.Equal(t, 60, catalog.ReadTokens([]int{10, 20, 30, 20}), "three at the mean size")
}

// TestAutoLoadingByPrice: AUTO defers when a turn pays less for its
// definitions deferred, at the model's price: an agent of the always-on
// tools alone keeps them whole (the extra call costs more than the stubs
// save), and one offered every built-in tool defers at gpt-4.1's price. With no
// price the old rule holds: defer past AutoDeferTokens. FULL and DEFERRED
// are obeyed whatever the price.
func TestAutoLoadingByPrice(t *testing.T) {
	t.Parallel()
	all := registry.All()
	var every []string
	for _, d := range all {
		if d.Offered == tools.OfferAllowlisted {
			every = append(every, d.Name)
		}
	}
	measure := func(a *catalog.Agent) catalog.Catalogue { return catalog.Measure(all).For(a) }
	priced := func(loading string, r *catalog.Rates, tools ...string) *catalog.Agent {
		return &catalog.Agent{Loading: loading, Tools: tools, Memory: true, BudgetCheck: true, PastConversationSearch: true,
			WebResearch: true, Knowledge: true, Embeddings: true, Browser: true, Rates: r}
	}

	lean := measure(priced(catalog.LoadAuto, &gpt41))
	require.True(t, lean.Loading.Priced)
	require.Less(t, lean.Loading.FullMicros, lean.Loading.DeferredMicros)
	require.False(t, lean.Deferring)
	require.NotNil(t, lean.LoadingCost())

	wide := measure(priced(catalog.LoadAuto, &gpt41, every...))
	require.Less(t, wide.Loading.DeferredMicros, wide.Loading.FullMicros, "%+v", wide.Loading)
	require.True(t, wide.Deferring)
	require.Less(t, wide.Loading.DeferredTokens, wide.Loading.FullTokens)
	require.Equal(t, wide.OfferedTokens, wide.Loading.FullTokens)
	require.Equal(t, wide.SentTokens, wide.Loading.DeferredTokens, "deferring, each call sends what was priced")
	require.Positive(t, wide.Loading.ReadTokens)
	t.Logf("at gpt-4.1's price, a turn's definitions: lean %+v; every built-in tool %+v", lean.Loading, wide.Loading)

	unpriced := measure(priced(catalog.LoadAuto, nil, every...))
	require.False(t, unpriced.Loading.Priced)
	require.Nil(t, unpriced.LoadingCost())
	require.Equal(t, unpriced.OfferedTokens > catalog.AutoDeferTokens, unpriced.Deferring)

	require.False(t, measure(priced(catalog.LoadFull, &gpt41, every...)).Deferring)
	require.True(t, measure(priced(catalog.LoadDeferred, &gpt41)).Deferring)
}
