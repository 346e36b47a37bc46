package graph_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/db"
	"github.com/toolgate/toolgate/db/dbtest"
	"github.com/toolgate/toolgate/ent/documentchunk"
	"github.com/toolgate/toolgate/ent/tenancy"
	"github.com/toolgate/toolgate/graph/gid"
)

const missingID = "tg0000000000000"

// TestAgentLifecycle: an admin archives an agent (no new conversation; the
// old ones stay readable and go on), brings it back, and deletes one no
// conversation refers to; a member may not, another organisation's admin
// gets NOT_FOUND as for an id of nothing.
func TestAgentLifecycle(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, d *db.DB) {
		b := setup(t, d)
		used := b.createAgentWith(t, b.alice.Token, "Used", []any{"calculator"})
		spare := b.createAgentWith(t, b.alice.Token, "Spare", []any{"calculator"})
		conv := b.startConversation(t, b.alice.Token, used, "kept")
		const archive = `mutation($id: ID!, $a: Boolean) { archiveAgent(id: $id, archived: $a) { id name archivedAt } }`
		const del = `mutation($id: ID!) { deleteAgent(id: $id) }`

		require.Equal(t, "FORBIDDEN", b.do(t, b.bob.Token, archive, map[string]any{"id": used}).code(t))
		require.Equal(t, "NOT_FOUND", b.do(t, b.eve.Token, archive, map[string]any{"id": used}).code(t))
		require.Equal(t, "NOT_FOUND", b.do(t, b.alice.Token, archive, map[string]any{"id": missingID}).code(t))
		require.NotNil(t, get(b.do(t, b.alice.Token, archive, map[string]any{"id": used}).ok(t), "archiveAgent", "archivedAt"))

		start := b.do(t, b.bob.Token, `mutation($a: ID!) { startConversation(input: {agentId: $a}) { id } }`, map[string]any{"a": used})
		require.Equal(t, "BAD_USER_INPUT", start.code(t))
		require.Contains(t, start.Errors[0].Message, `"Used" is archived`)
		// Its conversation stays readable and takes messages.
		require.Equal(t, "kept", get(b.do(t, b.alice.Token, `query($id: ID!) { conversation(id: $id) { title } }`, map[string]any{"id": conv}).ok(t), "conversation", "title"))
		b.do(t, b.alice.Token, `mutation($c: ID!) { sendMessage(input: {conversationId: $c, text: "still here?"}) { id } }`, map[string]any{"c": conv}).ok(t)

		require.Nil(t, get(b.do(t, b.alice.Token, archive, map[string]any{"id": used, "a": false}).ok(t), "archiveAgent", "archivedAt"))
		b.startConversation(t, b.bob.Token, used, "again")

		// Delete: refused while conversations refer to it, naming how many.
		refused := b.do(t, b.alice.Token, del, map[string]any{"id": used})
		require.Equal(t, "BAD_USER_INPUT", refused.code(t))
		require.Contains(t, refused.Errors[0].Message, `"Used" has 2 conversations`)
		require.Equal(t, "FORBIDDEN", b.do(t, b.bob.Token, del, map[string]any{"id": spare}).code(t))
		require.Equal(t, "NOT_FOUND", b.do(t, b.eve.Token, del, map[string]any{"id": spare}).code(t))
		require.Equal(t, spare, b.do(t, b.alice.Token, del, map[string]any{"id": spare}).ok(t)["deleteAgent"])
		require.Equal(t, "NOT_FOUND", b.do(t, b.alice.Token, del, map[string]any{"id": spare}).code(t), "gone")
	})
}

// TestRenameConversation: the owner renames (trimmed; blank: untitled;
// past 500 characters refused); another person's conversation is NOT_FOUND.
func TestRenameConversation(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, d *db.DB) {
		b := setup(t, d)
		a := b.createAgentWith(t, b.alice.Token, "A", []any{"calculator"})
		conv := b.startConversation(t, b.bob.Token, a, "first")
		const rename = `mutation($id: ID!, $t: String!) { renameConversation(input: {id: $id, title: $t}) { id title } }`
		require.Equal(t, "Budget 2027", get(b.do(t, b.bob.Token, rename, map[string]any{"id": conv, "t": "  Budget 2027 "}).ok(t), "renameConversation", "title"))
		require.Nil(t, get(b.do(t, b.bob.Token, rename, map[string]any{"id": conv, "t": "  "}).ok(t), "renameConversation", "title"))
		require.Equal(t, "BAD_USER_INPUT", b.do(t, b.bob.Token, rename, map[string]any{"id": conv, "t": strings.Repeat("x", 501)}).code(t))
		require.Equal(t, "NOT_FOUND", b.do(t, b.eve.Token, rename, map[string]any{"id": conv, "t": "mine"}).code(t))
		require.Equal(t, "NOT_FOUND", b.do(t, b.bob.Token, rename, map[string]any{"id": missingID, "t": "x"}).code(t))
	})
}

