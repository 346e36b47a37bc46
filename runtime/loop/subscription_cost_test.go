package loop_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/coder/websocket/wsjson"
	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/db/dbtest"
	"github.com/toolgate/toolgate/ent/tenancy"
	"github.com/toolgate/toolgate/graph/gid"
	"github.com/toolgate/toolgate/runtime/events"
	"github.com/toolgate/toolgate/runtime/model"
)

// TestSubscriptionStatementsPerEvent counts what a turn's subscribers
// read of each event: six subscribers, three of whose selections need the
// turn's row and its tool call's, three whose need nothing an event of a
// running turn does not carry (its status; its answer, error and finish
// time, none until it ends), cost one read of each row per event, not one
// per subscriber.
func TestSubscriptionStatementsPerEvent(t *testing.T) {
	for _, backend := range []dbtest.Backend{dbtest.SQLite, dbtest.Postgres} {
		t.Run(string(backend), func(t *testing.T) {
			rig := newCostRig(t, backend, &scripted{answers: []model.Response{{Text: "ok"}}})
			ctx := tenancy.System(context.Background())
			convID, err := gid.Decode(rig.conversation(t))
			require.NoError(t, err)
			tu := rig.newTurn(t, convID, 1)
			tc := rig.client.ToolCall.Create().SetTurnID(tu).SetPosition(0).SetStep(0).SetName("calculator").
				SetArguments(`{"expression": "1+1"}`).SetStartedAt(rig.now).SaveX(ctx)
			turnID := gid.Encode(tu)
			full := `subscription($t: ID!) { turnEvents(turnId: $t) { kind at turn { status answer userText } toolCall { name outcome } } }`
			bare := `subscription($t: ID!) { turnEvents(turnId: $t) { kind at turn { id status answer error finishedAt } toolCall { id } } }`
			var socks []*websocket.Conn
			var sctx context.Context
			for i := range 6 {
				q := full
				if i%2 == 1 {
					q = bare
				}
				var c *websocket.Conn
				c, sctx = subscribeQuery(t, rig.harness, rig.grant.Token, q, map[string]any{"t": turnID})
				socks = append(socks, c)
				next(t, sctx, c) // the current status
			}
			bus := rig.runner.Events()
			require.Eventually(t, func() bool { return bus.Subscribers(tu) >= 6 }, 5*time.Second, 5*time.Millisecond)
			for _, e := range []events.Event{
				{Kind: events.ModelCallStarted, Step: 0},
				// Its start is among what the subscribers read when
				// they subscribed, so never heard again: its end is.
				{Kind: events.ToolCallFinished, Step: 0, ToolCallID: tc.ID},
			} {
				e.TurnID, e.Status, e.At = tu, "RUNNING", time.Now()
				rig.stmts.reset()
				bus.Publish(e)
				for i, c := range socks {
					got := next(t, sctx, c)
					require.Equal(t, string(e.Kind), got.Kind, "subscriber %d", i)
					require.Equal(t, "RUNNING", got.Turn.Status)
					if e.ToolCallID != 0 && i%2 == 0 {
						require.Equal(t, "calculator", got.ToolCall.Name)
						require.Equal(t, "PENDING", got.ToolCall.Outcome)
					}
				}
				rig.flush()
				want := 1 // the turn's row
				if e.ToolCallID != 0 {
					want++ // and the tool call's
				}
				if backend == dbtest.Postgres {
					want++ // the event's notification to other replicas
				}
				require.Equal(t, want, rig.stmts.count(), fmt.Sprintf("%s: %s", e.Kind, rig.stmts))
			}
			// With only the bare selections left, an event of the running
			// turn reads nothing.
			for i := 0; i < len(socks); i += 2 {
				require.NoError(t, socks[i].Close(websocket.StatusNormalClosure, ""))
			}
			require.Eventually(t, func() bool { return bus.Subscribers(tu) == 3 }, 5*time.Second, 5*time.Millisecond)
			rig.stmts.reset()
			bus.Publish(events.Event{Kind: events.ModelCallStarted, Step: 1, TurnID: tu, Status: "RUNNING", At: time.Now()})
			for i := 1; i < len(socks); i += 2 {
				got := next(t, sctx, socks[i])
				require.Equal(t, string(events.ModelCallStarted), got.Kind)
				require.Equal(t, "RUNNING", got.Turn.Status)
			}
			rig.flush()
			want := 0
			if backend == dbtest.Postgres {
				want++ // the event's notification
			}
			require.Equal(t, want, rig.stmts.count(), rig.stmts.String())
			// The two events that end the turn, its answer and its status,
			// read the turn once between them.
			rig.stmts.reset()
			now := time.Now()
			bus.Publish(events.Event{Kind: events.Answer, TurnID: tu, Status: "COMPLETED", At: now})
			bus.Publish(events.Event{Kind: events.Status, TurnID: tu, Status: "COMPLETED", At: now.Add(time.Microsecond)})
			for i := 1; i < len(socks); i += 2 {
				for _, kind := range []events.Kind{events.Answer, events.Status} {
					got := next(t, sctx, socks[i])
					require.Equal(t, string(kind), got.Kind)
					require.Equal(t, "COMPLETED", got.Turn.Status)
				}
			}
			rig.flush()
			require.Equal(t, 1, rig.stmts.count()-rig.stmts.notifications(), rig.stmts.String())
		})
	}
}

// subEvent is one turnEvents message, as both selections read it.
type subEvent struct {
	Kind string `json:"kind"`
	Turn struct {
		Status string `json:"status"`
	} `json:"turn"`
	ToolCall *struct {
		Name    string `json:"name"`
		Outcome string `json:"outcome"`
	} `json:"toolCall"`
}

// next reads a subscription's next event.
func next(t *testing.T, ctx context.Context, c *websocket.Conn) subEvent {
	t.Helper()
	var m wsMessage
	rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	require.NoError(t, wsjson.Read(rctx, c, &m))
	require.Equal(t, "next", m.Type, string(m.Payload))
	var p struct {
		Data struct {
			TurnEvents subEvent `json:"turnEvents"`
		} `json:"data"`
		Errors []map[string]any `json:"errors"`
	}
	require.NoError(t, json.Unmarshal(m.Payload, &p))
	require.Empty(t, p.Errors)
	return p.Data.TurnEvents
}
