// Package offer holds the rules that decide what a turn is offered: which
// tools, as which definitions, and whether they are sent whole or deferred
// behind get_tool_schema (by what a turn would pay each way). Build is the
// one place a deck is dealt: the prompt sends it, the catalogue measures
// it, the discovery tools search it.
//
// It sits between the tool families and their callers: the runtime, the API
// and the catalog family all import it, and it imports neither the runtime
// nor the API.
package offer

import (
	"context"
	"slices"

	"github.com/toolgate/toolgate/ent"
	"github.com/toolgate/toolgate/tools"
	"github.com/toolgate/toolgate/tools/artifact"
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
	// Knowledge: the agent binds at least one knowledge base.
	Knowledge bool
	// Embeddings: the server has an embedding model (the search tools need
	// one).
	Embeddings bool
	// EmbeddingsDown says why that model does not answer now (embed.Down):
	// the tools that need it are not offered until it does.
	EmbeddingsDown string
	// Attachments: the turn's conversation holds an attachment;
	// DocumentAttachments: one whose text can be read (not FAILED). Only a
	// turn knows them; the catalogue of an agent leaves them off.
	Attachments, DocumentAttachments bool
	// Browser: the server found a headless browser, so the artifact review
	// tools travel with the writers.
	Browser bool
	// Bound is what the agent binds that descriptions name: its published
	// skills. AgentOf leaves it empty; LoadRules reads it.
	Bound tools.Bound
	// Turn, when set, is the list of tools of the turn an index answers:
	// Register takes the built-in tools it names in place of the offering
	// rules.
	Turn func(name string) bool
	// Loading is how the agent's turns send definitions: LoadAuto (the
	// zero value), LoadFull or LoadDeferred.
	Loading string
	// Rates are the prices of the model the agent's turns call, by which
	// LoadAuto chooses; nil when it has none.
	Rates *Rates
}

// How an agent's turns send tool definitions (Agent.tool_loading).
const (
	// LoadAuto defers when a turn would pay less for its definitions
	// deferred, at the model's prices (Agent.Defers).
	LoadAuto = "AUTO"
	// LoadFull sends every offered definition whole, on every call.
	LoadFull = "FULL"
	// LoadDeferred sends the always-on tools and get_tool_schema whole and
	// every other tool as its stub (tools.Definition.Stub): the model reads
	// a definition with get_tool_schema before it first calls the tool.
	LoadDeferred = "DEFERRED"
)

// AutoDeferTokens is where LoadAuto starts deferring for a model whose
// price is not known: offered definitions past it, in o200k tokens.
const AutoDeferTokens = 6000

// Keeps reports whether a deferring turn still sends d whole: the always-on
// tools, which widen nothing and serve every turn, and get_tool_schema,
// which reads the others.
func Keeps(d tools.Definition) bool {
	return d.Offered == tools.OfferAlways || d.Name == tools.SchemaTool
}

// Server is what the server offers beside an agent's own rules.
type Server struct {
	// WebProvider: a web provider is configured.
	WebProvider bool
	// Embeddings: an embedding model is configured.
	Embeddings bool
	// EmbeddingsDown: why it does not answer now, "" while it does.
	EmbeddingsDown string
	// Browser: a headless browser was found (the artifact review tools).
	Browser bool
	// Rates are the prices of the model turns call; nil when it has none.
	Rates *Rates
}

// AgentOf reads the offering rules of an agent row.
func AgentOf(a *ent.Agent) *Agent {
	return &Agent{
		Tools:                  a.Tools,
		Memory:                 a.Memory,
		BudgetCheck:            a.BudgetCheck,
		PastConversationSearch: a.PastConversationSearch,
		Knowledge:              len(a.KnowledgeBaseIds) > 0,
		Loading:                string(a.ToolLoading),
	}
}

// RulesOf reads the offering rules of an agent of org on server s.
func RulesOf(a *ent.Agent, org *ent.Organization, s Server) *Agent {
	r := AgentOf(a)
	r.WebResearch = s.WebProvider && org != nil && org.WebResearch
	r.Embeddings, r.EmbeddingsDown = s.Embeddings, s.EmbeddingsDown
	r.Browser = s.Browser
	r.Rates = s.Rates
	return r
}

