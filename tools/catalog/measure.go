// Package catalog measures the tool catalogue and answers the discovery
// tools (search_tools, list_tools, get_tool_schema). What a turn is
// offered, and whether it is deferred, is the offer package's to say: the
// catalogue measures the deck offer.Build deals.
//
// Every character of a tool's definition is paid on every model call that
// offers it, so the catalogue has ceilings: Check fails when the widest
// catalogue a turn can get, or the part every turn pays, passes them.
package catalog

import (
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/toolgate/toolgate/ent/schematype"
	"github.com/toolgate/toolgate/offer"
	"github.com/toolgate/toolgate/offer/token"
	"github.com/toolgate/toolgate/tools"
)

// Family is the tool family of the discovery tools.
const Family = "catalog"

// NoReview is the catalogue's warning for an agent that writes artifacts
// on a server with no browser.
const NoReview = "no headless browser was found, so inspect_artifact, measure_layout and print_pdf are not offered: " +
	"html and svg artifacts stay drafts the person does not see (install Chromium, or set TOOLGATE_BROWSER)"

// The catalogue ceilings, in characters of definitions as the model receives
// them. Whoever adds a tool that passes one raises it in the same change, or
// spends fewer words.
const (
	// WidestCeiling bounds the widest catalogue any turn can get.
	WidestCeiling = 40122
	// AlwaysPaidCeiling bounds what every turn pays: always-on and
	// workspace tools.
	AlwaysPaidCeiling = 13456
)

// Ceilings are the catalogue's limits in characters.
type Ceilings struct {
	WidestChars     int
	AlwaysPaidChars int
}

// Tool is the size of one tool's definition as the model receives it.
type Tool struct {
	Name   string
	Family string
	// OfferedWhen is the tool's tools.Offering.
	OfferedWhen string
	// AlwaysOn tools are paid by every turn.
	AlwaysOn bool
	// Offered says whether the measured agent's turns get the tool; with no
	// agent, only always-on tools are offered.
	Offered bool
	// Why says why they do not (offer.Agent.Why); "" when offered.
	Why              string
	DefinitionChars  int
	DefinitionTokens int
	// Deferred: the measured agent's turns send the tool as its stub.
	Deferred bool
	// StubChars and StubTokens size the stub (tools.Definition.Stub); zero
	// for a tool a deferring turn keeps whole (offer.Keeps).
	StubChars, StubTokens int
	// Approval is the tool's approval policy for the measured agent (its
	// application's, tightened by the agent's own rules); NEVER for
	// built-in tools unless the agent says otherwise.
	Approval schematype.ApprovalPolicy
	// AsksApproval says whether its calls wait for a person's decision
	// under that policy.
	AsksApproval bool
	keeps        bool
}

// Catalogue is the measured tool catalogue. Characters are Unicode
// characters of Definition.Wire; tokens are o200k_base tokens of the same.
type Catalogue struct {
	// Tools are in registration order.
	Tools []Tool
	// Widest is every tool: the widest catalogue any turn can get.
	WidestChars, WidestTokens int
	// AlwaysPaid is what every turn pays: always-on and workspace tools.
	AlwaysPaidChars, AlwaysPaidTokens int
	// Offered is what the measured agent's turns pay.
	OfferedChars, OfferedTokens int
	// Guidance is the system prompt's guidance paragraphs, each counted
	// once per GuidanceKey, as registration collects them: the widest and
	// the always-paid share. They are not part of the ceilings.
	GuidanceChars, GuidanceTokens, AlwaysPaidGuidanceChars int
	Ceilings                                               Ceilings
	// Application is what the measured agent's allowlisted application
	// tools add to Offered: every turn of the agent pays it too.
	ApplicationChars, ApplicationTokens int
	// Deferring says the measured agent's turns defer definitions
	// (offer.Agent.Defers); Sent is what they then send of the definitions each
	// call: the kept tools whole and the others' stubs (with
	// get_tool_schema, which a deferring turn is always given). Not
	// deferring, Sent is Offered.
	Deferring             bool
	SentChars, SentTokens int
	// Loading is what a turn of the measured agent is expected to pay for
	// its definitions each way, by which AUTO chooses.
	Loading offer.LoadingEstimate
	// Warnings say what about the measured agent's turns needs a person:
	// a deck past the widest ceiling, a server that could not be measured.
	Warnings []string

	// describes holds, by tool index, the definitions whose description
	// depends on what an agent binds: For measures them for the agent.
	describes map[int]tools.Definition
	// builtins and apps are the definitions measured, the deck is dealt
	// from: the built-in ones, then the agent's application tools.
	builtins, apps []tools.Definition
}

