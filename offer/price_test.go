package offer_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/ent/schematype"
	"github.com/toolgate/toolgate/offer"
)

// gpt41 is gpt-4.1's list price.
var gpt41 = offer.Rates{Input: 2, CacheRead: 0.5, CacheWrite: 2, Output: 8}

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
	plain := offer.Rates{Input: 1, Output: 4}.Estimate(1000, 500, 200)
	require.Equal(t, schematype.Micros(1000*4), plain.FullMicros)
	require.Equal(t, schematype.Micros(500*5+200*4+3000+60*4), plain.DeferredMicros)

	require.Equal(t, 0, offer.ReadTokens(nil))
	require.Equal(t, 30, offer.ReadTokens([]int{10, 20}), "fewer than three: all of them")
	require.Equal(t, 60, offer.ReadTokens([]int{10, 20, 30, 20}), "three at the mean size")
}

// TestAutoLoadingByPrice: AUTO defers when a turn pays less for its
// definitions deferred, at the model's price: an agent of the always-on
// tools alone keeps them whole (the extra call costs more than the stubs
// save), and one offered every built-in tool defers at gpt-4.1's price. With no
// price the old rule holds: defer past AutoDeferTokens. FULL and DEFERRED
// are obeyed whatever the price.