// LoadRules is RulesOf with what the agent binds read through c (the
// skills it may load): what a turn of the agent is offered, and how its
// definitions read.
func LoadRules(ctx context.Context, c *ent.Client, a *ent.Agent, org *ent.Organization, s Server) (*Agent, error) {
	r := RulesOf(a, org, s)
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

// WritesArtifacts reports whether the agent lists an artifact writer.
func (a *Agent) WritesArtifacts() bool { return slices.ContainsFunc(a.Tools, artifact.Writes) }

// offers is Offers, or, for the turn an index answers (Turn set), whether
// the turn names the tool.
func (a *Agent) offers(d tools.Definition) bool {
	if a != nil && a.Turn != nil {
		return a.Turn(d.Name)
	}
	return a.Offers(d.Name, d.Offered)
}

// Offers reports whether the agent's turns are offered the tool named name,
// offered when when: Why says nothing.
func (a *Agent) Offers(name string, when tools.Offering) bool {
	return a.Why(name, when) == ""
}

// The reasons Why gives, each said once.
const (
	whyNoAgent        = "depends on the agent: ask with agentId"
	whyNotListed      = "not in the agent's tools"
	whyNoSkill        = "the agent binds no published skill"
	whyNoBrowser      = "no headless browser was found"
	whyNoWriter       = "the agent lists no artifact writer"
	whyMemoryOff      = "the agent's memory switch is off"
	whyBudgetOff      = "the agent's budgetCheck switch is off"
	whyPastOff        = "the agent's pastConversationSearch switch is off"
	whyNoWeb          = "no approved web provider: none is configured on the server, or the organisation has not enabled web research"
	whyNoKnowledge    = "the agent binds no knowledge base"
	whyNoReadable     = "the agent binds no knowledge base, and the conversation holds no readable attachment"
	whyNoAttachment   = "offered on turns whose conversation holds an attachment"
	whyNoEmbeddings   = "the server has no embedding model (TOOLGATE_EMBEDDING_PROVIDER=none)"
	whyUnknownOffered = "its offering rule is unknown to this server"
)

// Why says why the agent's turns are not offered the tool named name,
// offered when when; "" when they are. Always-on and workspace tools are
// on every turn; any other tool must be on the allowlist, and a switched
// tool also needs its switch; a tool that needs the embedding model needs
// it set and answering. A nil agent is offered the always-on tools only.
func (a *Agent) Why(name string, when tools.Offering) string {
	switch when {
	case tools.OfferAlways, tools.OfferWorkspace:
		return ""
	}
	if a == nil {
		return whyNoAgent
	}
	switch when {
	case tools.OfferSkillBound:
		return unless(len(a.Bound.Skills) > 0, whyNoSkill)
	case tools.OfferArtifactReview:
		if !a.WritesArtifacts() {
			return whyNoWriter
		}
		return unless(a.Browser, whyNoBrowser)
	}
	if !slices.Contains(a.Tools, name) {
		return whyNotListed
	}
	switch when {
	case tools.OfferAllowlisted:
		return ""
	case tools.OfferMemorySwitch:
		if !a.Memory {
			return whyMemoryOff
		}
		return a.embeddings()
	case tools.OfferBudgetSwitch:
		return unless(a.BudgetCheck, whyBudgetOff)
	case tools.OfferPastConversationsSwitch:
		return unless(a.PastConversationSearch, whyPastOff)
	case tools.OfferWebProvider:
		return unless(a.WebResearch, whyNoWeb)
	case tools.OfferKnowledge:
		if !a.Knowledge {
			return whyNoKnowledge
		}
		return a.embeddings()
	case tools.OfferKnowledgeOrDocument:
		return unless(a.Knowledge || a.DocumentAttachments, whyNoReadable)
	case tools.OfferAttachment:
		if !a.Attachments {
			return whyNoAttachment
		}
		return a.embeddings()
	}
	// An offering this package does not know is not offered: a new rule
	// must be taught here before it widens any turn.
	return whyUnknownOffered
}

// embeddings says why the tools that need the embedding model cannot run:
// none is configured, or it does not answer.
func (a *Agent) embeddings() string {
	switch {
	case !a.Embeddings:
		return whyNoEmbeddings
	case a.EmbeddingsDown != "":
		return a.EmbeddingsDown
	}
	return ""
}

func unless(ok bool, why string) string {
	if ok {
		return ""
	}
	return why
}
