package graph_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/db"
	"github.com/toolgate/toolgate/db/dbtest"
	"github.com/toolgate/toolgate/ent/tenancy"
	"github.com/toolgate/toolgate/graph/gid"
)

// Text that holds a NUL (escaped on PostgreSQL, kept on SQLite) is still
// found by every substring and word search, on both databases: by the
// words either side of the NUL, and by a query that holds the NUL itself.
// Filters (titleContains, titleContainsFold), transcript words and
// past-conversation search. (The workspace refuses a NUL: it holds text
// files only.)
func TestSearchAcrossNul(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, d *db.DB) {
		b := setup(t, d)
		ctx := tenancy.System(context.Background())
		agent := b.createAgent(t, b.alice.Token, "Finder")
		conv := b.startConversation(t, b.alice.Token, agent, "Ada\x00Lovelace notes")
		other := b.startConversation(t, b.alice.Token, agent, "Plain title")
		convID, err := gid.Decode(conv)
		require.NoError(t, err)
		b.client.Turn.Create().SetConversationID(convID).SetNumber(1).SetUserText("Tell me of Babbage\x00engines please").
			SetAnswer("The difference\x00engine.").SetStatus("COMPLETED").ExecX(ctx)

		// Filters: a substring either side of the NUL, one across it, and
		// one that is not there.
		filter := func(field, value string) []any {
			data := b.do(t, b.alice.Token, `query($w: ConversationWhereInput) { conversations(where: $w) { edges { node { title } } } }`,
				map[string]any{"w": map[string]any{field: value}}).ok(t)
			var out []any
			for _, e := range get(data, "conversations", "edges").([]any) {
				out = append(out, get(e, "node", "title"))
			}
			return out
		}
		want := []any{"Ada\x00Lovelace notes"}
		require.Equal(t, want, filter("titleContains", "Lovelace"))
		require.Equal(t, want, filter("titleContains", "Ada"))
		require.Equal(t, want, filter("titleContains", "a\x00L"))
		require.Equal(t, want, filter("titleContainsFold", "ADA\x00LOVE"))
		require.Empty(t, filter("titleContains", "a L"))
		require.Equal(t, []any{"Plain title"}, filter("titleContains", "Plain"))

		// Transcript words.
		words := func(w string) []any {
			data := b.do(t, b.alice.Token, `query($c: ID!, $w: String) { transcript(conversationId: $c, words: $w) { turns { number userText answer } } }`,
				map[string]any{"c": conv, "w": w}).ok(t)
			return get(data, "transcript", "turns").([]any)
		}
		for _, w := range []string{"Babbage", "engines", "Babbage\x00engines", "difference\x00engine"} {
			turns := words(w)
			require.Len(t, turns, 1, "words %q", w)
			require.Equal(t, "Tell me of Babbage\x00engines please", get(turns[0], "userText"))
			require.Equal(t, "The difference\x00engine.", get(turns[0], "answer"))
		}
		require.Empty(t, words("Babbage engines\x00"))

		// Past-conversation search, asked from the other conversation.
		past := b.scopeToken(t, other, "search_past_conversations")
		got := get(b.call(t, past, "search_past_conversations", other, map[string]any{"queries": []string{"Babbage", "engines"}}).ok(t),
			"searchPastConversations", "results").([]any)
		for i, r := range got {
			hits := get(r, "hits").([]any)
			require.Len(t, hits, 1, "query %d", i)
			require.Equal(t, conv, get(hits[0], "conversationId"))
			require.Equal(t, "Tell me of Babbage\x00engines please", get(hits[0], "snippet"))
		}
	})
}
