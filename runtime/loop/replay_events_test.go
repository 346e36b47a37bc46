package loop_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"entgo.io/ent/dialect"
	entsql "entgo.io/ent/dialect/sql"
	"github.com/coder/websocket"
	"github.com/coder/websocket/wsjson"
	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/db"
	"github.com/toolgate/toolgate/db/dbtest"
	"github.com/toolgate/toolgate/ent"
	"github.com/toolgate/toolgate/ent/modelcall"
	"github.com/toolgate/toolgate/ent/schematype"
	"github.com/toolgate/toolgate/ent/tenancy"
	"github.com/toolgate/toolgate/ent/turn"
	"github.com/toolgate/toolgate/graph/gid"
	"github.com/toolgate/toolgate/runtime/events"
	"github.com/toolgate/toolgate/runtime/model"
)

const eventsQuery = `subscription($t: ID!, $r: Boolean) { turnEvents(turnId: $t, replay: $r) { kind turn { status answer } toolCall { name outcome } } }`

// events opens a subscription to a turn's events, with or without replay.
func (h *harness) events(t *testing.T, turnID string, replay bool) *eventStream {
	t.Helper()
	c, ctx := subscribeQuery(t, h, h.grant.Token, eventsQuery, map[string]any{"t": turnID, "r": replay})
	return &eventStream{c: c, ctx: ctx}
}

type eventStream struct {
	c   *websocket.Conn
	ctx context.Context
}

// next reads one event as "KIND STATUS" (and the tool call's "name
// OUTCOME"), or "" at the end of the stream.
func (s *eventStream) next(t *testing.T) string {
	t.Helper()
	var m wsMessage
	require.NoError(t, wsjson.Read(s.ctx, s.c, &m))
	if m.Type == "complete" {
		return ""
	}
	require.Equal(t, "next", m.Type, string(m.Payload))
	var p struct {
		Data struct {
			TurnEvents struct {
				Kind string `json:"kind"`
				Turn struct {
					Status string  `json:"status"`
					Answer *string `json:"answer"`
				} `json:"turn"`
				ToolCall *struct {
					Name    string `json:"name"`
					Outcome string `json:"outcome"`
				} `json:"toolCall"`
			} `json:"turnEvents"`
		} `json:"data"`
		Errors []any `json:"errors"`
	}
	require.NoError(t, json.Unmarshal(m.Payload, &p))
	require.Empty(t, p.Errors)
	e := p.Data.TurnEvents
	out := e.Kind + " " + e.Turn.Status
	if e.Turn.Status != "COMPLETED" {
		require.Nil(t, e.Turn.Answer, "%s: a turn still running has no answer yet", out)
	}
	if e.ToolCall != nil {
		out += " " + e.ToolCall.Name + " " + e.ToolCall.Outcome
	}
	return out
}

// rest reads events until the stream ends.
func (s *eventStream) rest(t *testing.T) []string {
	t.Helper()
	var out []string
	for {
		e := s.next(t)
		if e == "" {
			return out
		}
		out = append(out, e)
	}
}

// wholeTurn is every event of a turn that makes one calculator call and
// answers, as a subscriber hears it from the start.
var wholeTurn = []string{
	"STATUS RUNNING",
	"MODEL_CALL_STARTED RUNNING",
	"MODEL_CALL_FINISHED RUNNING",
	"TOOL_CALL_STARTED RUNNING calculator PENDING",
	"TOOL_CALL_FINISHED RUNNING calculator HITS",
	"MODEL_CALL_STARTED RUNNING",
	"MODEL_CALL_FINISHED RUNNING",
	"ANSWER COMPLETED",
	"STATUS COMPLETED",
}

