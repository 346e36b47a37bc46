package loop_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/coder/websocket"
	"github.com/coder/websocket/wsjson"
	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/db"
	"github.com/toolgate/toolgate/ent/turn"
	"github.com/toolgate/toolgate/graph/gid"
	"github.com/toolgate/toolgate/runtime/model"
)

const seqQuery = `subscription($t: ID!, $r: Boolean, $a: String) { turnEvents(turnId: $t, replay: $r, after: $a) {
  kind seq step turn { status } toolCall { name } } }`

// seqEvent is one event as a client compares it: its kind, seq, step,
// the turn's status as of it and its tool call's name.
type seqEvent struct {
	kind, seq, status, tool string
	step                    int
}

func (e seqEvent) String() string {
	return fmt.Sprintf("%d %s %s %s %s", e.step, e.kind, e.status, e.tool, e.seq)
}

// seqStream is a subscription read event by event.
type seqStream struct {
	c   *websocket.Conn
	ctx context.Context
}

// follow subscribes from the start (replay) or after a seq.
func (h *harness) follow(t *testing.T, turnID string, after string) *seqStream {
	t.Helper()
	vars := map[string]any{"t": turnID, "r": true}
	if after != "" {
		vars["a"] = after
	}
	c, ctx := subscribeQuery(t, h, h.grant.Token, seqQuery, vars)
	return &seqStream{c: c, ctx: ctx}
}

// next reads one event; ok is false at the end of the stream.
func (s *seqStream) next(t *testing.T) (seqEvent, bool) {
	t.Helper()
	var m wsMessage
	require.NoError(t, wsjson.Read(s.ctx, s.c, &m))
	if m.Type == "complete" {
		return seqEvent{}, false
	}
	require.Equal(t, "next", m.Type, string(m.Payload))
	var p struct {
		Data struct {
			TurnEvents struct {
				Kind string `json:"kind"`
				Seq  string `json:"seq"`
				Step int    `json:"step"`
				Turn struct {
					Status string `json:"status"`
				} `json:"turn"`
				ToolCall *struct {
					Name string `json:"name"`
				} `json:"toolCall"`
			} `json:"turnEvents"`
		} `json:"data"`
		Errors []any `json:"errors"`
	}
	require.NoError(t, json.Unmarshal(m.Payload, &p))
	require.Empty(t, p.Errors)
	e := p.Data.TurnEvents
	out := seqEvent{kind: e.Kind, seq: e.Seq, status: e.Turn.Status, step: e.Step}
	if e.ToolCall != nil {
		out.tool = e.ToolCall.Name
	}
	return out, true
}

// take reads n events.
func (s *seqStream) take(t *testing.T, n int) []seqEvent {
	t.Helper()
	out := make([]seqEvent, 0, n)
	for range n {
		e, ok := s.next(t)
		require.True(t, ok, "the stream ended after %d of %d events", len(out), n)
		out = append(out, e)
	}
	return out
}

// rest reads events until the stream ends.
func (s *seqStream) rest(t *testing.T) []seqEvent {
	t.Helper()
	var out []seqEvent
	for {
		e, ok := s.next(t)
		if !ok {
			return out
		}
		out = append(out, e)
	}
}

// until reads events up to and including the first of kind (and, when
// given, announcing status).
func (s *seqStream) until(t *testing.T, kind string, status ...string) []seqEvent {
	t.Helper()
	var out []seqEvent
	for {
		e, ok := s.next(t)
		require.True(t, ok, "the stream ended before %s: %v", kind, out)
		out = append(out, e)
		if e.kind == kind && (len(status) == 0 || e.status == status[0]) {
			return out
		}
	}
}

func strs(es []seqEvent) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.String()
	}
	return out
}

// sameAtEveryCut checks that the stream rebuilt from storage, from the
// start (replay) and after each event's seq, tells exactly what the live
// subscriber was told after it: the same events, kinds, order and seqs.
// With ended, each rebuilt stream must end there too; else each is read
// as far as live goes.
func sameAtEveryCut(t *testing.T, h *harness, turnID string, live []seqEvent, ended bool) {
	t.Helper()
	for i := -1; i < len(live); i++ {
		after, want := "", live[i+1:]
		if i >= 0 {
			after = live[i].seq
		}
		if !ended && len(want) == 0 {
			continue
		}
		s := h.follow(t, turnID, after)
		var got []seqEvent
		if ended {
			got = s.rest(t)
		} else {
			got = s.take(t, len(want))
		}
		require.Equal(t, strs(want), strs(got), "rebuilt after event %d (%s)", i, after)
		_ = s.c.CloseNow()
	}
}

func kindsOf(es []seqEvent) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = fmt.Sprintf("%d %s %s %s", e.step, e.kind, e.status, e.tool)
	}
	return out
}

