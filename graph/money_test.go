package graph_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/db"
	"github.com/toolgate/toolgate/db/dbtest"
	"github.com/toolgate/toolgate/ent/schematype"
	"github.com/toolgate/toolgate/ent/tenancy"
	"github.com/toolgate/toolgate/graph/gid"
)

// TestMoneyIsExactAndTotals64Bit: money is summed as micro-dollars and shown
// as Money (0.1 + 0.2 is 0.300000, not 0.30000000000000004); token totals
// pass 2^31; the deprecated Float and Int fields still answer for today's
// clients; the exact limit is set as a decimal string.
func TestMoneyIsExactAndTotals64Bit(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, d *db.DB) {
		b := setup(t, d)
		ctx := tenancy.System(context.Background())
		conv := b.startConversation(t, b.alice.Token, b.createAgent(t, b.alice.Token, "Helper"), "money")
		convID, err := gid.Decode(conv)
		require.NoError(t, err)
		c := b.client.Conversation.GetX(ctx, convID)
		turn := b.client.Turn.Create().SetConversationID(convID).SetNumber(1).SetUserText("hi").SetStatus("COMPLETED").SaveX(ctx)
		call := func(org, agent, user, step int, micros schematype.Micros, input int64) {
			b.client.ModelCall.Create().SetTurnID(turn.ID).SetOrganizationID(org).SetAgentID(agent).SetUserID(user).
				SetStep(step).SetProvider("openai").SetModel("gpt-4.1").SetInputTokens(input).
				SetCost(micros.USD()).SetCostMicros(micros).SetStartedAt(time.Now()).ExecX(ctx)
		}
		call(c.OrganizationID, c.AgentID, c.UserID, 0, 100_000, 1)
		call(c.OrganizationID, c.AgentID, c.UserID, 1, 200_000, 3_000_000_000)
		// Another organisation's spend counts for nobody here.
		call(b.eve.OrganizationID, c.AgentID, b.eve.UserID, 2, 7_000_000, 5)

		const usage = `{ usage {
			totals { inputTokens modelCalls cost { micros amount currency } }
			inputTokens cost
			byModel { model totals { inputTokens cost { amount } } }
			byUser { user { name } totals { cost { amount } } }
		} }`
		r := b.do(t, b.alice.Token, usage, nil)
		got := get(r.ok(t), "usage")
		require.Equal(t, map[string]any{"inputTokens": 3_000_000_001.0, "modelCalls": 2.0,
			"cost": map[string]any{"micros": 300_000.0, "amount": "0.300000", "currency": "USD"}}, get(got, "totals"))
		require.Contains(t, string(r.Raw), `"inputTokens":3000000001`, "a JSON number, whole")
		require.EqualValues(t, 3_000_000_001, get(got, "inputTokens"), "the deprecated Int answers as before")
		require.InDelta(t, 0.3, get(got, "cost"), 1e-12, "the deprecated Float answers as before")
		require.Equal(t, []any{map[string]any{"model": "gpt-4.1", "totals": map[string]any{"inputTokens": 3_000_000_001.0,
			"cost": map[string]any{"amount": "0.300000"}}}}, get(got, "byModel"))
		require.Equal(t, []any{map[string]any{"user": map[string]any{"name": "Alice"},
			"totals": map[string]any{"cost": map[string]any{"amount": "0.300000"}}}}, get(got, "byUser"))

		calls := b.do(t, b.alice.Token, `query($id: ID!) { conversation(id: $id) { turns(first: 1) { edges { node {
			modelCalls { step cost costAmount { micros amount } } } } } } }`, map[string]any{"id": conv}).ok(t)
		edges := get(calls, "conversation", "turns", "edges").([]any)
		require.Equal(t, []any{
			map[string]any{"step": 0.0, "cost": 0.1, "costAmount": map[string]any{"micros": 100_000.0, "amount": "0.100000"}},
			map[string]any{"step": 1.0, "cost": 0.2, "costAmount": map[string]any{"micros": 200_000.0, "amount": "0.200000"}},
		}, get(edges[0], "node", "modelCalls"))

		const set = `mutation($in: SetBudgetInput!) { setBudget(input: $in) {
			monthlyLimit monthlyLimitAmount { amount currency } spentAmount { amount } leftAmount { micros amount } } }`
		limit := func(amount string) map[string]any {
			return map[string]any{"in": map[string]any{"monthlyLimitAmount": map[string]any{"amount": amount}}}
		}
		budget := get(b.do(t, b.alice.Token, set, limit("0.300001")).ok(t), "setBudget")
		require.Equal(t, map[string]any{"monthlyLimit": 0.300001, "monthlyLimitAmount": map[string]any{"amount": "0.300001", "currency": "USD"},
			"spentAmount": map[string]any{"amount": "0.300000"}, "leftAmount": map[string]any{"micros": 1.0, "amount": "0.000001"}}, budget)
		check := b.do(t, b.alice.Token, `{ budgetCheck { organization { monthlyLimitAmount { amount } spentAmount { amount } leftAmount { amount } }
			user { monthlyLimitAmount { amount } leftAmount { amount } spentAmount { micros } } } }`, nil).ok(t)
		require.Equal(t, map[string]any{
			"organization": map[string]any{"monthlyLimitAmount": map[string]any{"amount": "0.300001"},
				"spentAmount": map[string]any{"amount": "0.300000"}, "leftAmount": map[string]any{"amount": "0.000001"}},
			"user": map[string]any{"monthlyLimitAmount": nil, "leftAmount": nil, "spentAmount": map[string]any{"micros": 300_000.0}},
		}, get(check, "budgetCheck"))

		for name, in := range map[string]map[string]any{
			"both":           {"monthlyLimit": 1, "monthlyLimitAmount": map[string]any{"amount": "1"}},
			"neither":        {},
			"other currency": {"monthlyLimitAmount": map[string]any{"amount": "1", "currency": "EUR"}},
			"too precise":    {"monthlyLimitAmount": map[string]any{"amount": "0.0000001"}},
			"negative":       {"monthlyLimitAmount": map[string]any{"amount": "-1"}},
			"not a number":   {"monthlyLimitAmount": map[string]any{"amount": "1e6"}},
			"too large":      {"monthlyLimitAmount": map[string]any{"amount": "1000000001"}},
		} {
			r := b.do(t, b.alice.Token, set, map[string]any{"in": in})
			require.Equal(t, "BAD_USER_INPUT", r.code(t), name)
		}
		left := get(b.do(t, b.alice.Token, `{ budgets { leftAmount { amount } } }`, nil).ok(t), "budgets")
		require.Equal(t, []any{map[string]any{"leftAmount": map[string]any{"amount": "0.000001"}}}, left, "a refused limit changes nothing")
	})
}

// TestBudgetsSpendInOneStatement: every budget of a response, with all of
// its money fields, shares one statement for what was spent.
func TestBudgetsSpendInOneStatement(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, d *db.DB) {
		counter := dbtest.Count(d)
		b := setup(t, d)
		const set = `mutation($u: ID, $a: String!) { setBudget(input: {userId: $u, monthlyLimitAmount: {amount: $a}}) { id } }`
		const list = `{ budgets { spent left spentAmount { amount } leftAmount { amount } monthlyLimitAmount { amount } } }`
		count := func() int {
			counter.Reset()
			b.do(t, b.alice.Token, list, nil).ok(t)
			return len(counter.Statements())
		}
		b.do(t, b.alice.Token, set, map[string]any{"a": "10"}).ok(t)
		one := count()
		b.do(t, b.alice.Token, set, map[string]any{"u": gid.Encode(b.alice.UserID), "a": "4"}).ok(t)
		b.do(t, b.alice.Token, set, map[string]any{"u": gid.Encode(b.bob.UserID), "a": "3"}).ok(t)
		require.Equal(t, one, count(), "statements must not grow with the budgets")
		// the token, the budgets, the spend.
		require.Equal(t, 3, one, counter.Statements())
	})
}
