package graph_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/db"
	"github.com/toolgate/toolgate/db/dbtest"
	"github.com/toolgate/toolgate/ent/tenancy"
	"github.com/toolgate/toolgate/graph/gid"
)

// TestPromptStatsAndShares: a turn's promptStats sums what its calls read
// (the prefix is one call's), usage gives the organisation's prefix and
// cached shares of all input, and who paid is shown to an admin only.
func TestPromptStatsAndShares(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, d *db.DB) {
		b := setup(t, d)
		ctx := tenancy.System(context.Background())
		turnOf := func(token, name string) (string, func(input, read, write, prefix int64)) {
			conv := b.startConversation(t, token, b.createAgent(t, token, name), "stats")
			convID, err := gid.Decode(conv)
			require.NoError(t, err)
			c := b.client.Conversation.GetX(ctx, convID)
			tu := b.client.Turn.Create().SetConversationID(convID).SetNumber(1).SetUserText("hi").SetStatus("COMPLETED").SaveX(ctx)
			step := 0
			return gid.Encode(tu.ID), func(input, read, write, prefix int64) {
				b.client.ModelCall.Create().SetTurnID(tu.ID).SetOrganizationID(c.OrganizationID).SetAgentID(c.AgentID).
					SetUserID(c.UserID).SetStep(step).SetProvider("openai").SetModel("gpt-4.1").SetInputTokens(input).
					SetCacheReadTokens(read).SetCacheWriteTokens(write).SetPrefixTokens(prefix).
					SetAttribution("o=org;u=user;a=agent;c=conv").SetStartedAt(time.Now()).ExecX(ctx)
				step++
			}
		}
		alices, call := turnOf(b.alice.Token, "Alice's")
		call(4000, 0, 1000, 2000)
		call(500, 4500, 0, 2000)
		bobs, bobCall := turnOf(b.bob.Token, "Bob's")
		bobCall(1000, 1000, 0, 500)

		const turnQuery = `query($id: ID!) { node(id: $id) { ... on Turn {
			promptStats { prefixTokens inputTokens cacheReadTokens modelCalls } modelCalls { attribution } } } }`
		got := get(b.do(t, b.alice.Token, turnQuery, map[string]any{"id": alices}).ok(t), "node")
		require.Equal(t, map[string]any{"prefixTokens": 2000.0, "inputTokens": 10000.0, "cacheReadTokens": 4500.0, "modelCalls": 2.0},
			get(got, "promptStats"))
		require.Equal(t, []any{map[string]any{"attribution": "o=org;u=user;a=agent;c=conv"}, map[string]any{"attribution": "o=org;u=user;a=agent;c=conv"}},
			get(got, "modelCalls"), "an admin sees who paid")
		got = get(b.do(t, b.bob.Token, turnQuery, map[string]any{"id": bobs}).ok(t), "node")
		require.Equal(t, []any{map[string]any{"attribution": nil}}, get(got, "modelCalls"), "nobody else does")

		// Over the organisation: 4,500 prefix and 5,500 cache-read tokens
		// of 12,000 input.
		usage := get(b.do(t, b.alice.Token, `{ usage { prefixShare cachedShare totals { prefixTokens } } }`, nil).ok(t), "usage")
		require.InDelta(t, 0.375, get(usage, "prefixShare"), 1e-9)
		require.InDelta(t, 5500.0/12000, get(usage, "cachedShare"), 1e-9)
		require.Equal(t, 4500.0, get(usage, "totals", "prefixTokens"))
	})
}
