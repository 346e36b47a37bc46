package graph_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/db"
	"github.com/toolgate/toolgate/db/dbtest"
	"github.com/toolgate/toolgate/ent/tenancy"
	"github.com/toolgate/toolgate/ent/workspacefile"
	"github.com/toolgate/toolgate/graph/gid"
	"github.com/toolgate/toolgate/runtime/dispatch"
	"github.com/toolgate/toolgate/tools"
	"github.com/toolgate/toolgate/tools/workspace"
)

// keyed runs a tool's operation as the runtime posts it, with an
// Idempotency-Key.
func (b *testBundle) keyed(t testing.TB, token, key string, d tools.Definition, conv string, args string) *response {
	t.Helper()
	vars := wsArgs(t, args)
	vars["conversationId"] = conv
	body, err := json.Marshal(map[string]any{"query": d.Operation, "variables": vars})
	require.NoError(t, err)
	h := http.Header{}
	if key != "" {
		h.Set("Idempotency-Key", key)
	}
	return b.postWith(t, token, "application/json", body, h)
}

// TestIdempotencyKeyReplaysWrites: a write repeated with the key it was
// first sent with (the runtime retrying a call that may have run) answers
// what the first answered and changes nothing; a new key runs again; a key
// reused for another request is refused; keys mean nothing across scopes.
func TestIdempotencyKeyReplaysWrites(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, d *db.DB) {
		b := setup(t, d)
		ctx := tenancy.System(context.Background())
		conv := b.startConversation(t, b.alice.Token, b.createAgent(t, b.alice.Token, "Helper"), "files")
		tok := b.scopeToken(t, conv, "write_file", "delete_file", "read_file")
		key := dispatch.IdempotencyKey(1, "call_1")
		content := func() string {
			convID, err := gid.Decode(conv)
			require.NoError(t, err)
			f := b.client.WorkspaceFile.Query().Where(workspacefile.ConversationID(convID), workspacefile.Path("a.txt")).OnlyX(ctx)
			return f.Content
		}

		first := b.keyed(t, tok, key, workspace.WriteFile, conv, `{"files":[{"path":"a.txt","content":"one"}]}`).ok(t)
		require.Equal(t, true, get(first, "writeFiles", "files", 0, "created"))

		// Someone changes the file; the replay of the first write must not
		// put "one" back, and answers as the first did.
		b.keyed(t, tok, "", workspace.WriteFile, conv, `{"files":[{"path":"a.txt","content":"two"}]}`).ok(t)
		again := b.keyed(t, tok, key, workspace.WriteFile, conv, `{"files":[{"path":"a.txt","content":"one"}]}`).ok(t)
		require.Equal(t, first, again)
		require.Equal(t, "two", content())

		// The same key for another request is refused, and runs nothing.
		r := b.keyed(t, tok, key, workspace.WriteFile, conv, `{"files":[{"path":"a.txt","content":"three"}]}`)
		wsRefused(t, r, "already used for a different request")
		require.Equal(t, "two", content())

		// A new key is a new request.
		b.keyed(t, tok, "k2", workspace.WriteFile, conv, `{"files":[{"path":"a.txt","content":"four"}]}`).ok(t)
		require.Equal(t, "four", content())

		// A delete replayed answers its first answer, not "not found".
		del := b.keyed(t, tok, "k3", workspace.DeleteFile, conv, `{"path":"a.txt"}`).ok(t)
		require.Equal(t, del, b.keyed(t, tok, "k3", workspace.DeleteFile, conv, `{"path":"a.txt"}`).ok(t))

		// A failed request keeps nothing: its repeat runs again.
		wsRefused(t, b.keyed(t, tok, "k4", workspace.DeleteFile, conv, `{"path":"a.txt"}`), "no file")
		b.keyed(t, tok, "", workspace.WriteFile, conv, `{"files":[{"path":"a.txt","content":"five"}]}`).ok(t)
		b.keyed(t, tok, "k4", workspace.DeleteFile, conv, `{"path":"a.txt"}`).ok(t)

		// Another conversation's request with the same key is its own.
		other := b.startConversation(t, b.alice.Token, b.createAgent(t, b.alice.Token, "Other"), "other")
		otherTok := b.scopeToken(t, other, "write_file")
		o := b.keyed(t, otherTok, key, workspace.WriteFile, other, `{"files":[{"path":"a.txt","content":"one"}]}`).ok(t)
		require.Equal(t, true, get(o, "writeFiles", "files", 0, "created"))
	})
}
