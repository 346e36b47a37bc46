package graph_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/db"
	"github.com/toolgate/toolgate/db/dbtest"
	"github.com/toolgate/toolgate/ent/tenancy"
	"github.com/toolgate/toolgate/ent/turn"
	"github.com/toolgate/toolgate/graph/auth"
	"github.com/toolgate/toolgate/graph/gid"
)

// madeUp is the global id of no row at all.
var madeUp = gid.Encode(1 << 40)

// requireSameRefusal checks that the foreign id and the made-up id get the
// same bytes: NOT_FOUND, with nothing learned about the foreign one.
func (b *testBundle) requireSameRefusal(t *testing.T, token, query, foreign string) {
	t.Helper()
	theirs := b.do(t, token, query, map[string]any{"id": foreign})
	none := b.do(t, token, query, map[string]any{"id": madeUp})
	require.Equal(t, "NOT_FOUND", theirs.code(t), string(theirs.Raw))
	require.Equal(t, string(none.Raw), string(theirs.Raw))
}

func TestApplicationsManagement(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, d *db.DB) {
		b := setup(t, d)
		reg := b.do(t, b.alice.Token, `mutation { registerApplication(input: {name: "crm", url: "https://crm.example/mcp", allowedTools: ["lookup"]}) { id } }`, nil).ok(t)
		app := get(reg, "registerApplication", "id").(string)

		const list = `{ applications { id name url allowedTools } }`
		for _, tok := range []string{b.alice.Token, b.bob.Token} {
			got := b.do(t, tok, list, nil).ok(t)
			require.Equal(t, app, get(got, "applications", 0, "id"))
		}
		require.Empty(t, get(b.do(t, b.eve.Token, list, nil).ok(t), "applications"), "another organisation's applications are not listed")

		const update = `mutation($id: ID!) { updateApplication(input: {id: $id, url: "https://crm2.example/mcp", allowedTools: ["lookup", "deals", "lookup"]}) { application { id url allowedTools } } }`
		require.Equal(t, "FORBIDDEN", b.do(t, b.bob.Token, update, map[string]any{"id": app}).code(t), "members do not manage applications")
		b.requireSameRefusal(t, b.eve.Token, update, app)
		got := b.do(t, b.alice.Token, update, map[string]any{"id": app}).ok(t)
		require.Equal(t, "https://crm2.example/mcp", get(got, "updateApplication", "application", "url"))
		require.Equal(t, []any{"lookup", "deals"}, get(got, "updateApplication", "application", "allowedTools"))
		bad := b.do(t, b.alice.Token, `mutation($id: ID!) { updateApplication(input: {id: $id, allowedTools: []}) { application { id } } }`, map[string]any{"id": app})
		require.Equal(t, "BAD_USER_INPUT", bad.code(t), "the rules of registerApplication hold")

		const remove = `mutation($id: ID!) { removeApplication(input: {id: $id}) { id } }`
		require.Equal(t, "FORBIDDEN", b.do(t, b.bob.Token, remove, map[string]any{"id": app}).code(t))
		b.requireSameRefusal(t, b.eve.Token, remove, app)
		got = b.do(t, b.alice.Token, remove, map[string]any{"id": app}).ok(t)
		require.Equal(t, app, get(got, "removeApplication", "id"))
		require.Empty(t, get(b.do(t, b.alice.Token, list, nil).ok(t), "applications"))
		// Removed, it reads like an id of nothing.
		b.requireSameRefusal(t, b.alice.Token, remove, app)
		// Its tools no longer exist for a new agent.
		r := b.do(t, b.alice.Token, `mutation { createAgent(input: {name: "A", tools: ["crm__lookup"]}) { id } }`, nil)
		require.Equal(t, "BAD_USER_INPUT", r.code(t))
	})
}

