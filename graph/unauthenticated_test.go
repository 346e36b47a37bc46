package graph_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/coder/websocket/wsjson"
	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/db"
	"github.com/toolgate/toolgate/db/dbtest"
	"github.com/toolgate/toolgate/ent/apitoken"
	"github.com/toolgate/toolgate/ent/tenancy"
	"github.com/toolgate/toolgate/graph/auth"
)

// A missing, malformed, expired or revoked token gets one answer, word for
// word: 401 with UNAUTHENTICATED, so nothing is learned about tokens.
func TestUnauthenticatedIsOneAnswer(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, d *db.DB) {
		ctx := tenancy.System(context.Background())
		b := setup(t, d)
		created := b.do(t, b.bob.Token, `mutation { createAPIToken(input: {name: "laptop"}) { token apiToken { id } } }`, nil).ok(t)
		revoked := get(created, "createAPIToken", "token").(string)
		b.do(t, b.bob.Token, `mutation($id: ID!) { revokeAPIToken(id: $id) { id } }`,
			map[string]any{"id": get(created, "createAPIToken", "apiToken", "id")}).ok(t)

		soon := time.Now().Add(time.Second).UTC().Format(time.RFC3339Nano)
		created = b.do(t, b.bob.Token, `mutation($e: Time) { createAPIToken(input: {name: "short", expiresAt: $e}) { token apiToken { expiresAt } } }`,
			map[string]any{"e": soon}).ok(t)
		expiring := get(created, "createAPIToken", "token").(string)
		require.NotNil(t, get(created, "createAPIToken", "apiToken", "expiresAt"))
		require.Equal(t, "Bob", get(b.do(t, expiring, `{ viewer { name } }`, nil).ok(t), "viewer", "name"), "alive until it expires")
		expired, hash, err := auth.NewToken()
		require.NoError(t, err)
		b.client.APIToken.Create().SetUserID(b.bob.UserID).SetName("old").SetHash(hash).SetHint(auth.Hint(expired)).
			SetExpiresAt(time.Now().Add(-time.Minute)).SaveX(ctx)

		const q = `{ viewer { name } }`
		missing := b.do(t, "", q, nil)
		require.Equal(t, http.StatusUnauthorized, missing.Status)
		require.Equal(t, "UNAUTHENTICATED", missing.code(t))
		for name, token := range map[string]string{
			"malformed": "not a token",
			"forged":    "tg_" + strings.Repeat("0", 40),
			"revoked":   revoked,
			"expired":   expired,
		} {
			r := b.do(t, token, q, nil)
			require.Equal(t, missing.Status, r.Status, name)
			require.Equal(t, string(missing.Raw), string(r.Raw), name)
		}

		// A token in the past is refused at creation.
		past := b.do(t, b.bob.Token, `mutation { createAPIToken(input: {name: "x", expiresAt: "2020-01-01T00:00:00Z"}) { token } }`, nil)
		require.Equal(t, "BAD_USER_INPUT", past.code(t))
	})
}

// lastUsedAt is written when a token authenticates, at most once a minute.
func TestTokenLastUsedAt(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, d *db.DB) {
		ctx := tenancy.System(context.Background())
		b := setup(t, d)
		hash := auth.HashToken(b.bob.Token)
		tok := b.client.APIToken.Query().Where(apitoken.Hash(hash)).OnlyX(ctx)
		require.Nil(t, tok.LastUsedAt)
		b.do(t, b.bob.Token, `{ viewer { name } }`, nil).ok(t)
		first := b.client.APIToken.Query().Where(apitoken.Hash(hash)).OnlyX(ctx).LastUsedAt
		require.NotNil(t, first)
		require.WithinDuration(t, time.Now(), *first, time.Minute)
		b.do(t, b.bob.Token, `{ viewer { name } }`, nil).ok(t)
		again := b.client.APIToken.Query().Where(apitoken.Hash(hash)).OnlyX(ctx).LastUsedAt
		require.True(t, first.Equal(*again), "not rewritten within the minute")
		list := b.do(t, b.bob.Token, `{ apiTokens { lastUsedAt } }`, nil).ok(t)
		require.NotNil(t, get(list, "apiTokens", 0, "lastUsedAt"))
	})
}

// A websocket whose connection_init has no live token is closed with 4401.
func TestWebsocketUnauthenticatedCloses4401(t *testing.T) {
	t.Parallel()
	b := setup(t, dbtest.Open(t, dbtest.SQLite))
	for name, payload := range map[string]map[string]any{
		"no token":  {},
		"bad token": {"Authorization": "Bearer tg_forged"},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(b.srv.URL, "http")+"/graphql",
			&websocket.DialOptions{Subprotocols: []string{"graphql-transport-ws"}})
		require.NoError(t, err, name)
		require.NoError(t, wsjson.Write(ctx, c, map[string]any{"type": "connection_init", "payload": payload}), name)
		var err2 error
		for err2 == nil {
			var msg map[string]any
			err2 = wsjson.Read(ctx, c, &msg)
		}
		require.Equal(t, websocket.StatusCode(4401), websocket.CloseStatus(err2), "%s: %v", name, err2)
		_ = c.CloseNow()
		cancel()
	}
}

// A websocket that subscribes before its connection_init is closed with
// 4401 Unauthorized, as graphql-transport-ws asks, and nothing runs; one
// that initialises first subscribes as usual.
func TestWebsocketSubscribeBeforeInitCloses4401(t *testing.T) {
	t.Parallel()
	b := setup(t, dbtest.Open(t, dbtest.SQLite))
	subscribe := map[string]any{"id": "1", "type": "subscribe", "payload": map[string]any{"query": "{ viewer { name } }"}}

	early, ctx := dialSocket(t, b, "")
	require.NoError(t, wsjson.Write(ctx, early, subscribe))
	var err error
	for err == nil {
		var msg map[string]any
		err = wsjson.Read(ctx, early, &msg)
		require.NotEqual(t, "next", msg["type"], "nothing ran for the early subscribe")
	}
	require.Equal(t, websocket.StatusCode(4401), websocket.CloseStatus(err), "%v", err)
	require.Contains(t, err.Error(), "Unauthorized")

	live, ctx := dialSocket(t, b, b.alice.Token)
	require.NoError(t, wsjson.Write(ctx, live, subscribe))
	var msg struct {
		Type    string         `json:"type"`
		Payload map[string]any `json:"payload"`
	}
	require.NoError(t, wsjson.Read(ctx, live, &msg))
	require.Equal(t, "next", msg.Type)
	require.Equal(t, "Alice", get(msg.Payload, "data", "viewer", "name"))
}