// TestTurnEventsReplay: a subscriber from the turn's start, one that joins
// while the turn's second model call is in flight, and one that joins after
// the end, each with replay, all hear the same events, each once, in
// order, each with the status it announced (never COMPLETED before the
// end, whenever it is read).
func TestTurnEventsReplay(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, d *db.DB) {
		gate := make(chan struct{})
		p := &scripted{block: gate, blockCall: 2, answers: []model.Response{
			{ToolCalls: []model.ToolCall{call("c1", "calculator", `{"expression": "6*7"}`)}},
			{Text: "42."},
		}}
		h := newHarness(t, d, p)
		id := h.send(t, h.conversation(t), "six times seven", "")
		// Joins while the turn may already be on its way: it hears the rest.
		early := h.events(t, id, true)
		require.Equal(t, "STATUS RUNNING", early.next(t))

		// Mid-turn: the tool call is done, the second model call waits.
		require.Eventually(t, func() bool { return p.count() == 2 }, 20*time.Second, 5*time.Millisecond)
		late := h.events(t, id, true)
		for _, want := range wholeTurn[:5] {
			require.Equal(t, want, late.next(t), "replayed")
		}
		close(gate)
		require.Equal(t, wholeTurn[5:], late.rest(t), "live after the replay")
		require.Equal(t, wholeTurn[1:], early.rest(t), "from the start")

		// After the end: the whole turn, then the end of the stream.
		require.Equal(t, wholeTurn, h.events(t, id, true).rest(t))
		// Without replay: where the turn stands, then the end.
		require.Equal(t, []string{"STATUS COMPLETED"}, h.events(t, id, false).rest(t))
	})
}

// TestTurnEventReplayPausedTurn: a turn that asked a question and was
// answered replays its pause and its resumption.
func TestTurnEventReplayPausedTurn(t *testing.T) {
	t.Parallel()
	p := &scripted{answers: []model.Response{
		{ToolCalls: []model.ToolCall{call("c1", "clarify", `{"question": "Which year?", "options": ["2025", "2026"]}`)}},
		{Text: "Done."},
	}}
	h := newHarness(t, dbtest.Open(t, dbtest.SQLite), p)
	id := h.send(t, h.conversation(t), "report", "")
	require.Equal(t, turn.StatusWAITING_FOR_CLARIFICATION, h.wait(t, id).Status)
	paused := []string{
		"STATUS RUNNING",
		"MODEL_CALL_STARTED RUNNING",
		"MODEL_CALL_FINISHED RUNNING",
		"TOOL_CALL_STARTED RUNNING clarify PENDING",
		"TOOL_CALL_FINISHED RUNNING clarify HITS",
		"STATUS WAITING_FOR_CLARIFICATION",
	}
	waiting := h.events(t, id, true)
	for _, want := range paused {
		require.Equal(t, want, waiting.next(t))
	}
	h.gql(t, `mutation($t: ID!) { answerClarification(input: {turnId: $t, answer: "2026"}) { id } }`, map[string]any{"t": id})
	resumed := []string{"STATUS RUNNING", "MODEL_CALL_STARTED RUNNING", "MODEL_CALL_FINISHED RUNNING", "ANSWER COMPLETED", "STATUS COMPLETED"}
	require.Equal(t, resumed, waiting.rest(t), "the answer resumes the same stream")
	require.Equal(t, append(paused, resumed...), h.events(t, id, true).rest(t), "replayed after the end")
}

// afterRead is a driver that, once armed, runs a function the moment the
// first read of a table has been scanned.
type afterRead struct {
	dialect.Driver
	table string
	armed atomic.Pointer[func()]
}

func (d *afterRead) Query(ctx context.Context, query string, args, v any) error {
	if err := d.Driver.Query(ctx, query, args, v); err != nil {
		return err
	}
	if !strings.Contains(query, "FROM `"+d.table+"`") && !strings.Contains(query, `FROM "`+d.table+`"`) {
		return nil
	}
	if f := d.armed.Swap(nil); f != nil {
		rows := v.(*entsql.Rows)
		rows.ColumnScanner = &closeHook{ColumnScanner: rows.ColumnScanner, after: *f}
	}
	return nil
}

