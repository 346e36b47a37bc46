package offer

import "github.com/toolgate/toolgate/ent/schematype"

// How AUTO chooses between sending an agent's definitions whole and
// deferring them: by what a turn is expected to pay for them at the
// model's own prices.
//
// A turn of AutoCalls model calls sends the stable prefix (the system
// prompt and the definitions) on every call: the first at the price of a
// cache write (the provider's input price when it has none), the others
// at the cache-read price. Deferring sends a smaller prefix, but the turn
// takes one more call first, to read what it will use with
// get_tool_schema: that call sends the conversation's messages
// (AutoMessageTokens) and writes AutoSchemaCallTokens, and the
// definitions it reads (AutoReads of the deferred tools, at their mean
// size) ride in the messages of every later call, uncached on the first.
// The figures are a turn's shape, not one agent's history: they are the
// same for every agent, so the choice follows from the deck and the price.

// The shape of the turn AUTO prices.
const (
	AutoCalls            = 4
	AutoReads            = 3
	AutoMessageTokens    = 3000
	AutoSchemaCallTokens = 60
)

// Rates are a model's prices, in USD per million tokens of each kind.
type Rates struct {
	Input, CacheRead, CacheWrite, Output float64
}

// LoadingEstimate is what one turn of an agent is expected to pay for its
// tool definitions, sent whole and deferred, in micro-dollars.
type LoadingEstimate struct {
	// Priced: the model's price is known, so the micro-dollars are set.
	Priced                     bool
	FullMicros, DeferredMicros schematype.Micros
	// FullTokens and DeferredTokens are the definitions each call sends;
	// ReadTokens what a deferring turn is expected to read of them.
	FullTokens, DeferredTokens, ReadTokens int
}

// Estimate prices a turn of full tokens of definitions sent whole against
// deferred tokens sent deferring, which reads read tokens of definitions
// back, at r.
func (r Rates) Estimate(full, deferred, read int) LoadingEstimate {
	write, cached := r.CacheWrite, r.CacheRead
	if write == 0 {
		write = r.Input
	}
	if cached == 0 {
		cached = r.Input
	}
	prefix := func(tokens, calls int) float64 {
		return float64(tokens) * (write + float64(calls-1)*cached)
	}
	fullCost := prefix(full, AutoCalls)
	deferredCost := prefix(deferred, AutoCalls+1) +
		float64(read)*(r.Input+float64(AutoCalls-1)*cached) +
		AutoMessageTokens*cached + AutoSchemaCallTokens*r.Output
	return LoadingEstimate{Priced: true, FullMicros: schematype.Micros(fullCost + 0.5), DeferredMicros: schematype.Micros(deferredCost + 0.5),
		FullTokens: full, DeferredTokens: deferred, ReadTokens: read}
}

// ReadTokens is what a deferring turn is expected to read back of
// definitions of these sizes (the deferred tools'): AutoReads of them at
// their mean size, or all of them when there are fewer.
func ReadTokens(sizes []int) int {
	if len(sizes) == 0 {
		return 0
	}
	sum := 0
	for _, n := range sizes {
		sum += n
	}
	if len(sizes) <= AutoReads {
		return sum
	}
	return sum * AutoReads / len(sizes)
}

// Estimate is what a turn of the agent is expected to pay for its
// definitions each way (LoadingEstimate.Priced when its model's price is
// known).
func (a *Agent) Estimate(full, deferred, read int) LoadingEstimate {
	if a == nil || a.Rates == nil {
		return LoadingEstimate{FullTokens: full, DeferredTokens: deferred, ReadTokens: read}
	}
	return a.Rates.Estimate(full, deferred, read)
}

// Defers reports whether the agent's turns defer definitions, given what
// a turn would pay each way: DEFERRED always, FULL never, and AUTO when
// deferring is cheaper at the model's prices or, with no price known for
// the model, once the definitions pass AutoDeferTokens. A nil agent never
// defers.
func (a *Agent) Defers(e LoadingEstimate) bool {
	switch {
	case a == nil || a.Loading == LoadFull:
		return false
	case a.Loading == LoadDeferred:
		return true
	case !e.Priced:
		return e.FullTokens > AutoDeferTokens
	}
	return e.DeferredMicros < e.FullMicros
}

// Full is FullMicros, for the API.
func (e LoadingEstimate) Full() schematype.Micros { return e.FullMicros }

// Deferred is DeferredMicros, for the API.
func (e LoadingEstimate) Deferred() schematype.Micros { return e.DeferredMicros }

// Calls is how many model calls the priced turn makes sending definitions
// whole (deferring, one more).
func (LoadingEstimate) Calls() int { return AutoCalls }