// TestUserRoleAndReactivation: an admin deactivates and reactivates a
// user (their token works again) and changes a role, never their own.
func TestUserRoleAndReactivation(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, d *db.DB) {
		b := setup(t, d)
		bob := get(b.do(t, b.bob.Token, `{ viewer { id } }`, nil).ok(t), "viewer", "id").(string)
		alice := get(b.do(t, b.alice.Token, `{ viewer { id } }`, nil).ok(t), "viewer", "id").(string)
		b.do(t, b.alice.Token, `mutation($id: ID!) { deactivateUser(input: {id: $id}) { user { id } } }`, map[string]any{"id": bob}).ok(t)
		require.Equal(t, "UNAUTHENTICATED", b.do(t, b.bob.Token, `{ viewer { id } }`, nil).code(t))
		const reactivate = `mutation($id: ID!) { reactivateUser(input: {id: $id}) { user { id deactivatedAt } } }`
		require.Equal(t, "NOT_FOUND", b.do(t, b.eve.Token, reactivate, map[string]any{"id": bob}).code(t))
		require.Nil(t, get(b.do(t, b.alice.Token, reactivate, map[string]any{"id": bob}).ok(t), "reactivateUser", "user", "deactivatedAt"))
		require.Equal(t, bob, get(b.do(t, b.bob.Token, `{ viewer { id } }`, nil).ok(t), "viewer", "id"), "the token works again")

		const role = `mutation($id: ID!, $a: Boolean!) { setUserRole(input: {id: $id, admin: $a}) { user { id admin } } }`
		require.Equal(t, "FORBIDDEN", b.do(t, b.bob.Token, role, map[string]any{"id": bob, "a": true}).code(t))
		require.Equal(t, "NOT_FOUND", b.do(t, b.eve.Token, role, map[string]any{"id": bob, "a": true}).code(t))
		require.Equal(t, true, get(b.do(t, b.alice.Token, role, map[string]any{"id": bob, "a": true}).ok(t), "setUserRole", "user", "admin"))
		require.Equal(t, true, get(b.do(t, b.bob.Token, `{ viewer { admin } }`, nil).ok(t), "viewer", "admin"))
		self := b.do(t, b.alice.Token, role, map[string]any{"id": alice, "a": false})
		require.Equal(t, "BAD_USER_INPUT", self.code(t))
		require.Contains(t, self.Errors[0].Message, "own role")
		require.Equal(t, false, get(b.do(t, b.bob.Token, role, map[string]any{"id": alice, "a": false}).ok(t), "setUserRole", "user", "admin"), "the new admin may")
	})
}