// TestTurnEventsReplayWhileTheTurnMoves: the turn moves on while the
// replay is being read (between its read of the model calls and its read
// of the tool calls, a tool call finishes and the next model call runs).
// The finished call is both read and heard, and told once; the model call
// is only heard, and told; nothing is missing or repeated.
func TestTurnEventsReplayWhileTheTurnMoves(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, d *db.DB) {
		drv := &afterRead{Driver: d.Driver, table: "model_calls"}
		d.Driver = drv
		h := newHarness(t, d, &scripted{})
		sys := tenancy.System(context.Background())
		convID, err := gid.Decode(h.conversation(t))
		require.NoError(t, err)
		conv := h.client.Conversation.GetX(sys, convID)
		// A RUNNING turn no job runs, at its first tool call: the test plays
		// the runtime, writing first and publishing after, as it does.
		tu := h.client.Turn.Create().SetConversationID(convID).SetNumber(1).SetUserText("hi").SaveX(sys)
		modelCall := func(step int) *ent.ModelCallCreate {
			return h.client.ModelCall.Create().SetTurnID(tu.ID).SetOrganizationID(conv.OrganizationID).SetAgentID(conv.AgentID).
				SetUserID(conv.UserID).SetStep(step).SetProvider("scripted").SetModel("m").SetStartedAt(time.Now())
		}
		modelCall(0).ExecX(sys)
		tc := h.client.ToolCall.Create().SetTurnID(tu.ID).SetPosition(0).SetStep(0).SetCallID("c1").SetName("calculator").
			SetArguments(`{"expression":"1+1"}`).SetStartedAt(time.Now()).SaveX(sys)
		bus := h.runner.Events()
		publish := func(e events.Event) {
			e.TurnID, e.At = tu.ID, time.Now()
			if e.Status == "" {
				e.Status = string(turn.StatusRUNNING)
			}
			bus.Publish(e)
		}
		publish(events.Event{Kind: events.ToolCallStarted, ToolCallID: tc.ID})

		raw := ent.NewClient(ent.Driver(drv.Driver))
		move := func() {
			raw.ToolCall.UpdateOneID(tc.ID).SetOutcome(schematype.OutcomeHits).SetAttempts(1).SetFinishedAt(time.Now()).ExecX(sys)
			publish(events.Event{Kind: events.ToolCallFinished, ToolCallID: tc.ID})
			publish(events.Event{Kind: events.ModelCallStarted, Step: 1})
			require.NoError(t, raw.ModelCall.Create().SetTurnID(tu.ID).SetOrganizationID(conv.OrganizationID).SetAgentID(conv.AgentID).
				SetUserID(conv.UserID).SetStep(1).SetProvider("scripted").SetModel("m").SetStartedAt(time.Now()).Exec(sys))
			publish(events.Event{Kind: events.ModelCallFinished, Step: 1})
		}
		drv.armed.Store(&move)

		s := h.events(t, gid.Encode(tu.ID), true)
		for _, want := range wholeTurn[:7] {
			require.Equal(t, want, s.next(t))
		}
		require.Nil(t, drv.armed.Load(), "the turn moved while the replay was read")
		require.Equal(t, 2, h.client.ModelCall.Query().Where(modelcall.TurnID(tu.ID)).CountX(sys))

		answer := "2."
		h.client.Turn.UpdateOneID(tu.ID).SetStatus(turn.StatusCOMPLETED).SetAnswer(answer).SetFinishedAt(time.Now()).ExecX(sys)
		publish(events.Event{Kind: events.Answer, Status: string(turn.StatusCOMPLETED)})
		publish(events.Event{Kind: events.Status, Status: string(turn.StatusCOMPLETED)})
		require.Equal(t, wholeTurn[7:], s.rest(t))
	})
}

// TestTurnEventCarriesTheStateItAnnounces: an event read after the turn
// has ended still shows the turn as the event found it.
func TestTurnEventCarriesTheStateItAnnounces(t *testing.T) {
	t.Parallel()
	h := newHarness(t, dbtest.Open(t, dbtest.SQLite), &scripted{})
	sys := tenancy.System(context.Background())
	convID, err := gid.Decode(h.conversation(t))
	require.NoError(t, err)
	tu := h.client.Turn.Create().SetConversationID(convID).SetNumber(1).SetUserText("hi").SaveX(sys)
	s := h.events(t, gid.Encode(tu.ID), false)
	require.Equal(t, "STATUS RUNNING", s.next(t))
	// The turn ends before the subscriber reads the last model call's end.
	h.client.Turn.UpdateOneID(tu.ID).SetStatus(turn.StatusCOMPLETED).SetAnswer("done").SetFinishedAt(time.Now()).ExecX(sys)
	bus := h.runner.Events()
	for _, e := range []events.Event{
		{Kind: events.ModelCallFinished, Status: string(turn.StatusRUNNING)},
		{Kind: events.Answer, Status: string(turn.StatusCOMPLETED)},
		{Kind: events.Status, Status: string(turn.StatusCOMPLETED)},
	} {
		e.TurnID, e.At = tu.ID, time.Now()
		bus.Publish(e)
	}
	require.Equal(t, []string{"MODEL_CALL_STARTED RUNNING", "MODEL_CALL_FINISHED RUNNING", "ANSWER COMPLETED", "STATUS COMPLETED"}, s.rest(t))
}
