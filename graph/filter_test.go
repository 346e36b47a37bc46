package graph_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/db"
	"github.com/toolgate/toolgate/db/dbtest"
	"github.com/toolgate/toolgate/graph"
)

// Filters past their bounds, and a malformed cursor anywhere, are
// BAD_USER_INPUT naming the argument, on both databases; a real filter
// still filters.
func TestFilterBounds(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, d *db.DB) {
		b := setup(t, d)
		tok := b.alice.Token
		agentID := b.createAgent(t, tok, "Helper")
		b.startConversation(t, tok, agentID, "Quarterly report")
		b.startConversation(t, tok, agentID, "Holiday plans")

		const q = `query($w: ConversationWhereInput) { conversations(first: 10, where: $w) { totalCount } }`
		ok := b.do(t, tok, q, map[string]any{"w": map[string]any{
			"and": []any{map[string]any{"or": []any{map[string]any{"titleContains": "report"}, map[string]any{"titleContains": "budget"}}},
				map[string]any{"not": map[string]any{"titleContains": "Holiday"}}},
		}}).ok(t)
		require.EqualValues(t, 1, get(ok, "conversations", "totalCount"))

		ors := make([]any, 20_000)
		for i := range ors {
			ors[i] = map[string]any{"titleContains": "x"}
		}
		var not any = map[string]any{"titleContains": "x"}
		for range 999 {
			not = map[string]any{"not": not}
		}
		var has any = map[string]any{"titleContains": "x"}
		for i := range 20 {
			if i%2 == 0 {
				has = map[string]any{"hasConversationWith": []any{has}}
			} else {
				has = map[string]any{"hasTurnsWith": []any{has}}
			}
		}
		tests := []struct {
			name    string
			give    any
			wantMsg string
		}{
			{name: "900 KB titleContains", give: map[string]any{"titleContains": strings.Repeat("a", 900_000)}, wantMsg: `invalid argument "where": a string over 1024 bytes`},
			{name: "an OR of 20,000 predicates", give: map[string]any{"or": ors}, wantMsg: `invalid argument "where": over 100 predicates`},
			{name: "NOT nested 999 deep", give: not, wantMsg: `invalid argument "where": filters nested over 8 deep`},
			{name: "hasTurnsWith 20 deep", give: has, wantMsg: `invalid argument "where": filters nested over 8 deep`},
		}
		for _, tt := range tests {
			r := b.do(t, tok, q, map[string]any{"w": tt.give})
			require.Equal(t, "BAD_USER_INPUT", r.code(t), tt.name)
			require.Contains(t, r.Errors[0].Message, tt.wantMsg, tt.name)
		}
		// Written into the query itself, the same (990 deep: the parser
		// refuses 1,000 levels of anything).
		literal := "{ conversations(first: 1, where: " + strings.Repeat("{not: ", 990) + "{titleContains: \"x\"}" + strings.Repeat("}", 990) + ") { totalCount } }"
		r := b.do(t, tok, literal, nil)
		require.Equal(t, "BAD_USER_INPUT", r.code(t))
		require.Contains(t, r.Errors[0].Message, `invalid argument "where": filters nested over 8 deep`)

		// A malformed cursor in a nested connection.
		for _, cursor := range []string{"not-a-cursor", "gaFpzQ", strings.Repeat("A", 5000)} {
			r := b.do(t, tok, `query($c: Cursor) { conversations(first: 5) { edges { node { turns(first: 5, after: $c) { totalCount } } } } }`,
				map[string]any{"c": cursor})
			require.Equal(t, "BAD_USER_INPUT", r.code(t), cursor)
			require.Contains(t, r.Errors[0].Message, `malformed cursor in argument "after"`)
		}
		require.Equal(t, 8, graph.MaxFilterDepth)
	})
}