// TestDeleteKnowledgeBaseDocumentAndSkill: what an agent binds is refused,
// naming the agent, until it is unbound; a document goes with its
// passages, from the tables and from the search index; members may not,
// and another organisation's admin gets NOT_FOUND.
func TestDeleteKnowledgeBaseDocumentAndSkill(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, d *db.DB) {
		b := docSetup(t, d)
		ctx := tenancy.System(context.Background())
		kb := get(b.do(t, b.alice.Token, `mutation { createKnowledgeBase(input: {name: "Handbook"}) { id } }`, nil).ok(t), "createKnowledgeBase", "id").(string)
		doc := get(b.do(t, b.alice.Token, `mutation($kb: ID!) { addDocument(input: {knowledgeBaseId: $kb, title: "Policy", text: "Parking is free on Fridays."}) { id } }`,
			map[string]any{"kb": kb}).ok(t), "addDocument", "id").(string)
		b.do(t, b.alice.Token, `mutation($kb: ID!) { addDocument(input: {knowledgeBaseId: $kb, title: "Travel", text: "Book trains, not planes."}) { id } }`,
			map[string]any{"kb": kb}).ok(t)
		require.Eventually(t, func() bool { return b.client.DocumentChunk.Query().CountX(ctx) >= 2 }, 20*time.Second, 20*time.Millisecond)
		entries := func() int {
			var n int
			require.NoError(t, d.SQL.QueryRowContext(ctx, `SELECT count(*) FROM hybrid_entries`).Scan(&n))
			return n
		}
		require.Eventually(t, func() bool { return entries() >= 2 }, 20*time.Second, 20*time.Millisecond)
		before := entries()
		b.do(t, b.alice.Token, `mutation { publishSkill(input: {name: "tone", description: "House tone.", instructions: "Be brief."}) { id } }`, nil).ok(t)
		skill := get(b.do(t, b.alice.Token, `{ skills { id name } }`, nil).ok(t), "skills", 0, "id").(string)
		agent := get(b.do(t, b.alice.Token, `mutation($kb: ID!) { createAgent(input: {name: "Helper", tools: ["knowledge_search"], knowledgeBaseIds: [$kb], skills: ["tone"]}) { id } }`,
			map[string]any{"kb": kb}).ok(t), "createAgent", "id").(string)

		const delDoc = `mutation($id: ID!) { deleteDocument(input: {id: $id}) { deletedId } }`
		require.Equal(t, "FORBIDDEN", b.do(t, b.bob.Token, delDoc, map[string]any{"id": doc}).code(t))
		require.Equal(t, "NOT_FOUND", b.do(t, b.eve.Token, delDoc, map[string]any{"id": doc}).code(t))
		require.Equal(t, doc, get(b.do(t, b.alice.Token, delDoc, map[string]any{"id": doc}).ok(t), "deleteDocument", "deletedId"))
		require.Less(t, entries(), before, "its passages left the search index")
		docID, err := gid.Decode(doc)
		require.NoError(t, err)
		require.Zero(t, b.client.DocumentChunk.Query().Where(documentchunk.DocumentID(docID)).CountX(ctx))
		require.Equal(t, "NOT_FOUND", b.do(t, b.alice.Token, delDoc, map[string]any{"id": doc}).code(t))

		const delKB = `mutation($id: ID!) { deleteKnowledgeBase(input: {id: $id}) { deletedId documents } }`
		const delSkill = `mutation($id: ID!) { deleteSkill(input: {id: $id}) { deletedId } }`
		bound := b.do(t, b.alice.Token, delKB, map[string]any{"id": kb})
		require.Equal(t, "BAD_USER_INPUT", bound.code(t))
		require.Contains(t, bound.Errors[0].Message, `bound to the agent "Helper"`)
		listed := b.do(t, b.alice.Token, delSkill, map[string]any{"id": skill})
		require.Equal(t, "BAD_USER_INPUT", listed.code(t))
		require.Contains(t, listed.Errors[0].Message, `listed by the agent "Helper"`)
		require.Equal(t, "NOT_FOUND", b.do(t, b.eve.Token, delKB, map[string]any{"id": kb}).code(t))
		require.Equal(t, "NOT_FOUND", b.do(t, b.eve.Token, delSkill, map[string]any{"id": skill}).code(t))
		require.Equal(t, "FORBIDDEN", b.do(t, b.bob.Token, delSkill, map[string]any{"id": skill}).code(t))

		b.do(t, b.alice.Token, `mutation($id: ID!) { updateAgent(input: {id: $id, knowledgeBaseIds: [], skills: []}) { agent { id } } }`, map[string]any{"id": agent}).ok(t)
		gone := b.do(t, b.alice.Token, delKB, map[string]any{"id": kb}).ok(t)
		require.Equal(t, kb, get(gone, "deleteKnowledgeBase", "deletedId"))
		require.Equal(t, 1.0, get(gone, "deleteKnowledgeBase", "documents"))
		require.Equal(t, skill, get(b.do(t, b.alice.Token, delSkill, map[string]any{"id": skill}).ok(t), "deleteSkill", "deletedId"))
		require.Zero(t, b.client.DocumentChunk.Query().CountX(ctx))
		require.Equal(t, before-2, entries(), "every passage of the base left the index")
		require.Empty(t, get(b.do(t, b.alice.Token, `{ knowledgeBases(first: 5) { edges { node { id } } } }`, nil).ok(t), "knowledgeBases", "edges"))
		require.Empty(t, get(b.do(t, b.alice.Token, `{ skills { id } }`, nil).ok(t), "skills"))
	})
}
