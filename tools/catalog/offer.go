package catalog

import (
	"context"
	"slices"

	"github.com/toolgate/toolgate/ent"
	"github.com/toolgate/toolgate/tools"
	"github.com/toolgate/toolgate/tools/skill"
)

// Agent is what decides which optional tools an agent's turns are offered.
type Agent struct {
	// Tools is the allowlist; an agent that lists none gets no optional tool.
	Tools                  []string
	Memory                 bool
	BudgetCheck            bool
	PastConversationSearch bool
	// WebResearch: the organisation has an approved web provider enabled
	// (and the server one configured). AgentOf leaves it off; whoever knows
	// the organisation and the server sets it.
	WebResearch bool
	// Bound is what the agent binds that descriptions name: its published
	// skills. AgentOf leaves it empty; LoadRules reads it.
	Bound tools.Bound
}

// AgentOf reads the offering rules of an agent row.
func AgentOf(a *ent.Agent) *Agent {
	return &Agent{
		Tools:                  a.Tools,
		Memory:                 a.Memory,
		BudgetCheck:            a.BudgetCheck,
		PastConversationSearch: a.PastConversationSearch,
	}
}

// RulesOf reads the offering rules of an agent of org; webProvider says
// whether the server has a web provider configured.
func RulesOf(a *ent.Agent, org *ent.Organization, webProvider bool) *Agent {
	r := AgentOf(a)
	r.WebResearch = webProvider && org != nil && org.WebResearch
	return r
}

// LoadRules is RulesOf with what the agent binds read through c (the
// skills it may load): what a turn of the agent is offered, and how its
// definitions read.
func LoadRules(ctx context.Context, c *ent.Client, a *ent.Agent, org *ent.Organization, webProvider bool) (*Agent, error) {
	r := RulesOf(a, org, webProvider)
	var err error
	r.Bound.Skills, err = skill.Briefs(ctx, c, a.OrganizationID, a.Skills)
	return r, err
}

// Definition returns d as the agent's turns receive it.
func (a *Agent) Definition(d tools.Definition) tools.Definition {
	if a == nil {
		return d
	}
	return d.For(a.Bound)
}

// Offers reports whether the agent's turns are offered the tool named name,
// offered when when. Always-on and workspace tools are on every turn; any
// other tool must be on the allowlist, and a switched tool also needs its
// switch. A nil agent is offered the always-on tools only.
func (a *Agent) Offers(name string, when tools.Offering) bool {
	switch when {
	case tools.OfferAlways, tools.OfferWorkspace:
		return true
	case tools.OfferSkillBound:
		return a != nil && len(a.Bound.Skills) > 0
	}
	if a == nil || !slices.Contains(a.Tools, name) {
		return false
	}
	switch when {
	case tools.OfferAllowlisted:
		return true
	case tools.OfferMemorySwitch:
		return a.Memory
	case tools.OfferBudgetSwitch:
		return a.BudgetCheck
	case tools.OfferPastConversationsSwitch:
		return a.PastConversationSearch
	case tools.OfferWebProvider:
		return a.WebResearch
	}
	// An offering this package does not know is not offered: a new rule
	// must be taught here before it widens any turn.
	return false
}