// approvalBatch is a turn whose first model answer writes a file, asks
// for a refund (gated) and reads the file back (the read waits for the
// write, so the two run in one order), then answers.
func approvalBatch(first ...model.ToolCall) *scripted {
	calls := append(first,
		call("w", "write_file", `{"files": [{"path": "memo.md", "content": "refund A1"}]}`),
		call("r", "shop__refund", `{"orders": "A1", "amount": 12.5}`),
		call("f", "read_file", `{"path": "memo.md"}`))
	return &scripted{answers: []model.Response{{ToolCalls: calls}, {Text: "Refunded."}}}
}

// TestApprovalEventsRebuilt: a subscriber that follows an approval turn
// live from its start (a batch of three with one gated call, the pause,
// the decision, the approved call, the answer) and one that joins late
// or comes back after any event it read get the same events with the
// same seqs, while the turn waits and after it ended.
func TestApprovalEventsRebuilt(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, d *db.DB) {
		p := approvalBatch()
		gate := make(chan struct{})
		p.block, p.blockCall = gate, 1
		h := newHarness(t, d, p)
		s := newShop(t)
		h.gql(t, `mutation($u: String!) { registerApplication(input: {name: "shop", url: $u, allowedTools: ["refund"], defaultApproval: WRITES}) { id } }`,
			map[string]any{"u": s.url})
		id := h.send(t, h.conversation(t, "shop__refund", "write_file", "read_file"), "Refund order A1", "")
		live := h.follow(t, id, "")
		got := live.take(t, 1)
		close(gate)
		got = append(got, live.until(t, "APPROVAL_REQUESTED")...)
		require.Equal(t, turn.StatusWAITING_FOR_APPROVAL, h.wait(t, id).Status)
		waiting := []string{
			"0 STATUS RUNNING ",
			"0 MODEL_CALL_STARTED RUNNING ",
			"0 MODEL_CALL_FINISHED RUNNING ",
			"0 TOOL_CALL_STARTED RUNNING write_file",
			"0 TOOL_CALL_FINISHED RUNNING write_file",
			"0 TOOL_CALL_STARTED RUNNING read_file",
			"0 TOOL_CALL_FINISHED RUNNING read_file",
			"0 STATUS WAITING_FOR_APPROVAL ",
			"0 APPROVAL_REQUESTED WAITING_FOR_APPROVAL shop__refund",
		}
		require.Equal(t, waiting, kindsOf(got))
		sameAtEveryCut(t, h, id, got, false)

		refund := h.calls(t, id)[1]
		_, errs := h.decide(t, h.grant.Token, id, []map[string]any{{"toolCallId": gid.Encode(refund.ID), "decision": "APPROVE"}})
		require.Empty(t, errs)
		got = append(got, live.rest(t)...)
		require.Equal(t, append(waiting,
			"0 APPROVAL_DECIDED WAITING_FOR_APPROVAL shop__refund",
			"0 STATUS RUNNING ",
			"0 TOOL_CALL_STARTED RUNNING shop__refund",
			"0 TOOL_CALL_FINISHED RUNNING shop__refund",
			"1 MODEL_CALL_STARTED RUNNING ",
			"1 MODEL_CALL_FINISHED RUNNING ",
			"1 ANSWER COMPLETED ",
			"1 STATUS COMPLETED ",
		), kindsOf(got))
		sameAtEveryCut(t, h, id, got, true)
	})
}

