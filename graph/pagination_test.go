package graph_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/db"
	"github.com/toolgate/toolgate/db/dbtest"
	"github.com/toolgate/toolgate/ent/tenancy"
	"github.com/toolgate/toolgate/graph/gid"
)

// walk pages through a connection a page of two at a time, forward with
// first/after or backward with last/before, and returns the ids in the
// connection's order. It fails on a repeated id or a walk that never ends.
func (b *testBundle) walk(t *testing.T, field, orderBy string, backward bool) []string {
	t.Helper()
	return b.walkIn(t, "%s", nil, field, orderBy, backward)
}

// walkIn walks the connection field inside the query wrap (a format whose
// %s is the connection), found in the answer under path.
func (b *testBundle) walkIn(t *testing.T, wrap string, path []any, field, orderBy string, backward bool) []string {
	t.Helper()
	var (
		ids    []string
		cursor any
		seen   = map[string]bool{}
	)
	for range 50 {
		var conn string
		if backward {
			conn = fmt.Sprintf(`%s(last: 2, before: $c%s) { edges { node { id } } pageInfo { hasPreviousPage startCursor } }`, field, orderBy)
		} else {
			conn = fmt.Sprintf(`%s(first: 2, after: $c%s) { edges { node { id } } pageInfo { hasNextPage endCursor } }`, field, orderBy)
		}
		data := get(b.do(t, b.alice.Token, "query($c: Cursor) { "+fmt.Sprintf(wrap, conn)+" }", map[string]any{"c": cursor}).ok(t), path...)
		var page []string
		for _, e := range get(data, field, "edges").([]any) {
			id := get(e, "node", "id").(string)
			require.False(t, seen[id], "%s%s: %s came back twice", field, orderBy, id)
			seen[id] = true
			page = append(page, id)
		}
		info := get(data, field, "pageInfo").(map[string]any)
		if backward {
			ids = append(page, ids...)
			if info["hasPreviousPage"] != true {
				return ids
			}
			cursor = info["startCursor"]
		} else {
			ids = append(ids, page...)
			if info["hasNextPage"] != true {
				return ids
			}
			cursor = info["endCursor"]
		}
	}
	t.Fatalf("%s%s: the walk did not end", field, orderBy)
	return nil
}

