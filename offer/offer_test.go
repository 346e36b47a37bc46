package offer_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/ent"
	"github.com/toolgate/toolgate/offer"
	"github.com/toolgate/toolgate/tools"
)

func TestOffers(t *testing.T) {
	t.Parallel()
	all := &offer.Agent{Tools: []string{"opt", "mem", "budget", "past", "web"}, Memory: true, BudgetCheck: true, PastConversationSearch: true, WebResearch: true, Embeddings: true}
	listedNoSwitches := &offer.Agent{Tools: []string{"opt", "mem", "budget", "past", "web"}}
	switchesNoList := &offer.Agent{Memory: true, BudgetCheck: true, PastConversationSearch: true}
	tests := []struct {
		name      string
		giveAgent *offer.Agent
		giveTool  string
		giveWhen  tools.Offering
		want      bool
	}{
		{name: "no agent, always", giveTool: "calc", giveWhen: tools.OfferAlways, want: true},
		{name: "no agent, workspace", giveTool: "files", giveWhen: tools.OfferWorkspace, want: true},
		{name: "no agent, allowlisted", giveTool: "opt", giveWhen: tools.OfferAllowlisted, want: false},
		{name: "no tools declared", giveAgent: &offer.Agent{}, giveTool: "opt", giveWhen: tools.OfferAllowlisted, want: false},
		{name: "no tools declared, switch on", giveAgent: switchesNoList, giveTool: "mem", giveWhen: tools.OfferMemorySwitch, want: false},
		{name: "listed", giveAgent: all, giveTool: "opt", giveWhen: tools.OfferAllowlisted, want: true},
		{name: "not listed", giveAgent: all, giveTool: "other", giveWhen: tools.OfferAllowlisted, want: false},
		{name: "memory on", giveAgent: all, giveTool: "mem", giveWhen: tools.OfferMemorySwitch, want: true},
		{name: "memory off", giveAgent: listedNoSwitches, giveTool: "mem", giveWhen: tools.OfferMemorySwitch, want: false},
		{name: "memory on, no embedding model", giveAgent: &offer.Agent{Tools: []string{"mem"}, Memory: true}, giveTool: "mem", giveWhen: tools.OfferMemorySwitch, want: false},
		{name: "budget on", giveAgent: all, giveTool: "budget", giveWhen: tools.OfferBudgetSwitch, want: true},
		{name: "budget off", giveAgent: listedNoSwitches, giveTool: "budget", giveWhen: tools.OfferBudgetSwitch, want: false},
		{name: "past conversations on", giveAgent: all, giveTool: "past", giveWhen: tools.OfferPastConversationsSwitch, want: true},
		{name: "past conversations off", giveAgent: listedNoSwitches, giveTool: "past", giveWhen: tools.OfferPastConversationsSwitch, want: false},
		{name: "web provider approved", giveAgent: all, giveTool: "web", giveWhen: tools.OfferWebProvider, want: true},
		{name: "web provider not approved", giveAgent: listedNoSwitches, giveTool: "web", giveWhen: tools.OfferWebProvider, want: false},
		{name: "web provider approved, not listed", giveAgent: &offer.Agent{WebResearch: true}, giveTool: "web", giveWhen: tools.OfferWebProvider, want: false},
		{name: "unknown rule", giveAgent: all, giveTool: "opt", giveWhen: "someday", want: false},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, tt.giveAgent.Offers(tt.giveTool, tt.giveWhen), tt.name)
	}
}

// TestRulesOf: the web tools need both the server's provider and the
// organisation's switch.
func TestRulesOf(t *testing.T) {
	t.Parallel()
	a := &ent.Agent{Tools: []string{"research_web"}}
	tests := []struct {
		org      *ent.Organization
		provider bool
		want     bool
	}{
		{&ent.Organization{WebResearch: true}, true, true},
		{&ent.Organization{WebResearch: true}, false, false},
		{&ent.Organization{WebResearch: false}, true, false},
		{nil, true, false},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, offer.RulesOf(a, tt.org, offer.Server{WebProvider: tt.provider}).Offers("research_web", tools.OfferWebProvider))
	}
	// Knowledge comes from the agent's bindings, embeddings from the server.
	kb := &ent.Agent{Tools: []string{"knowledge_search"}, KnowledgeBaseIds: []int{4}}
	require.True(t, offer.RulesOf(kb, nil, offer.Server{Embeddings: true}).Offers("knowledge_search", tools.OfferKnowledge))
	require.False(t, offer.RulesOf(kb, nil, offer.Server{}).Offers("knowledge_search", tools.OfferKnowledge))
	kb.KnowledgeBaseIds = nil
	require.False(t, offer.RulesOf(kb, nil, offer.Server{Embeddings: true}).Offers("knowledge_search", tools.OfferKnowledge))
}

