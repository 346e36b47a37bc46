package loop_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/db"
	"github.com/toolgate/toolgate/ent/schematype"
	"github.com/toolgate/toolgate/ent/turn"
	"github.com/toolgate/toolgate/graph/gid"
	"github.com/toolgate/toolgate/runtime/loop"
	"github.com/toolgate/toolgate/runtime/model"
	"github.com/toolgate/toolgate/tools/budget"
)

// withBudgets enforces the monthly limits as the server does.
func withBudgets() option {
	return func(c *loop.Config) {
		client := c.Client
		c.Budget = budget.Stopper(client)
	}
}

// agent creates an agent with optional tools and switches (memory,
// budgetCheck, pastConversationSearch, skills…) and starts a conversation.
func (h *harness) agent(t testing.TB, input map[string]any) string {
	t.Helper()
	in := map[string]any{"name": "Switched", "instructions": "Be exact.", "tools": []string{}}
	for k, v := range input {
		in[k] = v
	}
	a := h.gql(t, `mutation($in: CreateAgentInput!) { createAgent(input: $in) { id } }`, map[string]any{"in": in})
	c := h.gql(t, `mutation($a: ID!) { startConversation(input: {agentId: $a, title: "t"}) { id } }`,
		map[string]any{"a": a["createAgent"].(map[string]any)["id"]})
	return c["startConversation"].(map[string]any)["id"].(string)
}

// offered returns the names of the tools the turn's first model call was offered.
func offered(req model.Request) []string {
	var out []string
	for _, s := range req.Tools {
		out = append(out, s.Name)
	}
	return out
}

// TestBudgetCheckBehindItsSwitch: listed but switched off, budget_check is
// not offered and a call is refused naming the tool only; switched on, it
// tells the model what was spent and what is left.
func TestBudgetCheckBehindItsSwitch(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, d *db.DB) {
		p := &scripted{answers: []model.Response{
			{ToolCalls: []model.ToolCall{call("b", "budget_check", `{}`)}, Usage: model.Usage{InputUncached: 500_000}},
			{Text: "Checked."},
		}}
		h := newHarness(t, d, p, withBudgets())
		h.gql(t, `mutation { setBudget(input: {monthlyLimit: 5}) { id } }`, nil)

		off := h.agent(t, map[string]any{"tools": []string{"budget_check"}})
		id := h.send(t, off, "What's left?", "")
		require.Equal(t, turn.StatusCOMPLETED, h.wait(t, id).Status)
		require.NotContains(t, offered(p.request(0)), "budget_check")
		calls := h.calls(t, id)
		require.Equal(t, schematype.OutcomeRefused, calls[0].Outcome)
		require.Equal(t, `tool "budget_check" is not available`, *calls[0].Message)

		p.mu.Lock()
		p.answers = []model.Response{{ToolCalls: []model.ToolCall{call("b", "budget_check", `{}`)}}, {Text: "Checked."}}
		p.mu.Unlock()
		on := h.agent(t, map[string]any{"tools": []string{"budget_check"}, "budgetCheck": true})
		id = h.send(t, on, "What's left?", "")
		require.Equal(t, turn.StatusCOMPLETED, h.wait(t, id).Status)
		require.Contains(t, offered(p.request(2)), "budget_check")
		calls = h.calls(t, id)
		require.Equal(t, schematype.OutcomeHits, calls[0].Outcome, *calls[0].Heard)
		// The first turn's model call spent $1 (500k input tokens of gpt-4.1).
		require.JSONEq(t, `{"month":"2026-11","user":{"monthlyLimit":null,"spent":1,"left":null},`+
			`"organization":{"monthlyLimit":5,"spent":1,"left":4}}`, *calls[0].Heard)
	})
}