// Every order of every top-level connection walks to its end forward and
// backward, meeting every row once and in the same order, on rows whose
// times differ only in their fractional digits.
func TestPaginationWalksEveryOrder(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, d *db.DB) {
		ctx := tenancy.System(context.Background())
		b := setup(t, d)
		base := time.Date(2026, 11, 30, 17, 58, 13, 0, time.UTC)
		// Microseconds apart (PostgreSQL keeps microseconds), out of
		// insertion order, with ties in title and turn count.
		offsets := []int{7, 1, 12, 3, 999_999, 10, 100_000}
		titles := []string{"b", "a", "b", "c", "a", "d", "b"}
		agent := b.createAgent(t, b.alice.Token, "Pager")
		agentID, err := gid.Decode(agent)
		require.NoError(t, err)
		var want []string
		for i, off := range offsets {
			at := base.Add(time.Duration(off) * time.Microsecond)
			c := b.client.Conversation.Create().
				SetOrganizationID(b.alice.OrganizationID).SetUserID(b.alice.UserID).SetAgentID(agentID).
				SetTitle(titles[i]).SetCreatedAt(at).SaveX(ctx)
			for n := range i % 3 {
				b.client.Turn.Create().SetConversationID(c.ID).SetNumber(n + 1).SetUserText("hi").SaveX(ctx)
			}
			c = c.Update().SetUpdatedAt(at.Add(time.Duration(off) * time.Microsecond)).SaveX(ctx)
			require.Equal(t, i%3, c.TurnsCount)
			want = append(want, gid.Encode(c.ID))
		}
		for i := range 4 {
			b.client.Agent.Create().SetOrganizationID(b.alice.OrganizationID).SetName(fmt.Sprint("agent ", i%2)).
				SetCreatedAt(base.Add(time.Duration(offsets[i]) * time.Microsecond)).SaveX(ctx)
		}

		tests := []struct {
			field   string
			orderBy string
		}{
			{field: "conversations"},
			{field: "agents"},
		}
		for _, f := range []string{"CREATED_AT", "UPDATED_AT", "TITLE", "TURNS_COUNT"} {
			for _, dir := range []string{"ASC", "DESC"} {
				tests = append(tests, struct{ field, orderBy string }{"conversations", fmt.Sprintf(`, orderBy: [{field: %s, direction: %s}]`, f, dir)})
			}
		}
		for _, f := range []string{"CREATED_AT", "UPDATED_AT", "NAME"} {
			for _, dir := range []string{"ASC", "DESC"} {
				tests = append(tests, struct{ field, orderBy string }{"agents", fmt.Sprintf(`, orderBy: [{field: %s, direction: %s}]`, f, dir)})
			}
		}
		for _, tt := range tests {
			forward := b.walk(t, tt.field, tt.orderBy, false)
			backward := b.walk(t, tt.field, tt.orderBy, true)
			require.Equal(t, forward, backward, "%s%s: backward walk differs", tt.field, tt.orderBy)
			if tt.field == "conversations" {
				require.ElementsMatch(t, want, forward, "%s%s", tt.field, tt.orderBy)
			} else {
				require.Len(t, forward, 5, "%s%s", tt.field, tt.orderBy)
			}
		}

		// The default order is most recent first, by update time.
		byUpdate := b.walk(t, "conversations", "", false)
		require.Equal(t, []string{want[4], want[6], want[2], want[5], want[0], want[3], want[1]}, byUpdate)

		// Knowledge bases, their documents and memories take orderBy as a
		// list too, and walk the same way.
		var kbs, docs, memories []string
		kb := b.client.KnowledgeBase.Create().SetOrganizationID(b.alice.OrganizationID).SetName("b").SetCreatedAt(base).SaveX(ctx)
		for i, off := range offsets {
			at := base.Add(time.Duration(off) * time.Microsecond)
			k := b.client.KnowledgeBase.Create().SetOrganizationID(b.alice.OrganizationID).SetName(titles[i]).
				SetCreatedAt(at).SetUpdatedAt(at.Add(time.Duration(off) * time.Microsecond)).SaveX(ctx)
			doc := b.client.Document.Create().SetOrganizationID(b.alice.OrganizationID).SetKnowledgeBaseID(kb.ID).
				SetTitle(titles[i]).SetCreatedAt(at).SetUpdatedAt(at.Add(time.Duration(off) * time.Microsecond)).SaveX(ctx)
			m := b.client.Memory.Create().SetOrganizationID(b.alice.OrganizationID).SetUserID(b.alice.UserID).
				SetText(fmt.Sprint("fact ", i)).SetCreatedAt(at).SetUpdatedAt(at).SaveX(ctx)
			kbs, docs, memories = append(kbs, gid.Encode(k.ID)), append(docs, gid.Encode(doc.ID)), append(memories, gid.Encode(m.ID))
		}
		kbs = append(kbs, gid.Encode(kb.ID))
		// The documents of the first knowledge base made (the default order is the order made).
		inKB, inKBPath := `knowledgeBases(first: 1) { edges { node { %s } } }`, []any{"knowledgeBases", "edges", 0, "node"}
		// Bob's memory is never Alice's to page through.
		b.client.Memory.Create().SetOrganizationID(b.bob.OrganizationID).SetUserID(b.bob.UserID).SetText("bob's").ExecX(ctx)
		nested := []struct {
			wrap, field string
			path        []any
			fields      []string
			want        []string
		}{
			{wrap: "%s", field: "knowledgeBases", fields: []string{"CREATED_AT", "UPDATED_AT", "NAME"}, want: kbs},
			{wrap: "%s", field: "memories", fields: []string{"CREATED_AT", "UPDATED_AT"}, want: memories},
			{wrap: inKB, path: inKBPath, field: "documents",
				fields: []string{"CREATED_AT", "UPDATED_AT"}, want: docs},
		}
		for _, n := range nested {
			orders := []string{""}
			for _, f := range n.fields {
				for _, dir := range []string{"ASC", "DESC"} {
					orders = append(orders, fmt.Sprintf(`, orderBy: [{field: %s, direction: %s}]`, f, dir))
				}
			}
			for _, orderBy := range orders {
				forward := b.walkIn(t, n.wrap, n.path, n.field, orderBy, false)
				backward := b.walkIn(t, n.wrap, n.path, n.field, orderBy, true)
				require.Equal(t, forward, backward, "%s%s: backward walk differs", n.field, orderBy)
				require.ElementsMatch(t, n.want, forward, "%s%s", n.field, orderBy)
			}
		}
		// By creation time, oldest first, then newest first.
		byCreation := []string{docs[1], docs[3], docs[0], docs[5], docs[2], docs[6], docs[4]}
		require.Equal(t, byCreation, b.walkIn(t, inKB, inKBPath, "documents", `, orderBy: [{field: CREATED_AT}]`, false))
		require.Equal(t, reversed(byCreation), b.walkIn(t, inKB, inKBPath, "documents", `, orderBy: [{field: CREATED_AT, direction: DESC}]`, true))
		require.Equal(t, []string{memories[1], memories[3], memories[0], memories[5], memories[2], memories[6], memories[4]},
			b.walk(t, "memories", `, orderBy: [{field: CREATED_AT}]`, false))
	})
}

func reversed(s []string) []string {
	out := make([]string, len(s))
	for i, v := range s {
		out[len(s)-1-i] = v
	}
	return out
}

