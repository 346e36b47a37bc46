package prompt_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/ent"
	"github.com/toolgate/toolgate/ent/toolcall"
	"github.com/toolgate/toolgate/runtime/model"
	"github.com/toolgate/toolgate/runtime/prompt"
	"github.com/toolgate/toolgate/tools"
	"github.com/toolgate/toolgate/tools/catalog"
)

func def(name string, o tools.Offering, guidanceKey, guidance string) tools.Definition {
	return tools.Definition{Name: name, Offered: o, GuidanceKey: guidanceKey, Guidance: guidance, Schema: json.RawMessage(`{"type":"object"}`)}
}

var builtins = []tools.Definition{
	def("clarify", tools.OfferAlways, "", ""),
	def("read_file", tools.OfferWorkspace, "files", "Files live in the conversation's workspace."),
	def("search_web", tools.OfferAllowlisted, "search", "A search that ran and found nothing is not a failure."),
	def("search_docs", tools.OfferAllowlisted, "search", "A search that ran and found nothing is not a failure."),
	def("remember", tools.OfferMemorySwitch, "", "Remember only what the user asks you to."),
	def("check_budget", tools.OfferBudgetSwitch, "", ""),
	def("search_conversations", tools.OfferPastConversationsSwitch, "search", "A search that ran and found nothing is not a failure."),
}

func names(defs []tools.Definition) []string {
	out := make([]string, len(defs))
	for i, d := range defs {
		out[i] = d.Name
	}
	return out
}

func TestRegister(t *testing.T) {
	t.Parallel()
	apps := []tools.Definition{def("crm__lookup", tools.OfferAllowlisted, "", ""), def("crm__purge", tools.OfferAllowlisted, "", "")}
	tests := []struct {
		name string
		give *ent.Agent
		want []string
	}{
		{name: "no tools declared: always-on and workspace only", give: &ent.Agent{}, want: []string{"clarify", "read_file"}},
		{name: "allowlist in registration order", give: &ent.Agent{Tools: []string{"search_docs", "search_web", "unknown"}},
			want: []string{"clarify", "read_file", "search_web", "search_docs"}},
		{name: "each switch its own tool", give: &ent.Agent{Memory: true, PastConversationSearch: true,
			Tools: []string{"remember", "search_conversations", "check_budget"}},
			want: []string{"clarify", "read_file", "remember", "search_conversations"}},
		{name: "a switch alone offers nothing", give: &ent.Agent{BudgetCheck: true, Memory: true}, want: []string{"clarify", "read_file"}},
		{name: "budget switch", give: &ent.Agent{BudgetCheck: true, Tools: []string{"check_budget"}}, want: []string{"clarify", "read_file", "check_budget"}},
		{name: "application tools the agent lists, in its order", give: &ent.Agent{Tools: []string{"crm__purge", "crm__lookup", "crm__missing"}},
			want: []string{"clarify", "read_file", "crm__purge", "crm__lookup"}},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, names(prompt.Register(catalog.AgentOf(tt.give), builtins, apps)), tt.name)
	}
}

func TestSystemCollectsGuidanceOnce(t *testing.T) {
	t.Parallel()
	a := &ent.Agent{Instructions: "  Be brief.  ", Tools: []string{"search_web", "search_docs", "search_conversations", "remember"}, PastConversationSearch: true, Memory: true}
	got := prompt.System(a, prompt.Register(catalog.AgentOf(a), builtins, nil))
	want := "Be brief.\n\n" +
		"Files live in the conversation's workspace.\n\n" +
		"A search that ran and found nothing is not a failure.\n\n" +
		"Remember only what the user asks you to.\n\n" +
		prompt.MaterialNotice
	require.Equal(t, want, got)
	// Same agent, same bytes.
	require.Equal(t, got, prompt.System(a, prompt.Register(catalog.AgentOf(a), builtins, nil)))
}

func TestOpening(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 3, 29, 0, 59, 59, 0, time.UTC)
	p := prompt.Person{Name: "Ada", Department: "Research", Organization: "Acme"}
	tests := []struct {
		zone string
		want string
	}{
		{zone: "Europe/Paris", want: "You are talking with Ada (Research, Acme). It is Sunday 29 March 2026, 01:59 (Europe/Paris)."},
		{zone: "Asia/Kolkata", want: "You are talking with Ada (Research, Acme). It is Sunday 29 March 2026, 06:29 (Asia/Kolkata)."},
		{zone: "", want: "You are talking with Ada (Research, Acme). It is Sunday 29 March 2026, 00:59 (UTC)."},
		{zone: "Not/AZone", want: "You are talking with Ada (Research, Acme). It is Sunday 29 March 2026, 00:59 (UTC)."},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, prompt.Opening(p, at, tt.zone), tt.zone)
	}
	require.Equal(t, "You are talking with Bo. It is Sunday 29 March 2026, 00:59 (UTC).", prompt.Opening(prompt.Person{Name: "Bo"}, at, "UTC"))
}

func ptr(s string) *string { return &s }

func TestHistoryReplayLines(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", 3000)
	mk := func(n int) prompt.Past {
		ref := "r_" + string(rune('a'+n))
		small := "r_s" + string(rune('a'+n))
		return prompt.Past{
			Turn: &ent.Turn{Number: n, UserText: "q", Answer: ptr("a"), Status: "COMPLETED", StartedAt: time.Unix(0, 0)},
			Steps: []prompt.Step{{Text: "", Calls: []*ent.ToolCall{
				{ID: n*10 + 1, Name: "read_file", Arguments: `{}`, Outcome: toolcall.OutcomeHITS, Ref: &ref, Heard: &long},
				{ID: n*10 + 2, Name: "calculator", Arguments: `{}`, Outcome: toolcall.OutcomeHITS, Ref: &small, Heard: ptr("2")},
			}}},
			Sizes: map[string]int64{ref: 52_345, small: 1},
		}
	}
	past := []prompt.Past{mk(1), mk(2), mk(3)}
	msgs := prompt.History(prompt.Person{Name: "Ada"}, past)
	tool := func(turn, call int) string {
		var seen int
		for _, m := range msgs {
			if m.Role == model.RoleTool {
				if seen == turn*2+call {
					return m.Text
				}
				seen++
			}
		}
		return ""
	}
	// Outside the window: the outcome and the line, no excerpt.
	require.Equal(t, "[HITS] [~51000 of ~52000 chars cut; read_tool_result ref r_b for the rest]", tool(0, 0))
	require.Equal(t, "[HITS]", tool(0, 1), "small and outside the window: the outcome alone")
	// Inside the window: an excerpt and the line.
	require.Equal(t, "[HITS] "+long[:prompt.ExcerptChars]+"\n[~51000 of ~52000 chars cut; read_tool_result ref r_c for the rest]", tool(1, 0))
	// A result that crossed whole carries no line.
	require.Equal(t, "[HITS] 2", tool(2, 1))
	// The line of a call does not change when its turn leaves the window.
	inWindow := prompt.Replay(past[1].Steps[0].Calls[0], true, past[1].Sizes)
	outside := prompt.Replay(past[1].Steps[0].Calls[0], false, past[1].Sizes)
	require.Equal(t, inWindow[strings.LastIndex(inWindow, "\n")+1:], strings.TrimPrefix(outside, "[HITS] "))
	// Rendering is a pure function of what is stored: the same on the next
	// call, so the provider's cache holds.
	again := prompt.History(prompt.Person{Name: "Ada"}, past)
	require.Equal(t, msgs, again)
}