// Measure sizes every definition as the model receives it. Offered is set
// as for no agent (always-on tools only); see For.
func Measure(defs []tools.Definition) Catalogue {
	c := Catalogue{
		builtins: defs,
		Tools:    make([]Tool, 0, len(defs)),
		Ceilings: Ceilings{WidestChars: WidestCeiling, AlwaysPaidChars: AlwaysPaidCeiling},
	}
	seen := make(map[string]bool)
	for _, d := range defs {
		wire := string(d.Wire())
		t := Tool{
			Name:             d.Name,
			Family:           d.Family,
			OfferedWhen:      string(d.Offered),
			AlwaysOn:         d.AlwaysOn(),
			DefinitionChars:  utf8.RuneCountInString(wire),
			DefinitionTokens: token.Stable(wire),
			keeps:            offer.Keeps(d),
		}
		if !t.keeps {
			stub := string(d.Stub().Wire())
			t.StubChars, t.StubTokens = utf8.RuneCountInString(stub), token.Stable(stub)
		}
		if d.Describe != nil {
			if c.describes == nil {
				c.describes = map[int]tools.Definition{}
			}
			c.describes[len(c.Tools)] = d
		}
		c.Tools = append(c.Tools, t)
		c.WidestChars += t.DefinitionChars
		c.WidestTokens += t.DefinitionTokens
		if t.AlwaysOn {
			c.AlwaysPaidChars += t.DefinitionChars
			c.AlwaysPaidTokens += t.DefinitionTokens
		}
		if key := offer.GuidanceKey(d); key != "" && !seen[key] {
			seen[key] = true
			g := strings.TrimSpace(d.Guidance)
			n := utf8.RuneCountInString(g)
			c.GuidanceChars += n
			c.GuidanceTokens += token.Stable(g)
			if t.AlwaysOn {
				c.AlwaysPaidGuidanceChars += n
			}
		}
	}
	return c.For(nil)
}

// For returns the catalogue with Offered set for the agent's turns (nil:
// no agent, always-on tools only) and the offered totals summed.
func (c Catalogue) For(a *offer.Agent) Catalogue {
	out := c
	out.Tools = make([]Tool, len(c.Tools))
	out.OfferedChars, out.OfferedTokens = 0, 0
	out.ApplicationChars, out.ApplicationTokens, out.Warnings = 0, 0, []string{}
	for i, t := range c.Tools {
		if d, ok := c.describes[i]; ok && a != nil {
			// Measured as the agent's turns receive it; the widest
			// catalogue keeps the definition with nothing bound.
			wire := string(a.Definition(d).Wire())
			t.DefinitionChars, t.DefinitionTokens = utf8.RuneCountInString(wire), token.Stable(wire)
		}
		t.Why = a.Why(t.Name, tools.Offering(t.OfferedWhen))
		t.Offered = t.Why == ""
		if t.Offered {
			out.OfferedChars += t.DefinitionChars
			out.OfferedTokens += t.DefinitionTokens
		}
		out.Tools[i] = t
	}
	if a != nil && !a.Browser && a.WritesArtifacts() {
		out.Warnings = append(out.Warnings, NoReview)
	}
	if w := out.unanswered(a); w != "" {
		out.Warnings = append(out.Warnings, w)
	}
	out.send(a)
	return out
}

// unanswered is the warning for an agent whose tools are held back
// because the embedding model does not answer: which, and why.
func (c *Catalogue) unanswered(a *offer.Agent) string {
	if a == nil || a.EmbeddingsDown == "" {
		return ""
	}
	var names []string
	for _, t := range c.Tools {
		if t.Why == a.EmbeddingsDown {
			names = append(names, t.Name)
		}
	}
	if len(names) == 0 {
		return ""
	}
	verb := "are"
	if len(names) == 1 {
		verb = "is"
	}
	return fmt.Sprintf("%s, so %s %s not offered until it answers", a.EmbeddingsDown, strings.Join(names, ", "), verb)
}