// A cursor that is not one of ours is the caller's mistake, named as such,
// at the top level and in a nested connection.
func TestMalformedCursorIsBadInput(t *testing.T) {
	t.Parallel()
	b := setup(t, dbtest.Open(t, dbtest.SQLite))
	agent := b.createAgent(t, b.alice.Token, "Pager")
	conv := b.startConversation(t, b.alice.Token, agent, "one")
	tests := []struct {
		give string
		vars map[string]any
		want string
	}{
		{give: `{ conversations(after: "garbage") { totalCount } }`, want: "after"},
		{give: `query($c: Cursor) { conversations(before: $c, last: 1) { totalCount } }`, vars: map[string]any{"c": "garbage"}, want: "before"},
		{give: `query($c: Cursor) { agents(first: 1, after: $c) { totalCount } }`, vars: map[string]any{"c": "e30"}, want: "after"},
		{give: `query($id: ID!) { conversation(id: $id) { turns(first: 1, after: "garbage") { totalCount } } }`, vars: map[string]any{"id": conv}, want: "after"},
	}
	for _, tt := range tests {
		res := b.do(t, b.alice.Token, tt.give, tt.vars)
		require.Equal(t, "BAD_USER_INPUT", res.code(t), string(res.Raw))
		require.Contains(t, res.Errors[0].Message, tt.want, string(res.Raw))
	}
}

// The transcript query docs/api.md shows a portal developer passes the
// complexity limit as written; the existing "too complex" case in
// TestRequestErrors keeps an abusive nesting refused.
func TestReadmeTranscriptQueryPasses(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile("../docs/api.md")
	require.NoError(t, err)
	_, rest, ok := strings.Cut(string(readme), "A transcript, with each tool call's")
	require.True(t, ok, "docs/api.md's transcript example")
	_, rest, ok = strings.Cut(rest, "```graphql\n")
	require.True(t, ok)
	query, _, ok := strings.Cut(rest, "```")
	require.True(t, ok)
	require.Contains(t, query, "turns(first: 100)")

	b := setup(t, dbtest.Open(t, dbtest.SQLite))
	agent := b.createAgent(t, b.alice.Token, "Reader")
	conv := b.startConversation(t, b.alice.Token, agent, "read me")
	data := b.do(t, b.alice.Token, query, map[string]any{"id": conv}).ok(t)
	require.Equal(t, "read me", get(data, "conversation", "title"))
}

// Introspection shows the API, not the directives that steer code generation.
func TestIntrospectionHidesCodegenDirectives(t *testing.T) {
	t.Parallel()
	b := setup(t, dbtest.Open(t, dbtest.SQLite))
	data := b.do(t, b.alice.Token, `{ __schema { directives { name } } }`, nil).ok(t)
	var names []string
	for _, d := range get(data, "__schema", "directives").([]any) {
		names = append(names, get(d, "name").(string))
	}
	require.Contains(t, names, "deprecated")
	require.NotContains(t, names, "goField")
	require.NotContains(t, names, "goModel")
}

// createAgent refuses a tool that does not exist, naming it and listing
// what an agent can name, application tools included.
func TestCreateAgentRefusesUnknownTools(t *testing.T) {
	t.Parallel()
	b := setup(t, dbtest.Open(t, dbtest.SQLite))
	b.do(t, b.alice.Token, `mutation { registerApplication(input: {name: "crm", url: "https://crm.example/mcp", allowedTools: ["lookup"]}) { id } }`, nil).ok(t)
	const create = `mutation($t: [String!]) { createAgent(input: {name: "A", tools: $t}) { id tools } }`
	r := b.do(t, b.alice.Token, create, map[string]any{"t": []string{"search_tools", "calculatr", "crm__delete"}})
	require.Equal(t, "BAD_USER_INPUT", r.code(t))
	msg := r.Errors[0].Message
	require.Contains(t, msg, `"calculatr", "crm__delete"`)
	require.Contains(t, msg, "crm__lookup")
	require.Contains(t, msg, "search_tools")
	require.NotContains(t, msg, `"search_tools"`, "a tool that exists is not named as missing")

	ok := b.do(t, b.alice.Token, create, map[string]any{"t": []string{"search_tools", "crm__lookup"}}).ok(t)
	require.Equal(t, []any{"search_tools", "crm__lookup"}, get(ok, "createAgent", "tools"))
	// Another organisation's application tools are not its to name.
	r = b.do(t, b.eve.Token, create, map[string]any{"t": []string{"crm__lookup"}})
	require.Equal(t, "BAD_USER_INPUT", r.code(t))
	_, listed, found := strings.Cut(r.Errors[0].Message, "can list")
	require.True(t, found, r.Errors[0].Message)
	require.NotContains(t, listed, "crm__lookup")
}
