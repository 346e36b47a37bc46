package graph_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/db"
	"github.com/toolgate/toolgate/db/dbtest"
	"github.com/toolgate/toolgate/ent/tenancy"
	"github.com/toolgate/toolgate/ent/turn"
	"github.com/toolgate/toolgate/graph/gid"
)

// endedTurn stores a finished turn of the conversation (a global id) and
// returns its global id.
func endedTurn(t *testing.T, b *testBundle, conv string, number int, text, modelName string) string {
	t.Helper()
	ctx := tenancy.System(context.Background())
	convID, err := gid.Decode(conv)
	require.NoError(t, err)
	c := b.client.Conversation.GetX(ctx, convID)
	at := time.Now().Add(-time.Minute)
	tu := b.client.Turn.Create().SetConversationID(convID).SetNumber(number).SetUserText(text).SetTimeZone("Europe/Paris").
		SetAnswer("an answer").SetStatus(turn.StatusCOMPLETED).SetStartedAt(at).SetFinishedAt(at.Add(time.Second)).SaveX(ctx)
	b.client.ModelCall.Create().SetTurnID(tu.ID).SetOrganizationID(c.OrganizationID).SetAgentID(c.AgentID).SetUserID(c.UserID).
		SetProvider("openai").SetModel(modelName).SetStartedAt(at).ExecX(ctx)
	return gid.Encode(tu.ID)
}

// TestRegenerateTurn: the last turn is answered again as a new turn with
// the same text and time zone, the earlier one kept and marked superseded;
// a turn that is not the last, a conversation busy with the new turn, and
// another organisation's turn are refused.
func TestRegenerateTurn(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, d *db.DB) {
		b := setup(t, d)
		a := b.createAgentWith(t, b.alice.Token, "A", []any{"calculator"})
		conv := b.startConversation(t, b.bob.Token, a, "c")
		first := endedTurn(t, b, conv, 1, "What is 2/3?", "gpt-4.1")
		second := endedTurn(t, b, conv, 2, "And 3/4?", "gpt-4.1")
		const regen = `mutation($id: ID!) { regenerateTurn(id: $id) { id number status userText timeZone superseded } }`

		notLast := b.do(t, b.bob.Token, regen, map[string]any{"id": first})
		require.Equal(t, "BAD_USER_INPUT", notLast.code(t))
		require.Contains(t, notLast.Errors[0].Message, "not the conversation's last")
		require.Equal(t, "NOT_FOUND", b.do(t, b.eve.Token, regen, map[string]any{"id": second}).code(t))
		require.Equal(t, "NOT_FOUND", b.do(t, b.bob.Token, regen, map[string]any{"id": missingID}).code(t))

		got := b.do(t, b.bob.Token, regen, map[string]any{"id": second}).ok(t)["regenerateTurn"].(map[string]any)
		require.Equal(t, 3.0, got["number"])
		require.Equal(t, "RUNNING", got["status"])
		require.Equal(t, "And 3/4?", got["userText"])
		require.Equal(t, "Europe/Paris", got["timeZone"])
		require.Equal(t, false, got["superseded"])
		turns := get(b.do(t, b.bob.Token, `query($id: ID!) { conversation(id: $id) { turns(first: 10) { edges { node { number superseded answer } } } } }`,
			map[string]any{"id": conv}).ok(t), "conversation", "turns", "edges").([]any)
		require.Len(t, turns, 3)
		require.Equal(t, false, get(turns[0], "node", "superseded"))
		require.Equal(t, true, get(turns[1], "node", "superseded"), "the earlier answer kept, marked superseded")
		require.Equal(t, "an answer", get(turns[1], "node", "answer"))

		busy := b.do(t, b.bob.Token, regen, map[string]any{"id": got["id"]})
		require.Equal(t, "BAD_USER_INPUT", busy.code(t), string(busy.Raw))
	})
}

