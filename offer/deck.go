package offer

import (
	"slices"
	"strings"

	"github.com/toolgate/toolgate/offer/token"
	"github.com/toolgate/toolgate/tools"
)

// Register returns the tools offered on a turn of an agent with the
// offering rules a (RulesOf), in registration order: the built-in tools
// whose offering rule holds (or, for the turn an index answers, that the
// turn names), as the agent's turns receive them, then the agent's
// allowlisted application tools (apps, already named
// <application>__<tool>) in allowlist order. An agent that declares no
// tools is offered only the always-on and workspace tools.
func Register(a *Agent, builtins, apps []tools.Definition) []tools.Definition {
	var out []tools.Definition
	for _, d := range builtins {
		if a.offers(d) {
			out = append(out, a.Definition(d))
		}
	}
	if a == nil {
		return out
	}
	for _, name := range a.Tools {
		i := slices.IndexFunc(apps, func(d tools.Definition) bool { return d.Name == name })
		if i >= 0 && !slices.ContainsFunc(out, func(d tools.Definition) bool { return d.Name == name }) {
			out = append(out, apps[i])
		}
	}
	return out
}

// Deck is a turn's tools, fixed before its loop starts.
type Deck struct {
	// Offered are the tools offered, whole, in registration order: what
	// calls are checked against.
	Offered []tools.Definition
	// Sent are the same tools as the model receives them: Offered, or,
	// when Deferred, the tools Keeps whole and the others as their stubs
	// (tools.Definition.Stub).
	Sent     []tools.Definition
	Deferred bool
	// SentTokens are Sent's definitions in o200k tokens
	// (token.Definitions).
	SentTokens int

	agent          *Agent
	builtins, apps []tools.Definition
}

// Build deals the deck of a turn of an agent with the offering rules a:
// the tools Register offers, and whether they are deferred (Agent.Defers,
// by what a turn would pay for them each way). A deferring turn is also
// offered get_tool_schema, the one way to read what it defers. Each
// definition is sized once.
func Build(a *Agent, builtins, apps []tools.Definition) Deck {
	whole := wholeDeck(a, builtins, apps)
	if a == nil || a.Loading == LoadFull {
		return whole
	}
	if a.Loading != LoadDeferred {
		// Whole wins, with no stub built, when even a deferred deck of no
		// tokens that reads nothing back would cost more (the extra call
		// alone), or, with no price, below the threshold.
		if e := a.Estimate(whole.SentTokens, 0, 0); !a.Defers(e) {
			return whole
		}
	}
	deferred, read := whole.deferred()
	if !a.Defers(a.Estimate(whole.SentTokens, deferred.SentTokens, read)) {
		return whole
	}
	return deferred
}

// Loading is what a turn of the deck's agent is expected to pay for its
// definitions each way, by which AUTO chooses: the catalogue's figure,
// priced whatever the agent's loading.
func (d Deck) Loading() LoadingEstimate {
	whole := wholeDeck(d.agent, d.builtins, d.apps)
	deferred, read := whole.deferred()
	return d.agent.Estimate(whole.SentTokens, deferred.SentTokens, read)
}

func wholeDeck(a *Agent, builtins, apps []tools.Definition) Deck {
	offered := Register(a, builtins, apps)
	return Deck{Offered: offered, Sent: offered, SentTokens: token.Definitions(offered), agent: a, builtins: builtins, apps: apps}
}

// deferred is the whole deck d deferred: get_tool_schema added when the
// agent does not list it, the tools Keeps whole and the others as stubs;
// read is what a turn is expected to read back of the stubbed tools
// (ReadTokens).
func (d Deck) deferred() (Deck, int) {
	offered := d.Offered
	if !slices.ContainsFunc(offered, func(t tools.Definition) bool { return t.Name == tools.SchemaTool }) {
		with := Agent{Tools: []string{tools.SchemaTool}}
		if d.agent != nil {
			with = *d.agent
			with.Tools = append(slices.Clone(d.agent.Tools), tools.SchemaTool)
		}
		offered = Register(&with, d.builtins, d.apps)
	}
	sent := make([]tools.Definition, len(offered))
	var sizes []int
	for i, t := range offered {
		if Keeps(t) {
			sent[i] = t
		} else {
			sent[i] = t.Stub()
			sizes = append(sizes, token.Definitions(offered[i:i+1]))
		}
	}
	out := d
	out.Offered, out.Sent, out.Deferred, out.SentTokens = offered, sent, true, token.Definitions(sent)
	return out, ReadTokens(sizes)
}

// GuidanceKey is what a deck's guidance paragraphs are told apart by, so a
// paragraph several tools share is said once: the shared key, or the
// tool's name for a tool that names none; "" for a tool with no guidance.
func GuidanceKey(d tools.Definition) string {
	switch {
	case strings.TrimSpace(d.Guidance) == "":
		return ""
	case d.GuidanceKey != "":
		return d.GuidanceKey
	default:
		return d.Name
	}
}