func TestUpdateAgent(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, d *db.DB) {
		b := setup(t, d)
		agent := b.createAgent(t, b.alice.Token, "Helper")
		const update = `mutation($id: ID!, $tools: [String!], $instructions: String, $memory: Boolean) {
  updateAgent(input: {id: $id, tools: $tools, instructions: $instructions, memory: $memory}) { agent { id name instructions tools memory budgetCheck } } }`

		got := b.do(t, b.bob.Token, update, map[string]any{"id": agent, "tools": []string{"search_tools", "calculator"},
			"instructions": "Be thorough.", "memory": true}).ok(t)
		a := get(got, "updateAgent", "agent")
		require.Equal(t, "Helper", get(a, "name"), "what is not named is unchanged")
		require.Equal(t, "Be thorough.", get(a, "instructions"))
		require.Equal(t, []any{"search_tools", "calculator"}, get(a, "tools"))
		require.Equal(t, true, get(a, "memory"))
		require.Equal(t, false, get(a, "budgetCheck"))

		// Only the switch named changes.
		got = b.do(t, b.alice.Token, update, map[string]any{"id": agent, "memory": false}).ok(t)
		require.Equal(t, []any{"search_tools", "calculator"}, get(got, "updateAgent", "agent", "tools"))
		require.Equal(t, false, get(got, "updateAgent", "agent", "memory"))

		// Tools are checked exactly as createAgent checks them: the same words.
		unknown := []string{"calculatr", "crm__lookup"}
		upd := b.do(t, b.alice.Token, update, map[string]any{"id": agent, "tools": unknown})
		created := b.do(t, b.alice.Token, `mutation($t: [String!]) { createAgent(input: {name: "B", tools: $t}) { id } }`, map[string]any{"t": unknown})
		require.Equal(t, "BAD_USER_INPUT", upd.code(t))
		require.Equal(t, created.Errors[0].Message, upd.Errors[0].Message)
		require.Contains(t, upd.Errors[0].Message, `"calculatr", "crm__lookup"`)
		// Clearing the list offers no optional tools.
		got = b.do(t, b.alice.Token, update, map[string]any{"id": agent, "tools": []string{}}).ok(t)
		require.Equal(t, []any{}, get(got, "updateAgent", "agent", "tools"))

		b.requireSameRefusal(t, b.eve.Token, update, agent)
		// A turn's scope token does not reconfigure its agent.
		conv := b.startConversation(t, b.alice.Token, agent, "c")
		r := b.do(t, b.scopeToken(t, conv, "calculator"), update, map[string]any{"id": agent, "memory": true})
		require.Equal(t, "NOT_FOUND", r.code(t))
	})
}

// The deck check of createAgent holds for updateAgent too: an update that
// would carry every bulk tool of an application past the widest ceiling is
// refused with the figures.
func TestUpdateAgentChecksTheDeck(t *testing.T) {
	t.Parallel()
	b := setup(t, dbtest.Open(t, dbtest.SQLite))
	b.withApps(t)
	const bulk = 30
	url, _ := crmServer(t, bulk)
	allowed := []string{"lookup"}
	for i := range bulk {
		allowed = append(allowed, fmt.Sprintf("bulk_%d", i))
	}
	b.do(t, b.alice.Token, `mutation($u: String!, $a: [String!]!) { registerApplication(input: {name: "crm", url: $u, allowedTools: $a}) { id } }`,
		map[string]any{"u": url, "a": allowed}).ok(t)
	agent := b.createAgentWith(t, b.alice.Token, "Lean", []any{"crm__lookup"})
	every := make([]string, len(allowed))
	for i, a := range allowed {
		every[i] = "crm__" + a
	}
	r := b.do(t, b.alice.Token, `mutation($id: ID!, $t: [String!]) { updateAgent(input: {id: $id, tools: $t}) { agent { id } } }`,
		map[string]any{"id": agent, "t": every})
	require.Equal(t, "BAD_USER_INPUT", r.code(t))
	require.Contains(t, r.Errors[0].Message, "over the widest ceiling of 40122")
}

func TestArchiveConversation(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, d *db.DB) {
		b := setup(t, d)
		conv := b.startConversation(t, b.alice.Token, b.createAgent(t, b.alice.Token, "Helper"), "old")
		const archive = `mutation($id: ID!, $a: Boolean) { archiveConversation(input: {id: $id, archived: $a}) { conversation { id archivedAt } } }`
		got := b.do(t, b.alice.Token, `mutation($id: ID!) { archiveConversation(input: {id: $id}) { conversation { id archivedAt } } }`, map[string]any{"id": conv}).ok(t)
		require.NotNil(t, get(got, "archiveConversation", "conversation", "archivedAt"))

		send := `mutation($c: ID!) { sendMessage(input: {conversationId: $c, text: "hi"}) { id } }`
		r := b.do(t, b.alice.Token, send, map[string]any{"c": conv})
		require.Equal(t, "BAD_USER_INPUT", r.code(t))
		require.Contains(t, r.Errors[0].Message, "archived")
		// Still readable, and found by its filter.
		list := b.do(t, b.alice.Token, `{ conversations(where: {archivedAtNotNil: true}) { totalCount } }`, nil).ok(t)
		require.EqualValues(t, 1, get(list, "conversations", "totalCount"))

		b.requireSameRefusal(t, b.eve.Token, archive, conv)
		require.Equal(t, "NOT_FOUND", b.do(t, b.bob.Token, archive, map[string]any{"id": conv}).code(t), "a member reaches their own conversations only")

		got = b.do(t, b.alice.Token, archive, map[string]any{"id": conv, "a": false}).ok(t)
		require.Nil(t, get(got, "archiveConversation", "conversation", "archivedAt"))
		b.do(t, b.alice.Token, send, map[string]any{"c": conv}).ok(t)
	})
}

