package graph_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/db"
	"github.com/toolgate/toolgate/db/dbtest"
	"github.com/toolgate/toolgate/ent/conversation"
	"github.com/toolgate/toolgate/ent/predicate"
	"github.com/toolgate/toolgate/ent/tenancy"
	"github.com/toolgate/toolgate/ent/turn"
	"github.com/toolgate/toolgate/ent/turnrating"
	"github.com/toolgate/toolgate/graph/console"
	"github.com/toolgate/toolgate/graph/gid"
)

// byWho is the TurnWhereInput the console's turns list sends for a person
// and an agent ("" leaves either out).
func byWho(userID, agentID string) map[string]any {
	c := map[string]any{}
	if userID != "" {
		c["hasUserWith"] = []any{map[string]any{"id": userID}}
	}
	if agentID != "" {
		c["hasAgentWith"] = []any{map[string]any{"id": agentID}}
	}
	return map[string]any{"hasConversationWith": []any{c}}
}

// TestTurnsFilterByUserAndAgent: the console's turns document, filtered by
// a person or an agent as the console filters it, walks exactly that
// person's or agent's turns, page after page; another organisation's
// person or agent matches nothing, byte for byte as an id of nothing does.
func TestTurnsFilterByUserAndAgent(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, d *db.DB) {
		b := setup(t, d)
		s := seedConsole(t, b)
		doc := console.Operations()["turns"]
		walk := func(token string, where map[string]any) (users, agents map[string]int, total float64) {
			users, agents = map[string]int{}, map[string]int{}
			var after any
			for {
				conn := get(b.do(t, token, doc, map[string]any{"first": 20, "after": after, "where": where}).ok(t), "turns")
				total = get(conn, "totalCount").(float64)
				for _, e := range get(conn, "edges").([]any) {
					users[get(e, "node", "conversation", "user", "id").(string)]++
					agents[get(e, "node", "conversation", "agent", "id").(string)]++
				}
				if !get(conn, "pageInfo", "hasNextPage").(bool) {
					return users, agents, total
				}
				after = get(conn, "pageInfo", "endCursor")
			}
		}
		ctx := tenancy.System(context.Background())
		turnsOf := func(p predicate.Conversation) int {
			return b.client.Turn.Query().Where(turn.HasConversationWith(p)).CountX(ctx)
		}

		bobs, agents, total := walk(b.alice.Token, byWho(s.bob, ""))
		want := turnsOf(conversation.UserID(b.bob.UserID))
		require.Positive(t, want)
		require.Equal(t, map[string]int{s.bob: want}, bobs, "only Bob's turns, every one of them")
		require.EqualValues(t, want, total)
		require.Equal(t, map[string]int{s.seller: want}, agents, "Bob talks to the sales helper only")

		users, researcher, total := walk(b.alice.Token, byWho("", s.researcher))
		want = turnsOf(conversation.AgentID(gidInt(t, s.researcher)))
		require.Greater(t, want, 20, "more than a page")
		require.Equal(t, map[string]int{s.researcher: want}, researcher, "only the researcher's turns, across pages")
		require.EqualValues(t, want, total)
		require.Len(t, users, 1)

		_, _, total = walk(b.alice.Token, byWho(s.bob, s.researcher))
		require.Zero(t, total, "both filters hold at once: Bob never used the researcher")

		// A member filters within their own turns only.
		_, _, total = walk(b.bob.Token, byWho(gidOf(t, b, "User", b.alice.UserID), ""))
		require.Zero(t, total, "a member never reaches another person's turns through the filter")

		// Another organisation's person and agent are as ids of nothing.
		eveAgent := b.createAgent(t, b.eve.Token, "Evil helper")
		seedTranscript(t, b.client, gidInt(t, b.startConversation(t, b.eve.Token, eveAgent, "evil")), 3, 0)
		eveUser := get(b.do(t, b.eve.Token, `{ viewer { id } }`, nil).ok(t), "viewer", "id").(string)
		for _, where := range []map[string]any{byWho(eveUser, ""), byWho("", eveAgent)} {
			theirs := b.do(t, b.alice.Token, doc, map[string]any{"where": where})
			key := "hasUserWith"
			if _, ok := get(where, "hasConversationWith", 0).(map[string]any)[key]; !ok {
				key = "hasAgentWith"
			}
			none := b.do(t, b.alice.Token, doc, map[string]any{"where": map[string]any{"hasConversationWith": []any{map[string]any{key: []any{map[string]any{"id": madeUp}}}}}})
			theirs.ok(t)
			require.Equal(t, string(none.Raw), string(theirs.Raw), key)
			require.EqualValues(t, 0, get(theirs.ok(t), "turns", "totalCount"))
		}
		// A malformed id reads as an id of nothing, as everywhere.
		malformed := b.do(t, b.alice.Token, doc, map[string]any{"where": byWho("not-an-id", "")})
		require.Equal(t, string(b.do(t, b.alice.Token, doc, map[string]any{"where": byWho(madeUp, "")}).Raw), string(malformed.Raw))
	})
}

