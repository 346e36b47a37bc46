package loop_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/coder/websocket/wsjson"
	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/ent/db/dbtest"
	"github.com/toolgate/toolgate/ent/turn"
	"github.com/toolgate/toolgate/graph/auth"
	"github.com/toolgate/toolgate/runtime/model"
	"github.com/toolgate/toolgate/runtime/model/openai"
	"github.com/toolgate/toolgate/runtime/retry"
)

// subscribe opens a graphql-transport-ws subscription to a turn's events.
func subscribe(t *testing.T, h *harness, token, turnID string) (*websocket.Conn, context.Context) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(h.srv.URL, "http")+"/graphql",
		&websocket.DialOptions{Subprotocols: []string{"graphql-transport-ws"}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.CloseNow() })
	require.Equal(t, "graphql-transport-ws", c.Subprotocol())
	require.NoError(t, wsjson.Write(ctx, c, map[string]any{"type": "connection_init", "payload": map[string]any{"Authorization": "Bearer " + token}}))
	var ack map[string]any
	require.NoError(t, wsjson.Read(ctx, c, &ack))
	require.Equal(t, "connection_ack", ack["type"])
	require.NoError(t, wsjson.Write(ctx, c, map[string]any{"id": "1", "type": "subscribe", "payload": map[string]any{
		"query":     `subscription($t: ID!) { turnEvents(turnId: $t) { kind at turn { status answer toolCalls { name outcome } } toolCall { name outcome } } }`,
		"variables": map[string]any{"t": turnID},
	}}))
	return c, ctx
}

type wsMessage struct {
	Type    string          `json:"type"`
	Payload json.RawMessage `json:"payload"`
}

type eventPayload struct {
	Data struct {
		TurnEvents struct {
			Kind string `json:"kind"`
			Turn struct {
				Status    string  `json:"status"`
				Answer    *string `json:"answer"`
				ToolCalls []struct {
					Name    string `json:"name"`
					Outcome string `json:"outcome"`
				} `json:"toolCalls"`
			} `json:"turn"`
			ToolCall *struct {
				Name    string `json:"name"`
				Outcome string `json:"outcome"`
			} `json:"toolCall"`
		} `json:"turnEvents"`
	} `json:"data"`
	Errors []map[string]any `json:"errors"`
}

func TestTurnEventsOverWebsocket(t *testing.T) {
	t.Parallel()
	gate := make(chan struct{})
	p := &scripted{block: gate, answers: []model.Response{
		{ToolCalls: []model.ToolCall{call("c1", "calculator", `{"expression": "6*7"}`)}},
		{Text: "42."},
	}}
	h := newHarness(t, dbtest.Open(t, dbtest.SQLite), p)
	id := h.send(t, h.conversation(t), "six times seven", "")
	c, ctx := subscribe(t, h, h.grant.Token, id)

	var kinds []string
	var last eventPayload
	for i := 0; ; i++ {
		var m wsMessage
		require.NoError(t, wsjson.Read(ctx, c, &m))
		if m.Type == "complete" {
			break
		}
		require.Equal(t, "next", m.Type, string(m.Payload))
		require.NoError(t, json.Unmarshal(m.Payload, &last))
		require.Empty(t, last.Errors)
		kinds = append(kinds, last.Data.TurnEvents.Kind)
		if i == 0 {
			// The current status comes first; then the model may go on.
			require.Equal(t, "STATUS", last.Data.TurnEvents.Kind)
			require.Equal(t, "RUNNING", last.Data.TurnEvents.Turn.Status)
			close(gate)
		}
		if last.Data.TurnEvents.Kind == "TOOL_CALL_FINISHED" {
			require.Equal(t, "calculator", last.Data.TurnEvents.ToolCall.Name)
			require.Equal(t, "HITS", last.Data.TurnEvents.ToolCall.Outcome)
		}
	}
	require.Contains(t, kinds, "MODEL_CALL_STARTED")
	require.Contains(t, kinds, "TOOL_CALL_STARTED")
	require.Contains(t, kinds, "ANSWER")
	require.Equal(t, "STATUS", kinds[len(kinds)-1])
	require.Equal(t, "COMPLETED", last.Data.TurnEvents.Turn.Status)
	require.Equal(t, "42.", *last.Data.TurnEvents.Turn.Answer)
	// Each event is read fresh: the tool call that ran after the first
	// event is there, finished.
	require.Len(t, last.Data.TurnEvents.Turn.ToolCalls, 1)
	require.Equal(t, "HITS", last.Data.TurnEvents.Turn.ToolCalls[0].Outcome)

	// A subscriber that comes after the end gets the final status and the
	// end of the stream.
	c2, ctx2 := subscribe(t, h, h.grant.Token, id)
	var m wsMessage
	require.NoError(t, wsjson.Read(ctx2, c2, &m))
	require.NoError(t, json.Unmarshal(m.Payload, &last))
	require.Equal(t, "COMPLETED", last.Data.TurnEvents.Turn.Status)
	require.NoError(t, wsjson.Read(ctx2, c2, &m))
	require.Equal(t, "complete", m.Type)

	// Nobody stays subscribed.
	tid := h.calls(t, id)[0].TurnID
	require.Eventually(t, func() bool { return h.runner.Events().Subscribers(tid) == 0 }, 5*time.Second, 10*time.Millisecond)

	// A stranger's subscription answers not found.
	eve, err := auth.Bootstrap(context.Background(), h.client, "Evil", "Eve", "Ops")
	require.NoError(t, err)
	c3, ctx3 := subscribe(t, h, eve.Token, id)
	require.NoError(t, wsjson.Read(ctx3, c3, &m))
	require.Contains(t, string(m.Payload), "not found")
}

func TestProviderFailureFailsTheTurn(t *testing.T) {
	t.Parallel()
	var hits int
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits++
		http.Error(w, `{"error":{"message":"overloaded","type":"server_error"}}`, http.StatusServiceUnavailable)
	}))
	t.Cleanup(srv.Close)
	var waits []time.Duration
	p, err := openai.New(openai.Options{BaseURL: srv.URL + "/v1", APIKey: "k", HTTPClient: srv.Client(),
		Retry: retry.Policy{Attempts: 3, Sleep: func(_ context.Context, d time.Duration) error { waits = append(waits, d); return nil }}})
	require.NoError(t, err)
	h := newHarness(t, dbtest.Open(t, dbtest.SQLite), p)
	got := h.wait(t, h.send(t, h.conversation(t), "hello", ""))
	require.Equal(t, turn.StatusFAILED, got.Status)
	require.Contains(t, *got.Error, "model provider")
	require.Contains(t, *got.Error, "503")
	require.Equal(t, 3, hits)
	require.Len(t, waits, 2)
	require.Equal(t, 2*waits[0], waits[1], "each wait doubles the last")
}