// seedOwned gives a conversation (a global id) one row of everything a
// conversation owns: turns with model calls, tool calls and stored
// results, a workspace file, a task, and an idempotent answer kept under
// its turns' scope.
func seedOwned(t *testing.T, b *testBundle, conv string) int {
	t.Helper()
	ctx := tenancy.System(context.Background())
	id, err := gid.Decode(conv)
	require.NoError(t, err)
	seedTranscript(t, b.client, id, 2, 2)
	c := b.client.Conversation.GetX(ctx, id)
	b.client.WorkspaceFile.Create().SetConversationID(id).SetPath("notes.md").SetContent("hello").SetChars(5).SetBytes(5).ExecX(ctx)
	b.client.Task.Create().SetConversationID(id).SetPosition(0).SetTitle("read").ExecX(ctx)
	b.client.IdempotentResponse.Create().SetOrganizationID(c.OrganizationID).SetScope(fmt.Sprintf("conversation:%d", id)).
		SetKey("k").SetField("writeFiles").SetRequestHash("h").SetResponse([]byte(`{}`)).ExecX(ctx)
	return id
}

// ownedCounts counts, table by table, the rows conversation id owns, over
// every table the schema says a conversation owns.
func ownedCounts(t *testing.T, d *db.DB, id int) map[string]int {
	t.Helper()
	order, err := db.ConversationOwned()
	require.NoError(t, err)
	counts := map[string]int{}
	for _, o := range order {
		s, err := db.OwnedCount(d.Dialect, o.Table, id)
		require.NoError(t, err)
		var n int
		require.NoError(t, d.SQL.QueryRowContext(context.Background(), s.Query, s.Args...).Scan(&n))
		counts[o.Table] = n
	}
	var n int
	q := "SELECT count(*) FROM idempotent_responses WHERE scope = " + map[bool]string{true: "$1", false: "?"}[d.Dialect == "postgres"]
	require.NoError(t, d.SQL.QueryRowContext(context.Background(), q, fmt.Sprintf("conversation:%d", id)).Scan(&n))
	counts["idempotent_responses"] = n
	return counts
}

func TestDeleteConversation(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, d *db.DB) {
		b := setup(t, d)
		agent := b.createAgent(t, b.alice.Token, "Helper")
		doomed := b.startConversation(t, b.alice.Token, agent, "doomed")
		kept := b.startConversation(t, b.alice.Token, agent, "kept")
		doomedID, keptID := seedOwned(t, b, doomed), seedOwned(t, b, kept)
		keptBefore := ownedCounts(t, d, keptID)
		for _, table := range []string{"conversations", "turns", "tool_calls", "stored_results", "model_calls", "workspace_files", "tasks", "idempotent_responses"} {
			require.Positive(t, keptBefore[table], table)
		}

		const del = `mutation($id: ID!) { deleteConversation(id: $id) }`
		b.requireSameRefusal(t, b.eve.Token, del, doomed)
		require.Equal(t, "NOT_FOUND", b.do(t, b.bob.Token, del, map[string]any{"id": doomed}).code(t))
		require.Equal(t, "NOT_FOUND", b.do(t, b.scopeToken(t, doomed), del, map[string]any{"id": doomed}).code(t),
			"a turn's scope token deletes nothing")
		// That scope token left a RUNNING turn: deleting now would pull rows
		// from under it.
		r := b.do(t, b.alice.Token, del, map[string]any{"id": doomed})
		require.Equal(t, "BAD_USER_INPUT", r.code(t))
		require.Contains(t, r.Errors[0].Message, "cancel it first")
		b.client.Turn.Update().Where(turn.ConversationID(doomedID), turn.StatusEQ(turn.StatusRUNNING)).
			SetStatus(turn.StatusCANCELLED).ExecX(tenancy.System(context.Background()))

		ref := fmt.Sprintf("r-%d-1-0", doomedID)
		const read = `query($r: [String!]!) { readToolResult(refs: $r) { ref text error } }`
		readAs := func(ref string) string {
			return strings.ReplaceAll(string(b.do(t, b.alice.Token, read, map[string]any{"r": []string{ref}}).Raw), ref, "REF")
		}
		require.NotContains(t, readAs(ref), "not found")

		got := b.do(t, b.alice.Token, del, map[string]any{"id": doomed}).ok(t)
		require.Equal(t, doomed, get(got, "deleteConversation"))

		for table, n := range ownedCounts(t, d, doomedID) {
			require.Zero(t, n, "%s rows of the deleted conversation are left", table)
		}
		require.Equal(t, keptBefore, ownedCounts(t, d, keptID), "another conversation keeps every row")
		// Afterwards it reads as absent: the conversation, its refs, a second delete.
		b.requireSameRefusal(t, b.alice.Token, `query($id: ID!) { conversation(id: $id) { id } }`, doomed)
		b.requireSameRefusal(t, b.alice.Token, del, doomed)
		require.Equal(t, readAs("r-made-up"), readAs(ref), "its refs read like made-up ones")
	})
}