// TestBudgetStopsTurns: a step that crosses the organisation's limit
// finishes (its tool calls run and are recorded) and the turn stops FAILED
// with the reason; the next sendMessage is refused with BUDGET_EXCEEDED
// naming the limit, and a user's own limit is named as theirs.
func TestBudgetStopsTurns(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, d *db.DB) {
		p := &scripted{answers: []model.Response{
			// $2 for this step: over the $1.50 limit once it is recorded.
			{ToolCalls: []model.ToolCall{call("c", "calculator", `{"expression": "6*7"}`)}, Usage: model.Usage{InputUncached: 1_000_000}},
			{Text: "never asked"},
		}}
		h := newHarness(t, d, p, withBudgets())
		h.gql(t, `mutation { setBudget(input: {monthlyLimit: 1.5}) { monthlyLimit } }`, nil)
		conv := h.conversation(t)
		id := h.send(t, conv, "Work it out", "")
		got := h.wait(t, id)
		require.Equal(t, turn.StatusFAILED, got.Status)
		require.Equal(t, "budget exceeded: the organisation's monthly limit of $1.50 is spent ($2.00 in 2026-11, UTC)", *got.Error)
		require.Equal(t, 1, p.count(), "no model call after the step that crossed the limit")
		calls := h.calls(t, id)
		require.Len(t, calls, 1)
		require.Equal(t, schematype.OutcomeHits, calls[0].Outcome, "the step's calls finished")

		_, errs := h.try(t, `mutation($c: ID!) { sendMessage(input: {conversationId: $c, text: "again"}) { id } }`, map[string]any{"c": conv})
		require.Len(t, errs, 1)
		e := errs[0].(map[string]any)
		require.Equal(t, "BUDGET_EXCEEDED", e["extensions"].(map[string]any)["code"])
		require.Equal(t, "budget exceeded: the organisation's monthly limit of $1.50 is spent ($2.00 in 2026-11, UTC)", e["message"])

		// Raised for the organisation; the user's own limit still holds.
		h.gql(t, `mutation { setBudget(input: {monthlyLimit: 100}) { monthlyLimit } }`, nil)
		h.gql(t, `mutation($u: ID!) { setBudget(input: {userId: $u, monthlyLimit: 2}) { monthlyLimit user { name } } }`,
			map[string]any{"u": gid.Encode(h.grant.UserID)})
		_, errs = h.try(t, `mutation($c: ID!) { sendMessage(input: {conversationId: $c, text: "again"}) { id } }`, map[string]any{"c": conv})
		require.Len(t, errs, 1)
		require.Equal(t, "budget exceeded: your monthly limit of $2.00 is spent ($2.00 in 2026-11, UTC)", errs[0].(map[string]any)["message"])

		// A new UTC month starts from nothing.
		h.now = time.Date(2026, 12, 1, 0, 0, 1, 0, time.UTC)
		p.mu.Lock()
		p.answers = []model.Response{{Text: "Fresh month."}}
		p.mu.Unlock()
		require.Equal(t, turn.StatusCOMPLETED, h.wait(t, h.send(t, conv, "again", "America/New_York")).Status)
	})
}

// TestSkillLoadedWhole: load_skill is offered once an agent binds a
// published skill (not before, and without being listed); its description
// names the skill; the instructions reach the model whole, past the preview
// size, and count as no evidence; an unknown name is answered with the
// skills the agent binds.
func TestSkillLoadedWhole(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, d *db.DB) {
		p := &scripted{answers: []model.Response{{Text: "No skills."}}}
		h := newHarness(t, d, p)
		plain := h.agent(t, nil)
		require.Equal(t, turn.StatusCOMPLETED, h.wait(t, h.send(t, plain, "Hi", "")).Status)
		require.NotContains(t, offered(p.request(0)), "load_skill", "no skill bound: not offered")

		instructions := "Write the release note in three parts.\n" + strings.Repeat("Step: check each figure twice. ", 400) + "END-OF-SKILL"
		require.Greater(t, len(instructions), 6000)
		h.gql(t, `mutation($i: String!) { publishSkill(input: {name: "release-notes", description: "How to write a release note.", instructions: $i}) { id } }`,
			map[string]any{"i": instructions})
		p.mu.Lock()
		p.answers = []model.Response{
			{ToolCalls: []model.ToolCall{call("s1", "load_skill", `{"name":"release-notes"}`), call("s2", "load_skill", `{"name":"tax-returns"}`)}},
			{Text: "Done."},
		}
		p.mu.Unlock()
		bound := h.agent(t, map[string]any{"skills": []string{"release-notes"}})
		id := h.send(t, bound, "Write the release note", "")
		require.Equal(t, turn.StatusCOMPLETED, h.wait(t, id).Status)
		req := p.request(1)
		require.Contains(t, offered(req), "load_skill")
		for _, s := range req.Tools {
			if s.Name == "load_skill" {
				require.Contains(t, s.Description, "- release-notes: How to write a release note.")
			}
		}
		calls := h.calls(t, id)
		require.Equal(t, schematype.OutcomeHits, calls[0].Outcome, *calls[0].Heard)
		require.Contains(t, *calls[0].Heard, "END-OF-SKILL", "instructions are never previewed")
		require.NotContains(t, *calls[0].Heard, "_toolResultContext")
		require.Empty(t, calls[0].Evidence, "instructions are no evidence")
		require.Equal(t, schematype.OutcomeRefused, calls[1].Outcome)
		require.Contains(t, *calls[1].Message, `no skill named "tax-returns"; your skills: release-notes`)
	})
}