// TestRateTurn: one rating per person per turn, changeable; a comment of
// at most 2,000 characters; a running turn and another organisation's turn
// refused; the month's ratings by agent and model, an admin's the
// organisation's and a member's their own.
func TestRateTurn(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, d *db.DB) {
		b := setup(t, d)
		research := b.createAgentWith(t, b.alice.Token, "Research", []any{"calculator"})
		sales := b.createAgentWith(t, b.alice.Token, "Sales", []any{"calculator"})
		bobConv := b.startConversation(t, b.bob.Token, research, "b")
		aliceConv := b.startConversation(t, b.alice.Token, sales, "a")
		bobTurn := endedTurn(t, b, bobConv, 1, "q1", "gpt-4.1")
		aliceTurn := endedTurn(t, b, aliceConv, 1, "q2", "claude-sonnet-4-5")
		const rate = `mutation($t: ID!, $r: Rating!, $c: String) { rateTurn(input: {turnId: $t, rating: $r, comment: $c}) { id myRating { rating comment user { name } } ratings { rating } } }`

		got := b.do(t, b.bob.Token, rate, map[string]any{"t": bobTurn, "r": "DOWN", "c": "Wrong total."}).ok(t)
		require.Equal(t, "DOWN", get(got, "rateTurn", "myRating", "rating"))
		require.Equal(t, "Wrong total.", get(got, "rateTurn", "myRating", "comment"))
		require.Equal(t, "Bob", get(got, "rateTurn", "myRating", "user", "name"))
		// Changed, not added: still one rating.
		got = b.do(t, b.bob.Token, rate, map[string]any{"t": bobTurn, "r": "UP", "c": "Fixed on reload."}).ok(t)
		require.Equal(t, "UP", get(got, "rateTurn", "myRating", "rating"))
		require.Len(t, get(got, "rateTurn", "ratings").([]any), 1)
		// The admin rates bob's turn too: two ratings, each person's own.
		got = b.do(t, b.alice.Token, rate, map[string]any{"t": bobTurn, "r": "DOWN"}).ok(t)
		require.Len(t, get(got, "rateTurn", "ratings").([]any), 2, "an admin reads everyone's")
		require.Equal(t, "", get(got, "rateTurn", "myRating", "comment"))
		b.do(t, b.alice.Token, rate, map[string]any{"t": aliceTurn, "r": "UP", "c": "Spot on."}).ok(t)
		require.Len(t, get(b.do(t, b.bob.Token, `query($id: ID!) { node(id: $id) { ... on Turn { ratings { rating } } } }`, map[string]any{"id": bobTurn}).ok(t),
			"node", "ratings").([]any), 1, "a member reads their own")

		long := b.do(t, b.bob.Token, rate, map[string]any{"t": bobTurn, "r": "UP", "c": strings.Repeat("é", 2001)})
		require.Equal(t, "BAD_USER_INPUT", long.code(t))
		require.Contains(t, long.Errors[0].Message, "at most 2000")
		b.do(t, b.bob.Token, rate, map[string]any{"t": bobTurn, "r": "UP", "c": strings.Repeat("é", 2000)}).ok(t)
		require.Equal(t, "NOT_FOUND", b.do(t, b.eve.Token, rate, map[string]any{"t": bobTurn, "r": "UP"}).code(t))
		require.Equal(t, "NOT_FOUND", b.do(t, b.bob.Token, rate, map[string]any{"t": aliceTurn, "r": "UP"}).code(t), "another person's conversation")
		running := get(b.do(t, b.bob.Token, `mutation($c: ID!) { sendMessage(input: {conversationId: $c, text: "more"}) { id } }`, map[string]any{"c": bobConv}).ok(t), "sendMessage", "id")
		require.Equal(t, "BAD_USER_INPUT", b.do(t, b.bob.Token, rate, map[string]any{"t": running, "r": "UP"}).code(t))

		const summary = `{ ratings { up down byAgent { agent { name } up down } byModel { model up down } comments { rating { comment } turn { id } } } }`
		all := b.do(t, b.alice.Token, summary, nil).ok(t)["ratings"].(map[string]any)
		require.Equal(t, 2.0, all["up"])
		require.Equal(t, 1.0, all["down"])
		require.ElementsMatch(t, []any{
			map[string]any{"agent": map[string]any{"name": "Research"}, "up": 1.0, "down": 1.0},
			map[string]any{"agent": map[string]any{"name": "Sales"}, "up": 1.0, "down": 0.0},
		}, all["byAgent"])
		require.ElementsMatch(t, []any{
			map[string]any{"model": "gpt-4.1", "up": 1.0, "down": 1.0},
			map[string]any{"model": "claude-sonnet-4-5", "up": 1.0, "down": 0.0},
		}, all["byModel"])
		require.Len(t, all["comments"], 2)
		own := b.do(t, b.bob.Token, summary, nil).ok(t)["ratings"].(map[string]any)
		require.Equal(t, 1.0, own["up"])
		require.Equal(t, 0.0, own["down"])

		// A conversation deleted takes its turns' ratings with it.
		b.do(t, b.bob.Token, `mutation($id: ID!) { cancelTurn(id: $id) { id } }`, map[string]any{"id": running}).ok(t)
		b.do(t, b.bob.Token, `mutation($id: ID!) { deleteConversation(id: $id) }`, map[string]any{"id": bobConv}).ok(t)
		require.Equal(t, 1, b.client.TurnRating.Query().CountX(tenancy.System(context.Background())), "alice's own rating stays")
	})
}
