package loop_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/db"
	"github.com/toolgate/toolgate/ent/agent"
	"github.com/toolgate/toolgate/ent/schematype"
	"github.com/toolgate/toolgate/ent/tenancy"
	"github.com/toolgate/toolgate/ent/turn"
	"github.com/toolgate/toolgate/runtime/model"
)

// TestTurnKeepsTheAgentItStartedWith: updateAgent while a turn waits for a
// clarification takes a tool away and rewrites the instructions; the
// resumed turn still has the tool and the same system prompt, and the next
// turn gets the agent as it now is.
func TestTurnKeepsTheAgentItStartedWith(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, d *db.DB) {
		p := &scripted{answers: []model.Response{
			{ToolCalls: []model.ToolCall{call("q1", "clarify", `{"question": "Which year?", "options": ["2025", "2026"]}`)}},
			{ToolCalls: []model.ToolCall{call("c1", "search_tools", `{"queries": ["files"]}`)}},
			{Text: "Done."},
			{ToolCalls: []model.ToolCall{call("c2", "search_tools", `{"queries": ["files"]}`)}},
			{Text: "Done again."},
		}}
		h := newHarness(t, d, p)
		conv := h.conversation(t, "search_tools")
		id := h.send(t, conv, "Plan the budget", "")
		require.Equal(t, turn.StatusWAITING_FOR_CLARIFICATION, h.wait(t, id).Status)

		agents := h.gql(t, `{ agents { edges { node { id } } } }`, nil)
		agentID := agents["agents"].(map[string]any)["edges"].([]any)[0].(map[string]any)["node"].(map[string]any)["id"]
		h.gql(t, `mutation($id: ID!) { updateAgent(input: {id: $id, tools: [], instructions: "Be vague."}) { agent { tools } } }`,
			map[string]any{"id": agentID})
		require.Equal(t, []string{}, h.client.Agent.Query().Where(agent.Name("Analyst")).OnlyX(tenancy.System(context.Background())).Tools)

		h.gql(t, `mutation($t: ID!) { answerClarification(input: {turnId: $t, answer: "2026"}) { id } }`, map[string]any{"t": id})
		done := h.wait(t, id)
		require.Equal(t, turn.StatusCOMPLETED, done.Status, done.Error)
		calls := h.calls(t, id)
		require.Equal(t, "search_tools", calls[1].Name)
		require.Equal(t, schematype.OutcomeHits, calls[1].Outcome, "the turn keeps the tools it started with")
		require.Equal(t, p.request(0).System, p.request(2).System, "and its system prompt")
		require.Contains(t, p.request(0).System, "Be exact.")

		// A new turn gets the agent as updated: the tool is gone.
		next := h.send(t, conv, "Again", "")
		require.Equal(t, turn.StatusCOMPLETED, h.wait(t, next).Status)
		require.Equal(t, schematype.OutcomeRefused, h.calls(t, next)[0].Outcome)
		require.Contains(t, p.request(3).System, "Be vague.")
	})
}
