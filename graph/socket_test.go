package graph_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/coder/websocket/wsjson"
	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/db/dbtest"
	"github.com/toolgate/toolgate/ent/tenancy"
	"github.com/toolgate/toolgate/graph"
	"github.com/toolgate/toolgate/graph/gid"
	"github.com/toolgate/toolgate/runtime/loop"
)

// dialSocket opens a graphql-transport-ws websocket, initialised with the
// token unless it is empty.
func dialSocket(t *testing.T, b *testBundle, token string) (*websocket.Conn, context.Context) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(b.srv.URL, "http")+"/graphql",
		&websocket.DialOptions{Subprotocols: []string{"graphql-transport-ws"}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.CloseNow() })
	if token == "" {
		return c, ctx
	}
	require.NoError(t, wsjson.Write(ctx, c, map[string]any{"type": "connection_init", "payload": map[string]any{"Authorization": "Bearer " + token}}))
	var ack map[string]any
	require.NoError(t, wsjson.Read(ctx, c, &ack))
	require.Equal(t, "connection_ack", ack["type"])
	return c, ctx
}

// A websocket that sends no connection_init in time is closed with 4408;
// one that does stays open past that time.
func TestWebsocketInitTimeout(t *testing.T) {
	t.Parallel()
	b := setupWith(t, dbtest.Open(t, dbtest.SQLite), func(c *graph.Config) { c.InitTimeout = 300 * time.Millisecond })

	silent, ctx := dialSocket(t, b, "")
	start := time.Now()
	var err error
	for err == nil {
		var msg map[string]any
		err = wsjson.Read(ctx, silent, &msg)
	}
	require.Equal(t, websocket.StatusCode(4408), websocket.CloseStatus(err), "%v", err)
	require.Less(t, time.Since(start), 5*time.Second)

	live, ctx := dialSocket(t, b, b.alice.Token)
	time.Sleep(600 * time.Millisecond)
	require.NoError(t, wsjson.Write(ctx, live, map[string]any{"id": "1", "type": "subscribe", "payload": map[string]any{"query": "{ viewer { name } }"}}))
	var msg struct {
		Type    string         `json:"type"`
		Payload map[string]any `json:"payload"`
	}
	require.NoError(t, wsjson.Read(ctx, live, &msg))
	require.Equal(t, "next", msg.Type)
	require.Equal(t, "Alice", get(msg.Payload, "data", "viewer", "name"))
}

type wsReply struct {
	ID      string          `json:"id"`
	Type    string          `json:"type"`
	Payload json.RawMessage `json:"payload"`
}

// subscribeTurn subscribes to a turn's events under id and returns the
// first reply for it: its status ("next") or the refusal.
func subscribeTurn(t *testing.T, ctx context.Context, c *websocket.Conn, id, turnID string) (string, string) {
	t.Helper()
	require.NoError(t, wsjson.Write(ctx, c, map[string]any{"id": id, "type": "subscribe", "payload": map[string]any{
		"query": `subscription($t: ID!) { turnEvents(turnId: $t) { kind turn { status } } }`, "variables": map[string]any{"t": turnID}}}))
	for {
		var r wsReply
		require.NoError(t, wsjson.Read(ctx, c, &r))
		if r.ID != id || (r.Type != "next" && r.Type != "error") {
			continue
		}
		var p struct {
			Data   map[string]any `json:"data"`
			Errors []struct {
				Message    string         `json:"message"`
				Extensions map[string]any `json:"extensions"`
			} `json:"errors"`
		}
		if r.Type == "error" {
			require.NoError(t, json.Unmarshal(r.Payload, &p.Errors), string(r.Payload))
		} else {
			require.NoError(t, json.Unmarshal(r.Payload, &p), string(r.Payload))
		}
		if len(p.Errors) > 0 {
			return "", p.Errors[0].Extensions["code"].(string) + ": " + p.Errors[0].Message
		}
		return get(p.Data, "turnEvents", "turn", "status").(string), ""
	}
}

