package loop_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"entgo.io/ent/dialect"
	entsql "entgo.io/ent/dialect/sql"
	"github.com/coder/websocket"
	"github.com/coder/websocket/wsjson"
	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/db/dbtest"
	"github.com/toolgate/toolgate/ent"
	"github.com/toolgate/toolgate/ent/tenancy"
	"github.com/toolgate/toolgate/ent/turn"
	"github.com/toolgate/toolgate/graph/auth"
	"github.com/toolgate/toolgate/graph/gid"
	"github.com/toolgate/toolgate/runtime/events"
	"github.com/toolgate/toolgate/runtime/model"
	"github.com/toolgate/toolgate/runtime/model/openai"
	"github.com/toolgate/toolgate/runtime/retry"
)

// subscribe opens a graphql-transport-ws subscription to a turn's events.
func subscribe(t *testing.T, h *harness, token, turnID string) (*websocket.Conn, context.Context) {
	t.Helper()
	return subscribeQuery(t, h, token, `subscription($t: ID!) { turnEvents(turnId: $t) { kind at turn { status answer toolCalls { name outcome } } toolCall { name outcome } } }`,
		map[string]any{"t": turnID})
}

// subscribeQuery opens a graphql-transport-ws subscription.
func subscribeQuery(t *testing.T, h *harness, token, query string, vars map[string]any) (*websocket.Conn, context.Context) {
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
		"query": query, "variables": vars,
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

// endOnRead is a driver that, once armed, ends a turn the moment the first
// read of the turns table has been scanned: inside turnEvents, between
// reading the turn and listening for its events.
type endOnRead struct {
	dialect.Driver
	armed atomic.Pointer[func()]
}

func (d *endOnRead) Query(ctx context.Context, query string, args, v any) error {
	if err := d.Driver.Query(ctx, query, args, v); err != nil {
		return err
	}
	if !strings.Contains(query, "turns") {
		return nil
	}
	if end := d.armed.Swap(nil); end != nil {
		rows := v.(*entsql.Rows)
		rows.ColumnScanner = &closeHook{ColumnScanner: rows.ColumnScanner, after: *end}
	}
	return nil
}

type closeHook struct {
	entsql.ColumnScanner
	after func()
}

func (c *closeHook) Close() error {
	err := c.ColumnScanner.Close()
	c.after()
	return err
}

// TestTurnEndingWhileSubscribingEndsTheStream: a turn that ends just after
// turnEvents read it RUNNING still reaches the subscriber as ended (the
// subscription was listening before the read), so the stream completes
// instead of waiting on RUNNING until the client leaves.
func TestTurnEndingWhileSubscribingEndsTheStream(t *testing.T) {
	t.Parallel()
	d := dbtest.Open(t, dbtest.SQLite)
	drv := &endOnRead{Driver: d.Driver}
	d.Driver = drv
	h := newHarness(t, d, &scripted{})
	sys := tenancy.System(context.Background())
	convID, err := gid.Decode(h.conversation(t))
	require.NoError(t, err)
	// A RUNNING turn no job runs: only the hook ends it.
	tu := h.client.Turn.Create().SetConversationID(convID).SetNumber(1).SetUserText("hi").SaveX(sys)
	raw := ent.NewClient(ent.Driver(drv.Driver))
	end := func() {
		raw.Turn.UpdateOneID(tu.ID).SetStatus(turn.StatusCOMPLETED).ExecX(sys)
		h.runner.Events().Publish(events.Event{Kind: events.Status, TurnID: tu.ID, At: time.Now()})
	}
	drv.armed.Store(&end)

	c, ctx := subscribe(t, h, h.grant.Token, gid.Encode(tu.ID))
	var statuses []string
	for {
		var m wsMessage
		require.NoError(t, wsjson.Read(ctx, c, &m), "the stream should end with the turn")
		if m.Type == "complete" {
			break
		}
		var p eventPayload
		require.NoError(t, json.Unmarshal(m.Payload, &p))
		require.Empty(t, p.Errors)
		statuses = append(statuses, p.Data.TurnEvents.Kind+" "+p.Data.TurnEvents.Turn.Status)
	}
	require.Nil(t, drv.armed.Load(), "the hook fired")
	require.Equal(t, []string{"STATUS RUNNING", "STATUS COMPLETED"}, statuses)
}