// TestPastConversationSearchBehindItsSwitch: listed but switched off,
// search_past_conversations is not offered and a call is refused naming the
// tool only; switched on, it finds what the person wrote in another
// conversation.
func TestPastConversationSearchBehindItsSwitch(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, d *db.DB) {
		p := &scripted{answers: []model.Response{{Text: "Noted."}}}
		h := newHarness(t, d, p)
		earlier := h.agent(t, nil)
		require.Equal(t, turn.StatusCOMPLETED, h.wait(t, h.send(t, earlier, "Our lighthouse survey is due in March", "")).Status)

		search := model.Response{ToolCalls: []model.ToolCall{call("s", "search_past_conversations", `{"queries":["lighthouse survey"]}`)}}
		p.mu.Lock()
		p.answers = []model.Response{search, {Text: "Searched."}}
		p.mu.Unlock()
		off := h.agent(t, map[string]any{"tools": []string{"search_past_conversations"}})
		id := h.send(t, off, "When is the survey due?", "")
		require.Equal(t, turn.StatusCOMPLETED, h.wait(t, id).Status)
		require.NotContains(t, offered(p.request(1)), "search_past_conversations")
		calls := h.calls(t, id)
		require.Equal(t, schematype.OutcomeRefused, calls[0].Outcome)
		require.Equal(t, `tool "search_past_conversations" is not available`, *calls[0].Message)

		p.mu.Lock()
		p.answers = []model.Response{search, {Text: "March."}}
		p.mu.Unlock()
		on := h.agent(t, map[string]any{"tools": []string{"search_past_conversations"}, "pastConversationSearch": true})
		id = h.send(t, on, "When is the survey due?", "")
		require.Equal(t, turn.StatusCOMPLETED, h.wait(t, id).Status)
		require.Contains(t, offered(p.request(3)), "search_past_conversations")
		calls = h.calls(t, id)
		require.Equal(t, schematype.OutcomeHits, calls[0].Outcome, *calls[0].Heard)
		require.Contains(t, *calls[0].Heard, "Our lighthouse survey is due in March")
	})
}

// TestMemoryBehindItsSwitch: listed but switched off, the memory tools are
// not offered and a call is refused naming the tool only; switched on, a
// fact saved in one conversation is found in another of the same person's.
func TestMemoryBehindItsSwitch(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, d *db.DB) {
		save := model.Response{ToolCalls: []model.ToolCall{call("w", "memory_write", `{"facts":[{"text":"Prefers answers in metric units."}]}`)}}
		p := &scripted{answers: []model.Response{save, {Text: "Noted."}}}
		h := newHarness(t, d, p)
		tools := []string{"memory_write", "memory_search", "memory_forget"}
		off := h.agent(t, map[string]any{"tools": tools})
		id := h.send(t, off, "Remember: metric units", "")
		require.Equal(t, turn.StatusCOMPLETED, h.wait(t, id).Status)
		require.NotContains(t, offered(p.request(0)), "memory_write")
		calls := h.calls(t, id)
		require.Equal(t, schematype.OutcomeRefused, calls[0].Outcome)
		require.Equal(t, `tool "memory_write" is not available`, *calls[0].Message)

		p.mu.Lock()
		p.answers = []model.Response{save, {Text: "Noted."},
			{ToolCalls: []model.ToolCall{call("s", "memory_search", `{"queries":["units"]}`)}}, {Text: "Metric."}}
		p.mu.Unlock()
		on := h.agent(t, map[string]any{"tools": tools, "memory": true})
		id = h.send(t, on, "Remember: metric units", "")
		require.Equal(t, turn.StatusCOMPLETED, h.wait(t, id).Status)
		require.Subset(t, offered(p.request(2)), tools)
		calls = h.calls(t, id)
		require.Equal(t, schematype.OutcomeHits, calls[0].Outcome, *calls[0].Heard)
		later := h.agent(t, map[string]any{"tools": tools, "memory": true})
		id = h.send(t, later, "Which units do I like?", "")
		require.Equal(t, turn.StatusCOMPLETED, h.wait(t, id).Status)
		calls = h.calls(t, id)
		require.Equal(t, schematype.OutcomeHits, calls[0].Outcome, *calls[0].Heard)
		require.Contains(t, *calls[0].Heard, "Prefers answers in metric units.")
	})
}