// Subscriptions are capped per websocket and per token; a completed one,
// or a closed socket, gives its places back.
func TestSubscriptionCaps(t *testing.T) {
	t.Parallel()
	d := dbtest.Open(t, dbtest.SQLite)
	runner, err := loop.New(loop.Config{Client: d.Client(), Queue: d.Queue(), EncodeID: gid.Encode})
	require.NoError(t, err)
	b := setupWith(t, d, func(c *graph.Config) {
		c.Runner = runner
		c.SubscriptionsPerSocket = 2
		c.SubscriptionsPerToken = 3
	})
	agentID := b.createAgent(t, b.alice.Token, "Helper")
	conv := b.startConversation(t, b.alice.Token, agentID, "watched")
	convID, err := gid.Decode(conv)
	require.NoError(t, err)
	tu := b.client.Turn.Create().SetConversationID(convID).SetNumber(1).SetUserText("hello").SaveX(tenancy.System(context.Background()))
	turnID := gid.Encode(tu.ID)

	a, ctx := dialSocket(t, b, b.alice.Token)
	for _, id := range []string{"1", "2"} {
		status, refused := subscribeTurn(t, ctx, a, id, turnID)
		require.Empty(t, refused)
		require.Equal(t, "RUNNING", status)
	}
	_, refused := subscribeTurn(t, ctx, a, "3", turnID)
	require.Equal(t, "TOO_MANY_SUBSCRIPTIONS: too many subscriptions on this websocket: at most 2 at once; complete one first", refused)

	other, ctx2 := dialSocket(t, b, b.alice.Token)
	_, refused = subscribeTurn(t, ctx2, other, "1", turnID)
	require.Empty(t, refused, "the token's third")
	_, refused = subscribeTurn(t, ctx2, other, "2", turnID)
	require.Equal(t, "TOO_MANY_SUBSCRIPTIONS: too many subscriptions with this token: at most 3 at once; complete one first", refused)

	// Another token has its own places.
	bob, ctx3 := dialSocket(t, b, b.bob.Token)
	_, refused = subscribeTurn(t, ctx3, bob, "1", turnID)
	require.Contains(t, refused, "NOT_FOUND", "bob reaches a subscription, and is refused the turn as not his")

	// Completing one gives its place back.
	require.NoError(t, wsjson.Write(ctx, a, map[string]any{"id": "1", "type": "complete"}))
	require.Eventually(t, func() bool {
		status, refused := subscribeTurn(t, ctx2, other, "3", turnID)
		return refused == "" && status == "RUNNING"
	}, 5*time.Second, 50*time.Millisecond)
	// Closing a socket gives back all of its places: the token's third is
	// free again (other holds two).
	third, ctx4 := dialSocket(t, b, b.alice.Token)
	_, refused = subscribeTurn(t, ctx4, third, "1", turnID)
	require.Contains(t, refused, "with this token")
	require.NoError(t, a.Close(websocket.StatusNormalClosure, "bye"))
	n := 1
	require.Eventually(t, func() bool {
		n++
		_, refused := subscribeTurn(t, ctx4, third, fmt.Sprint(n), turnID)
		return refused == ""
	}, 5*time.Second, 50*time.Millisecond)
}

// No request can be held open: a body that stops arriving, or headers that
// never end, cost the server its ReadTimeout at most, with or without a
// token.
func TestBodiesCannotBeHeld(t *testing.T) {
	t.Parallel()
	b := setupWith(t, dbtest.Open(t, dbtest.SQLite), func(c *graph.Config) {
		c.ReadTimeout = 500 * time.Millisecond
		c.ReadHeaderTimeout = 300 * time.Millisecond
	})
	addr := strings.TrimPrefix(b.srv.URL, "http://")
	tests := []struct {
		name string
		give string
		want string
	}{
		{name: "partial body with a token", give: "POST /graphql HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + b.alice.Token +
			"\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"query\": \"{", want: "400 Bad Request"},
		{name: "partial body without a token", give: "POST /graphql HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"query\": \"{", want: "401 Unauthorized"},
		{name: "partial headers", give: "POST /graphql HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ", want: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			conn, err := net.Dial("tcp", addr)
			require.NoError(t, err)
			defer conn.Close()
			start := time.Now()
			_, err = conn.Write([]byte(tt.give))
			require.NoError(t, err)
			require.NoError(t, conn.SetReadDeadline(time.Now().Add(10*time.Second)))
			r := bufio.NewReader(conn)
			var got strings.Builder
			for {
				line, err := r.ReadString('\n')
				got.WriteString(line)
				if err != nil {
					var ne net.Error
					require.False(t, errors.As(err, &ne) && ne.Timeout(), "the server held the connection: %q", got.String())
					break
				}
			}
			require.Less(t, time.Since(start), 5*time.Second)
			require.Contains(t, got.String(), tt.want)
		})
	}
	// The server's own values.
	hs := graph.NewServer(graph.Config{DB: b.db}).HTTPServer()
	require.Equal(t, graph.DefaultReadTimeout, hs.ReadTimeout)
	require.Equal(t, graph.DefaultReadHeaderTimeout, hs.ReadHeaderTimeout)
	require.Equal(t, graph.DefaultIdleTimeout, hs.IdleTimeout)
}