// TestApprovalWithAQuestion: a batch that asks the person a question and
// makes a call that needs approval pauses the turn once. The approvals
// come first (the question is stored with them, and an answer before the
// decisions is refused, saying why); once every call is decided the turn
// waits for the answer; with both, it runs the approved call and goes on.
// Live and rebuilt streams tell the same events at every point.
func TestApprovalWithAQuestion(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, d *db.DB) {
		gate := make(chan struct{})
		p := &scripted{block: gate, blockCall: 1, answers: []model.Response{{ToolCalls: []model.ToolCall{
			call("q", "clarify", `{"question": "Which card?", "options": ["Visa", "Amex"]}`),
			call("r", "shop__refund", `{"orders": "A1", "amount": 12.5}`),
		}}, {Text: "Refunded to the Visa."}}}
		h := newHarness(t, d, p)
		s := newShop(t)
		h.gql(t, `mutation($u: String!) { registerApplication(input: {name: "shop", url: $u, allowedTools: ["refund"], defaultApproval: WRITES}) { id } }`,
			map[string]any{"u": s.url})
		id := h.send(t, h.conversation(t, "shop__refund"), "Refund order A1", "")
		live := h.follow(t, id, "")
		got := live.take(t, 1)
		close(gate)
		got = append(got, live.until(t, "APPROVAL_REQUESTED")...)
		require.Equal(t, turn.StatusWAITING_FOR_APPROVAL, h.wait(t, id).Status)
		paused := []string{
			"0 STATUS RUNNING ",
			"0 MODEL_CALL_STARTED RUNNING ",
			"0 MODEL_CALL_FINISHED RUNNING ",
			"0 TOOL_CALL_STARTED RUNNING clarify",
			"0 TOOL_CALL_FINISHED RUNNING clarify",
			"0 STATUS WAITING_FOR_APPROVAL ",
			"0 APPROVAL_REQUESTED WAITING_FOR_APPROVAL shop__refund",
		}
		require.Equal(t, paused, kindsOf(got))
		sameAtEveryCut(t, h, id, got, false)
		q := h.gql(t, `query($id: ID!) { node(id: $id) { ... on Turn { status clarification { question answer } pendingApprovals { name } } } }`,
			map[string]any{"id": id})
		require.Equal(t, "Which card?", dig(q, "node", "clarification", "question"), "the question is shown with the approvals")
		require.Len(t, dig(q, "node", "pendingApprovals"), 1)
		answer := `mutation($t: ID!, $a: String!) { answerClarification(input: {turnId: $t, answer: $a}) { status } }`
		_, errs := h.try(t, answer, map[string]any{"t": id, "a": "Visa"})
		require.Len(t, errs, 1)
		require.Contains(t, errs[0].(map[string]any)["message"], "decisions on its pending calls first")

		refund := h.calls(t, id)[1]
		_, errs = h.decide(t, h.grant.Token, id, []map[string]any{{"toolCallId": gid.Encode(refund.ID), "decision": "APPROVE"}})
		require.Empty(t, errs)
		got = append(got, live.until(t, "STATUS", "WAITING_FOR_CLARIFICATION")...)
		asked := append(paused,
			"0 APPROVAL_DECIDED WAITING_FOR_APPROVAL shop__refund",
			"0 STATUS WAITING_FOR_CLARIFICATION ")
		require.Equal(t, asked, kindsOf(got))
		require.Equal(t, turn.StatusWAITING_FOR_CLARIFICATION, h.wait(t, id).Status)
		require.Empty(t, s.sent(), "approved, but nothing runs before the question is answered")
		require.Equal(t, 1, p.count())
		sameAtEveryCut(t, h, id, got, false)

		h.gql(t, answer, map[string]any{"t": id, "a": "Visa"})
		got = append(got, live.rest(t)...)
		require.Equal(t, append(asked,
			"0 STATUS RUNNING ",
			"0 TOOL_CALL_STARTED RUNNING shop__refund",
			"0 TOOL_CALL_FINISHED RUNNING shop__refund",
			"1 MODEL_CALL_STARTED RUNNING ",
			"1 MODEL_CALL_FINISHED RUNNING ",
			"1 ANSWER COMPLETED ",
			"1 STATUS COMPLETED ",
		), kindsOf(got))
		sameAtEveryCut(t, h, id, got, true)
		require.Len(t, s.sent(), 1, "run once")
		require.Equal(t, 2, p.count(), "the model is asked again once, with both answered")
		require.Equal(t, "The user answered: Visa", lastToolOf(p.request(1), "q").Text)
		require.Contains(t, lastToolOf(p.request(1), "r").Text, "refunded")
	})
}

// TestApprovalEventsRebuiltConcurrentCalls: calls of one batch that run at
// once (a lookup and a calculation) may be told live in either order; a
// stream rebuilt after any event tells them in the model's order, but
// still each event once and none missed.
func TestApprovalEventsRebuiltConcurrentCalls(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, d *db.DB) {
		p := batchOfThree(model.Response{Text: "Refunded."})
		gate := make(chan struct{})
		p.block, p.blockCall = gate, 1
		h := newHarness(t, d, p)
		s := newShop(t)
		h.gql(t, `mutation($u: String!) { registerApplication(input: {name: "shop", url: $u, allowedTools: ["lookup", "refund"], defaultApproval: WRITES}) { id } }`,
			map[string]any{"u": s.url})
		id := h.send(t, h.conversation(t, "shop__lookup", "shop__refund"), "Refund order A1", "")
		live := h.follow(t, id, "")
		got := live.take(t, 1)
		close(gate)
		got = append(got, live.until(t, "APPROVAL_REQUESTED")...)
		require.Equal(t, turn.StatusWAITING_FOR_APPROVAL, h.wait(t, id).Status)
		_, errs := h.decide(t, h.grant.Token, id, []map[string]any{{"toolCallId": gid.Encode(h.calls(t, id)[1].ID), "decision": "APPROVE"}})
		require.Empty(t, errs)
		got = append(got, live.rest(t)...)
		require.Len(t, got, 17)
		for i := -1; i < len(got); i++ {
			after := ""
			if i >= 0 {
				after = got[i].seq
			}
			rebuilt := h.follow(t, id, after).rest(t)
			require.ElementsMatch(t, kindsOf(got[i+1:]), kindsOf(rebuilt), "after event %d: each once, none missed", i)
		}
	})
}