// TestTurnRatingsBatched: a conversation's ratings, read with its turns as
// the console reads them (every rating, who gave it, and the caller's own),
// take the same statements for 2 turns as for 50: the ratings of a page in
// one statement, their raters in one more, never one per turn.
func TestTurnRatingsBatched(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, d *db.DB) {
		counter := dbtest.Count(d)
		b := setup(t, d)
		agentID := b.createAgent(t, b.alice.Token, "Helper")
		ctx := tenancy.System(context.Background())
		seed := func(title string, n int) string {
			conv := b.startConversation(t, b.bob.Token, agentID, title)
			id, err := gid.Decode(conv)
			require.NoError(t, err)
			seedTranscript(t, b.client, id, n, 1)
			c := b.client.Conversation.GetX(ctx, id)
			for _, tu := range b.client.Turn.Query().Where(turn.ConversationID(id)).AllX(ctx) {
				for i, who := range []int{b.alice.UserID, b.bob.UserID} {
					rating := turnrating.RatingUP
					if (tu.Number+i)%3 == 0 {
						rating = turnrating.RatingDOWN
					}
					b.client.TurnRating.Create().SetOrganizationID(c.OrganizationID).SetUserID(who).SetTurnID(tu.ID).
						SetAgentID(c.AgentID).SetRating(rating).SetComment("turn " + strings.Repeat("!", i)).ExecX(ctx)
				}
			}
			return conv
		}
		small, large := seed("small", 2), seed("large", 50)
		doc := strings.Replace(console.Operations()["turn_ratings"], "ratings {", "myRating { rating } ratings {", 1)
		read := func(token, conv string) (int, []string, map[string]any) {
			counter.Reset()
			data := b.do(t, token, doc, map[string]any{"id": conv}).ok(t)
			return len(counter.Statements()), counter.Statements(), data
		}
		nSmall, _, _ := read(b.alice.Token, small)
		nLarge, stmts, data := read(b.alice.Token, large)
		edges := get(data, "conversation", "turns", "edges").([]any)
		require.Len(t, edges, 50)
		for _, e := range edges {
			require.Len(t, get(e, "node", "ratings").([]any), 2, "an admin reads everyone's ratings")
			require.NotNil(t, get(e, "node", "myRating"))
			for _, r := range get(e, "node", "ratings").([]any) {
				require.Contains(t, []any{"Alice", "Bob"}, get(r, "user", "name"))
			}
		}
		require.Equal(t, nSmall, nLarge, "statements must not grow with the conversation: %q", stmts)
		ratingReads, userReads := 0, 0
		for _, s := range stmts {
			if strings.Contains(s, "turn_ratings") {
				ratingReads++
			}
			if strings.Contains(s, `FROM "users"`) || strings.Contains(s, "FROM `users`") {
				userReads++
			}
		}
		require.Equal(t, 1, ratingReads, "one statement for the ratings of the page, myRating included: %q", stmts)
		require.LessOrEqual(t, userReads, 2, "the token's person and the raters, once: %q", stmts)

		// A member reads their own ratings only, and their own as myRating.
		_, _, data = read(b.bob.Token, large)
		for _, e := range get(data, "conversation", "turns", "edges").([]any) {
			rs := get(e, "node", "ratings").([]any)
			require.Len(t, rs, 1)
			require.Equal(t, "Bob", get(rs, 0, "user", "name"))
		}
	})
}

// lifecycleSeed is what an admin retires in the console: an agent no
// conversation uses, a knowledge base with a document, and a skill.
type lifecycleSeed struct {
	agent, kb, doc, skill string
}

func seedLifecycle(t testing.TB, b *testBundle) lifecycleSeed {
	t.Helper()
	var l lifecycleSeed
	l.agent = b.createAgent(t, b.alice.Token, "Spare agent")
	l.kb = get(b.do(t, b.alice.Token, `mutation { createKnowledgeBase(input: {name: "Handbook"}) { id } }`, nil).ok(t), "createKnowledgeBase", "id").(string)
	l.doc = get(b.do(t, b.alice.Token, `mutation($kb: ID!) { addDocument(input: {knowledgeBaseId: $kb, title: "Policy", text: "Parking is free on Fridays."}) { id } }`,
		map[string]any{"kb": l.kb}).ok(t), "addDocument", "id").(string)
	l.skill = get(b.do(t, b.alice.Token, `mutation { publishSkill(input: {name: "tone", description: "House tone.", instructions: "Be brief."}) { id } }`, nil).ok(t),
		"publishSkill", "id").(string)
	return l
}

// TestAgentsFilterArchived: agents(where:) tells the agents in use from the
// archived ones, within the caller's organisation only.
func TestAgentsFilterArchived(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, d *db.DB) {
		b := setup(t, d)
		inUse := b.createAgent(t, b.alice.Token, "In use")
		old := b.createAgent(t, b.alice.Token, "Old")
		b.createAgent(t, b.eve.Token, "Evil, in use")
		b.do(t, b.alice.Token, `mutation($id: ID!) { archiveAgent(id: $id) { id } }`, map[string]any{"id": old}).ok(t)
		const list = `query($w: AgentWhereInput) { agents(where: $w) { totalCount edges { node { id } } } }`
		ids := func(token string, where map[string]any) []string {
			var out []string
			for _, e := range get(b.do(t, token, list, map[string]any{"w": where}).ok(t), "agents", "edges").([]any) {
				out = append(out, get(e, "node", "id").(string))
			}
			return out
		}
		require.Equal(t, []string{inUse}, ids(b.alice.Token, map[string]any{"archivedAtIsNil": true}))
		require.Equal(t, []string{old}, ids(b.alice.Token, map[string]any{"archivedAtNotNil": true}))
		require.ElementsMatch(t, []string{inUse, old}, ids(b.alice.Token, nil))
		require.Equal(t, []string{inUse}, ids(b.bob.Token, map[string]any{"archivedAtIsNil": true}), "a member sees the organisation's agents")
		require.Empty(t, ids(b.alice.Token, map[string]any{"nameContains": "Evil"}), "another organisation's agents are never listed")
	})
}
