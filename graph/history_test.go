package graph_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/db"
	"github.com/toolgate/toolgate/db/dbtest"
	"github.com/toolgate/toolgate/ent/hybrid"
	"github.com/toolgate/toolgate/ent/schematype"
	"github.com/toolgate/toolgate/ent/tenancy"
	"github.com/toolgate/toolgate/graph/gid"
)

// TestPastConversationSearch: only what the person wrote is found (never
// an answer, a tool's arguments or its output), only in their own other
// conversations (not the one asked from, not another user's or another
// organisation's), a message sent a moment ago included; a query that
// matched nothing is an ABSENCE beside the others' hits; a deleted
// conversation's messages leave the index with it.
func TestPastConversationSearch(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, d *db.DB) {
		b := setup(t, d)
		ctx := tenancy.System(context.Background())
		agent := b.createAgent(t, b.alice.Token, "Helper")
		conv := func(token, title string) (string, int) {
			id := b.startConversation(t, token, agent, title)
			n, err := gid.Decode(id)
			require.NoError(t, err)
			return id, n
		}
		turnIn := func(convID, number int, text, answer string) int {
			return b.client.Turn.Create().SetConversationID(convID).SetNumber(number).SetUserText(text).
				SetAnswer(answer).SetStatus("COMPLETED").SaveX(ctx).ID
		}
		current, currentID := conv(b.alice.Token, "Today")
		tidal, tidalID := conv(b.alice.Token, "Tidal energy")
		_, otherID := conv(b.alice.Token, "Other")
		turnIn(currentID, 1, "More about tidal turbines please", "")
		long := "Some context first. " + strings.Repeat("Filler words about nothing much. ", 20) +
			"What do tidal turbines cost per megawatt? I need a budget for the Orkney site. " + strings.Repeat("More filler. ", 20)
		tu := turnIn(tidalID, 1, long, "The flamingo estimate is 3 million.")
		res := b.client.StoredResult.Create().SetConversationID(tidalID).SetRef("r-zep").SetKind(schematype.KindText).
			SetContent([]byte("zeppelin hangar costs")).SetChars(21).SetBytes(21).SetItems(1).SaveX(ctx)
		b.client.ToolCall.Create().SetTurnID(tu).SetPosition(0).SetName("calculator").SetArguments(`{"expression":"quokka*2"}`).
			SetOutcome(schematype.OutcomeHits).SetRef(res.Ref).SetResultID(res.ID).ExecX(ctx)
		bobConv := b.startConversation(t, b.bob.Token, b.createAgent(t, b.bob.Token, "Bob's"), "Bob's tides")
		bobID, _ := gid.Decode(bobConv)
		turnIn(bobID, 1, "tidal turbines for Bob", "")

		scope := b.scopeToken(t, current, "search_past_conversations")
		search := func(token, conv string, queries ...string) map[string]any {
			return get(b.call(t, token, "search_past_conversations", conv, map[string]any{"queries": queries}).ok(t), "searchPastConversations").(map[string]any)
		}
		got := search(scope, current, "tidal turbines", "flamingo", "zeppelin", "quokka")
		results := got["results"].([]any)
		hits := get(results[0], "hits").([]any)
		require.Len(t, hits, 1, "not the conversation asked from, not Bob's")
		hit := hits[0].(map[string]any)
		require.Equal(t, tidal, hit["conversationId"])
		require.Equal(t, "Tidal energy", hit["title"])
		require.EqualValues(t, 1, hit["turn"])
		require.Contains(t, hit["snippet"], "What do tidal turbines cost per megawatt?")
		require.True(t, strings.HasPrefix(hit["snippet"].(string), "…"), "a long message is cut around the match")
		for i := 1; i <= 3; i++ {
			require.Empty(t, get(results[i], "hits"), "answers, arguments and tool output are never found")
		}
		require.Equal(t, []any{
			map[string]any{"item": 1.0, "input": "flamingo", "kind": "ABSENCE", "message": "the search ran and matched nothing"},
			map[string]any{"item": 2.0, "input": "zeppelin", "kind": "ABSENCE", "message": "the search ran and matched nothing"},
			map[string]any{"item": 3.0, "input": "quokka", "kind": "ABSENCE", "message": "the search ran and matched nothing"},
		}, got["failures"])

		// Sent a moment ago: found at once.
		turnIn(otherID, 1, "Remind me of the lighthouse survey", "")
		fresh := get(search(scope, current, "lighthouse")["results"].([]any)[0], "hits").([]any)
		require.Len(t, fresh, 1)

		bob := search(b.bob.Token, bobConv, "lighthouse", "turbines")
		require.Empty(t, get(bob["results"].([]any)[0], "hits"), "another user's messages are not found")
		require.Empty(t, get(bob["results"].([]any)[1], "hits"), "nor the conversation asked from")

		for name, args := range map[string]map[string]any{
			"six queries":   {"queries": []string{"a", "b", "c", "d", "e", "f"}},
			"repeated":      {"queries": []string{"tide", " Tide "}},
			"too many hits": {"queries": []string{"tide"}, "maxResults": 11},
		} {
			require.Equal(t, "BAD_USER_INPUT", b.call(t, scope, "search_past_conversations", current, args).code(t), name)
		}
		require.Equal(t, "NOT_FOUND", b.call(t, b.scopeToken(t, current, "calculator"), "search_past_conversations", current,
			map[string]any{"queries": []string{"tidal"}}).code(t), "a turn not offered the tool cannot run it")
		require.Equal(t, "NOT_FOUND", b.call(t, b.eve.Token, "search_past_conversations", current,
			map[string]any{"queries": []string{"tidal"}}).code(t), "another organisation's conversation")

		indexed := func() int {
			var n int
			require.NoError(t, d.SQL.QueryRowContext(ctx, fmt.Sprintf(`SELECT count(*) FROM %s WHERE idx = '%s' AND id = %d`,
				hybrid.Table, hybrid.IndexTurns, tu)).Scan(&n))
			return n
		}
		require.Equal(t, 1, indexed())
		b.do(t, b.alice.Token, `mutation($id: ID!) { deleteConversation(id: $id) }`, map[string]any{"id": tidal}).ok(t)
		require.Equal(t, 0, indexed(), "the index forgets a deleted conversation's messages")
		gone := search(scope, current, "tidal turbines")
		require.Empty(t, get(gone["results"].([]any)[0], "hits"))
	})
}