func TestCreateAndDeactivateUser(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, d *db.DB) {
		b := setup(t, d)
		const create = `mutation($n: String!) { createUser(input: {name: $n, department: "Legal"}) { user { id name department admin deactivatedAt } token { token apiToken { name } } } }`
		require.Equal(t, "FORBIDDEN", b.do(t, b.bob.Token, create, map[string]any{"n": "Carol"}).code(t), "members do not add users")
		got := b.do(t, b.alice.Token, create, map[string]any{"n": "Carol"}).ok(t)
		carol := get(got, "createUser", "user", "id").(string)
		carolToken := get(got, "createUser", "token", "token").(string)
		require.Equal(t, "initial", get(got, "createUser", "token", "apiToken", "name"))
		require.Equal(t, false, get(got, "createUser", "user", "admin"))
		require.Equal(t, "CONFLICT", b.do(t, b.alice.Token, create, map[string]any{"n": "Carol"}).code(t), "names are unique in an organisation")

		me := b.do(t, carolToken, `{ viewer { name department organizationName } }`, nil).ok(t)
		require.Equal(t, "Carol", get(me, "viewer", "name"))
		require.Equal(t, "Acme", get(me, "viewer", "organizationName"))
		users := b.do(t, b.alice.Token, `{ users { name } }`, nil).ok(t)
		require.Equal(t, []any{map[string]any{"name": "Alice"}, map[string]any{"name": "Bob"}, map[string]any{"name": "Carol"}}, get(users, "users"))
		require.Equal(t, "FORBIDDEN", b.do(t, b.bob.Token, `{ users { name } }`, nil).code(t))

		// Carol has a turn running: its scope token works until she is deactivated.
		conv := b.startConversation(t, carolToken, b.createAgent(t, carolToken, "Hers"), "c")
		scoped := b.scopeToken(t, conv, "calculator")
		calc, viewer := `{ calculate(expression: "1+1") { value } }`, `{ viewer { name } }`
		b.do(t, scoped, calc, nil).ok(t)
		b.do(t, carolToken, viewer, nil).ok(t)

		const deactivate = `mutation($id: ID!) { deactivateUser(input: {id: $id}) { user { id deactivatedAt } } }`
		require.Equal(t, "FORBIDDEN", b.do(t, b.bob.Token, deactivate, map[string]any{"id": carol}).code(t))
		b.requireSameRefusal(t, b.eve.Token, deactivate, carol)
		self := b.do(t, b.alice.Token, deactivate, map[string]any{"id": gid.Encode(b.alice.UserID)})
		require.Equal(t, "BAD_USER_INPUT", self.code(t), "an admin cannot lock themselves out")
		got = b.do(t, b.alice.Token, deactivate, map[string]any{"id": carol}).ok(t)
		require.NotNil(t, get(got, "deactivateUser", "user", "deactivatedAt"))

		// At once: the very next request with either token is refused like a made-up token.
		dead := b.do(t, carolToken, viewer, nil)
		require.Equal(t, http.StatusUnauthorized, dead.Status)
		require.Equal(t, auth.Unauthenticated, string(dead.Raw))
		dead = b.do(t, scoped, calc, nil)
		require.Equal(t, http.StatusUnauthorized, dead.Status)
		require.Equal(t, auth.Unauthenticated, string(dead.Raw))
		// Others go on.
		b.do(t, b.bob.Token, viewer, nil).ok(t)
	})
}
