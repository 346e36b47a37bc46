package graph_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/db"
	"github.com/toolgate/toolgate/db/dbtest"
	"github.com/toolgate/toolgate/graph"
)

const setBudget = `mutation($u: ID, $l: Float!) { setBudget(input: {userId: $u, monthlyLimit: $l}) { id monthlyLimit spent left month user { name } } }`

// TestBudgetsAdminsOnly: only an admin sets limits, for their own
// organisation and its users (another organisation's user is refused like
// a made-up id); an admin lists every limit, a member the organisation's
// and their own; budgetCheck answers the caller's.
func TestBudgetsAdminsOnly(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, d *db.DB) {
		b := setup(t, d)
		require.Equal(t, "FORBIDDEN", b.do(t, b.bob.Token, setBudget, map[string]any{"l": 10}).code(t))
		org := b.do(t, b.alice.Token, setBudget, map[string]any{"l": 12.345678}).ok(t)
		require.Equal(t, map[string]any{"id": get(org, "setBudget", "id"), "monthlyLimit": 12.345678, "spent": 0.0, "left": 12.345678,
			"month": get(org, "setBudget", "month"), "user": nil}, get(org, "setBudget"))
		bob := b.do(t, b.alice.Token, setBudget, map[string]any{"u": graph.EncodeID(b.bob.UserID), "l": 3}).ok(t)
		require.Equal(t, "Bob", get(bob, "setBudget", "user", "name"))
		b.do(t, b.alice.Token, setBudget, map[string]any{"u": graph.EncodeID(b.alice.UserID), "l": 4}).ok(t)

		foreign := b.do(t, b.alice.Token, setBudget, map[string]any{"u": graph.EncodeID(b.eve.UserID), "l": 1})
		madeUp := b.do(t, b.alice.Token, setBudget, map[string]any{"u": graph.EncodeID(1<<40 + 3), "l": 1})
		require.Equal(t, "NOT_FOUND", foreign.code(t))
		require.Equal(t, string(madeUp.Raw), string(foreign.Raw))
		require.Equal(t, "BAD_USER_INPUT", b.do(t, b.alice.Token, setBudget, map[string]any{"l": -1}).code(t))

		const list = `{ budgets { monthlyLimit user { name } } }`
		require.Equal(t, []any{
			map[string]any{"monthlyLimit": 12.345678, "user": nil},
			map[string]any{"monthlyLimit": 3.0, "user": map[string]any{"name": "Bob"}},
			map[string]any{"monthlyLimit": 4.0, "user": map[string]any{"name": "Alice"}},
		}, sortedBudgets(get(b.do(t, b.alice.Token, list, nil).ok(t), "budgets")))
		require.Equal(t, []any{
			map[string]any{"monthlyLimit": 12.345678, "user": nil},
			map[string]any{"monthlyLimit": 3.0, "user": map[string]any{"name": "Bob"}},
		}, sortedBudgets(get(b.do(t, b.bob.Token, list, nil).ok(t), "budgets")))
		require.Empty(t, get(b.do(t, b.eve.Token, list, nil).ok(t), "budgets"))

		check := b.do(t, b.bob.Token, `{ budgetCheck { user { monthlyLimit spent left } organization { monthlyLimit left } } }`, nil).ok(t)
		require.Equal(t, map[string]any{"user": map[string]any{"monthlyLimit": 3.0, "spent": 0.0, "left": 3.0},
			"organization": map[string]any{"monthlyLimit": 12.345678, "left": 12.345678}}, get(check, "budgetCheck"))

		// A turn not offered budget_check cannot run it.
		agent := b.createAgent(t, b.bob.Token, "Helper")
		conv := b.startConversation(t, b.bob.Token, agent, "money")
		r := b.call(t, b.scopeToken(t, conv, "calculator"), "budget_check", conv, nil)
		require.Equal(t, "NOT_FOUND", r.code(t))
		ok := b.call(t, b.scopeToken(t, conv, "budget_check"), "budget_check", conv, nil).ok(t)
		require.EqualValues(t, 3, get(ok, "budgetCheck", "user", "left"))
	})
}

// sortedBudgets orders budgets with the organisation's first, then by limit.
func sortedBudgets(v any) []any {
	out := append([]any(nil), v.([]any)...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			a, b := out[i].(map[string]any), out[j].(map[string]any)
			if a["user"] != nil && (b["user"] == nil || a["monthlyLimit"].(float64) > b["monthlyLimit"].(float64)) {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}
