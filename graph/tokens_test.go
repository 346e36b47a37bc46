package graph_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/db"
	"github.com/toolgate/toolgate/db/dbtest"
)

func TestAPITokensCreateListRevoke(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, d *db.DB) {
		b := setup(t, d)
		created := b.do(t, b.bob.Token, `mutation { createAPIToken(input: {name: "laptop"}) { token apiToken { id name hint revokedAt } } }`, nil).ok(t)
		token := get(created, "createAPIToken", "token").(string)
		id := get(created, "createAPIToken", "apiToken", "id").(string)
		require.Equal(t, token[:10], get(created, "createAPIToken", "apiToken", "hint"))

		// The new token works; the listing never shows a secret.
		require.Equal(t, "Bob", get(b.do(t, token, `{ viewer { name } }`, nil).ok(t), "viewer", "name"))
		list := b.do(t, b.bob.Token, `{ apiTokens { id name } }`, nil)
		require.NotContains(t, string(list.Raw), token)
		require.Len(t, get(list.ok(t), "apiTokens"), 2)

		// Another organisation cannot revoke it, and learns nothing.
		const revoke = `mutation($id: ID!) { revokeAPIToken(id: $id) { id revokedAt } }`
		require.Equal(t, "NOT_FOUND", b.do(t, b.eve.Token, revoke, map[string]any{"id": id}).code(t))
		// The organisation's admin can.
		r := b.do(t, b.alice.Token, revoke, map[string]any{"id": id}).ok(t)
		require.NotNil(t, get(r, "revokeAPIToken", "revokedAt"))
		require.Equal(t, "UNAUTHENTICATED", b.do(t, token, `{ viewer { name } }`, nil).code(t))
		// Bob's other token still works.
		require.Equal(t, "Bob", get(b.do(t, b.bob.Token, `{ viewer { name } }`, nil).ok(t), "viewer", "name"))

		require.Equal(t, "BAD_USER_INPUT", b.do(t, b.bob.Token, `mutation { createAPIToken(input: {name: " "}) { token } }`, nil).code(t))
	})
}