// NotOfferedReason is Why for the API: null when the tool is offered.
func (t Tool) NotOfferedReason() *string {
	if t.Why == "" {
		return nil
	}
	return &t.Why
}

// send sets Loading, Deferring, each tool's Deferred, and Sent, for the
// agent's turns, from the deck offer.Build deals them.
func (c *Catalogue) send(a *offer.Agent) {
	deck := offer.Build(a, c.builtins, c.apps)
	c.Loading = deck.Loading()
	c.Deferring = deck.Deferred
	for i := range c.Tools {
		t := &c.Tools[i]
		t.Deferred = c.Deferring && t.Offered && !t.keeps
	}
	c.SentChars, c.SentTokens = 0, deck.SentTokens
	for _, d := range deck.Sent {
		c.SentChars += utf8.RuneCountInString(string(d.Wire()))
	}
}

// WithApplications adds the agent's allowlisted application tools, as
// their servers list them, to the catalogue measured For(a): each a row
// after the built-in tools, in allowlist order, and their characters to
// Offered, which is then the agent's real deck. A server that could not be
// asked is named in Warnings, as is a deck past the widest ceiling.
func (c Catalogue) WithApplications(a *offer.Agent, apps []Application) Catalogue {
	out := c
	out.Tools = slices.Clone(c.Tools)
	out.Warnings = slices.Clone(c.Warnings)
	out.apps = slices.Clone(c.apps)
	unmeasured := map[string]bool{}
	for _, t := range appTools(a, apps) {
		if t.def == nil {
			if !unmeasured[t.application] {
				unmeasured[t.application] = true
				out.Warnings = append(out.Warnings, fmt.Sprintf("application %s: its server did not answer (%v), so its tools are not measured", t.application, t.err))
			}
			continue
		}
		wire, stub := string(t.def.Wire()), string(t.def.Stub().Wire())
		tool := Tool{
			Name:             t.name,
			Family:           t.def.Family,
			OfferedWhen:      string(tools.OfferAllowlisted),
			Offered:          true,
			DefinitionChars:  utf8.RuneCountInString(wire),
			DefinitionTokens: token.Stable(wire),
			StubChars:        utf8.RuneCountInString(stub),
			StubTokens:       token.Stable(stub),
		}
		out.Tools = append(out.Tools, tool)
		out.apps = append(out.apps, *t.def)
		out.ApplicationChars += tool.DefinitionChars
		out.ApplicationTokens += tool.DefinitionTokens
		out.OfferedChars += tool.DefinitionChars
		out.OfferedTokens += tool.DefinitionTokens
	}
	if err := out.CheckDeck(); err != nil {
		out.Warnings = append(out.Warnings, err.Error())
	}
	out.send(a)
	return out
}

// CheckDeck reports a deck (what the measured agent's turns are offered)
// past the widest ceiling: no turn may carry more than the widest
// catalogue allowed.
func (c Catalogue) CheckDeck() error {
	if c.OfferedChars > c.Ceilings.WidestChars {
		return fmt.Errorf("the agent's turns would carry %d characters of tool definitions (%d of them its application tools), over the widest ceiling of %d: allow fewer application tools",
			c.OfferedChars, c.ApplicationChars, c.Ceilings.WidestChars)
	}
	return nil
}

// LoadingCost is Loading for the API: nil when the model's price is not
// known.
func (c Catalogue) LoadingCost() *offer.LoadingEstimate {
	if !c.Loading.Priced {
		return nil
	}
	return &c.Loading
}

// Check reports a catalogue past either ceiling.
func (c Catalogue) Check() error {
	if c.WidestChars > c.Ceilings.WidestChars {
		return fmt.Errorf("widest catalogue is %d characters, over the ceiling of %d: raise WidestCeiling in the same change or spend fewer words",
			c.WidestChars, c.Ceilings.WidestChars)
	}
	if c.AlwaysPaidChars > c.Ceilings.AlwaysPaidChars {
		return fmt.Errorf("always-paid catalogue is %d characters, over the ceiling of %d: raise AlwaysPaidCeiling in the same change or spend fewer words",
			c.AlwaysPaidChars, c.Ceilings.AlwaysPaidChars)
	}
	return nil
}