// TestOffersDocumentTools: the Documents family's three rules, each with
// the allowlist as every optional tool has it.
func TestOffersDocumentTools(t *testing.T) {
	t.Parallel()
	listed := []string{"knowledge_search", "read_document", "search_attachments"}
	tests := []struct {
		name string
		give offer.Agent
		want []bool // knowledge_search, read_document, search_attachments
	}{
		{"nothing bound or attached", offer.Agent{Tools: listed, Embeddings: true}, []bool{false, false, false}},
		{"knowledge and embeddings", offer.Agent{Tools: listed, Knowledge: true, Embeddings: true}, []bool{true, true, false}},
		{"knowledge, no embedding model", offer.Agent{Tools: listed, Knowledge: true}, []bool{false, true, false}},
		{"a document attached", offer.Agent{Tools: listed, Attachments: true, DocumentAttachments: true, Embeddings: true}, []bool{false, true, true}},
		{"a document attached, no embedding model", offer.Agent{Tools: listed, Attachments: true, DocumentAttachments: true}, []bool{false, true, false}},
		{"only an unreadable attachment", offer.Agent{Tools: listed, Attachments: true, Embeddings: true}, []bool{false, false, true}},
		{"everything, not listed", offer.Agent{Knowledge: true, Attachments: true, DocumentAttachments: true, Embeddings: true}, []bool{false, false, false}},
	}
	whens := []tools.Offering{tools.OfferKnowledge, tools.OfferKnowledgeOrDocument, tools.OfferAttachment}
	for _, tt := range tests {
		got := make([]bool, len(listed))
		for i, name := range listed {
			got[i] = tt.give.Offers(name, whens[i])
		}
		require.Equal(t, tt.want, got, tt.name)
	}
}

// TestWhy: a tool not offered says why, in the words the catalogue shows:
// the embedding model that does not answer among them, for every tool
// that needs it; an offered tool says nothing.
func TestWhy(t *testing.T) {
	t.Parallel()
	down := "the embedding model bge-small does not answer (503 Service Unavailable)"
	needs := &offer.Agent{Tools: []string{"mem", "kb", "att"}, Memory: true, Knowledge: true, Attachments: true, Embeddings: true, EmbeddingsDown: down}
	tests := []struct {
		name      string
		giveAgent *offer.Agent
		giveTool  string
		giveWhen  tools.Offering
		want      string
	}{
		{name: "always", giveTool: "calc", giveWhen: tools.OfferAlways, want: ""},
		{name: "no agent", giveTool: "opt", giveWhen: tools.OfferAllowlisted, want: "depends on the agent: ask with agentId"},
		{name: "not listed", giveAgent: &offer.Agent{}, giveTool: "opt", giveWhen: tools.OfferAllowlisted, want: "not in the agent's tools"},
		{name: "memory off", giveAgent: &offer.Agent{Tools: []string{"mem"}, Embeddings: true}, giveTool: "mem", giveWhen: tools.OfferMemorySwitch, want: "the agent's memory switch is off"},
		{name: "no embedding model", giveAgent: &offer.Agent{Tools: []string{"mem"}, Memory: true}, giveTool: "mem", giveWhen: tools.OfferMemorySwitch, want: "the server has no embedding model (TOOLGATE_EMBEDDING_PROVIDER=none)"},
		{name: "memory, model down", giveAgent: needs, giveTool: "mem", giveWhen: tools.OfferMemorySwitch, want: down},
		{name: "knowledge, model down", giveAgent: needs, giveTool: "kb", giveWhen: tools.OfferKnowledge, want: down},
		{name: "attachments, model down", giveAgent: needs, giveTool: "att", giveWhen: tools.OfferAttachment, want: down},
		{name: "memory, model answers", giveAgent: &offer.Agent{Tools: []string{"mem"}, Memory: true, Embeddings: true}, giveTool: "mem", giveWhen: tools.OfferMemorySwitch, want: ""},
		{name: "budget off", giveAgent: &offer.Agent{Tools: []string{"b"}}, giveTool: "b", giveWhen: tools.OfferBudgetSwitch, want: "the agent's budgetCheck switch is off"},
		{name: "no skill", giveAgent: &offer.Agent{}, giveTool: "load_skill", giveWhen: tools.OfferSkillBound, want: "the agent binds no published skill"},
		{name: "no browser", giveAgent: &offer.Agent{Tools: []string{"create_artifact"}}, giveTool: "inspect_artifact", giveWhen: tools.OfferArtifactReview, want: "no headless browser was found"},
		{name: "unknown rule", giveAgent: &offer.Agent{Tools: []string{"opt"}}, giveTool: "opt", giveWhen: "someday", want: "its offering rule is unknown to this server"},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, tt.giveAgent.Why(tt.giveTool, tt.giveWhen), tt.name)
		require.Equal(t, tt.want == "", tt.giveAgent.Offers(tt.giveTool, tt.giveWhen), tt.name)
	}
}
