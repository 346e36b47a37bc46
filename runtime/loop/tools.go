package loop

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/toolgate/toolgate/ent"
	"github.com/toolgate/toolgate/ent/schematype"
	"github.com/toolgate/toolgate/ent/turn"
	"github.com/toolgate/toolgate/runtime/batch"
	"github.com/toolgate/toolgate/runtime/dispatch"
	"github.com/toolgate/toolgate/runtime/events"
	"github.com/toolgate/toolgate/runtime/guard"
	"github.com/toolgate/toolgate/runtime/model"
	"github.com/toolgate/toolgate/runtime/prompt"
	"github.com/toolgate/toolgate/runtime/retry"
	"github.com/toolgate/toolgate/runtime/scope"
	"github.com/toolgate/toolgate/runtime/store"
	"github.com/toolgate/toolgate/tools"
)

// interrupted is what a call cut off by a stop is recorded as.
const interrupted = "interrupted: the runtime stopped while this call was in flight"

// runTools carries out one step's recorded calls, at most Concurrency at
// a time and in the order their resources need (batch.Plan), and appends
// what the model hears. A resumed run (resumed) finishes a step a stopped
// run left: calls already recorded are heard as they were, a call left in
// flight is sent again only when that is safe (a read, or a write with its
// idempotency key), and otherwise recorded as one that may or may not have
// run. It reports whether the turn now waits for the user.
func (t *turnRun) runTools(ctx context.Context, step int, rows []*ent.ToolCall, resumed bool) (bool, error) {
	s, err := t.toolScope()
	if err != nil {
		return false, err
	}
	// While the batch runs, the API of this process takes its token without
	// reading the turn (Runner.Vouches).
	defer t.r.vouchCalls(t.turnID, t.conv.ID, t.conv.UserID, t.userActiveAt)()
	sc, todo := t.stepCalls(rows)
	// Calls that need a person's approval wait; the others run.
	t.notes = map[int]string{}
	todo, acts, waiting, err := t.gate(ctx, s, rows, sc.calls, sc.defs, todo, resumed)
	if err != nil {
		return false, err
	}
	batch.Run(batch.Plan(pick(sc.defs, todo)), t.r.cfg.Concurrency, func(k int) {
		t.runCall(ctx, s, sc, todo[k], acts[todo[k]], resumed)
	})
	if err := errors.Join(sc.errs...); err != nil {
		return false, err
	}
	if len(waiting) > 0 {
		// The calls that ran as they were recorded (a question among them
		// is stored with the pause); the calls waiting stay PENDING.
		for _, i := range todo {
			sc.settle(i)
		}
		return true, t.pauseForApproval(ctx, rows, waiting)
	}
	// From here on every reader of the calls' arguments (the next model
	// call, the pause, a resume rebuilding this turn) reads them as repaired
	// and sent, never as the model first wrote them.
	t.repaired(sc.calls, sc.sent)
	seesImages := model.TakesImages(t.r.cfg.Provider, t.req.Model)
	for i, c := range sc.calls {
		m := model.Message{Role: model.RoleTool, ToolCallID: c.ID, ToolName: c.Name, Text: sc.heard[i], IsError: sc.failed[i]}
		if seesImages {
			m.Images = sc.images[i]
		}
		t.req.Messages = append(t.req.Messages, m)
		sc.settle(i)
		if !sc.failed[i] {
			t.readDefinitions(c.Name, sc.heard[i])
		}
	}
	// A question asked with calls that waited for approval was stored with
	// the approvals' pause, and answered before this run: no pause again.
	if !resumed && t.pausing(rows) >= 0 || resumed && t.unanswered(rows) {
		if err := t.pause(ctx, rows); err != nil {
			return false, err
		}
		return true, nil
	}
	return false, ctx.Err()
}

// toolScope is the scope the step's calls run in, with its token.
func (t *turnRun) toolScope() (dispatch.Scope, error) {
	token, err := t.r.cfg.Signer.Mint(scope.Claims{
		OrganizationID: t.conv.OrganizationID, UserID: t.conv.UserID, AgentID: t.conv.AgentID,
		ConversationID: t.conv.ID, TurnID: t.turnID, Tools: names(t.offered),
	})
	if err != nil {
		return dispatch.Scope{}, fmt.Errorf("mint scope token: %w", err)
	}
	s := dispatch.Scope{TurnID: t.turnID, ConversationID: t.conv.ID, Token: token, Offered: t.byName, Deferred: t.deferred, Apps: t.apps}
	if t.r.cfg.EncodeID != nil {
		s.ConversationRef = t.r.cfg.EncodeID(t.conv.ID)
	}
	return s, nil
}

// stepCalls is what a step's calls are and gave, by call: each call's
// goroutine writes its own index only.
type stepCalls struct {
	rows   []*ent.ToolCall
	calls  []model.ToolCall
	defs   []tools.Definition
	heard  []string
	images [][]model.Image
	failed []bool
	// sent are the arguments as repaired and sent.
	sent []json.RawMessage
	errs []error
}

// stepCalls reads a step's recorded calls: those recorded already are
// heard as they were; it returns the others' indexes, to run.
func (t *turnRun) stepCalls(rows []*ent.ToolCall) (*stepCalls, []int) {
	n := len(rows)
	sc := &stepCalls{rows: rows, calls: make([]model.ToolCall, n), defs: make([]tools.Definition, n), heard: make([]string, n),
		images: make([][]model.Image, n), failed: make([]bool, n), sent: make([]json.RawMessage, n), errs: make([]error, n)}
	var todo []int
	for i, row := range rows {
		sc.calls[i] = model.ToolCall{ID: prompt.CallID(row), Name: row.Name, Arguments: []byte(row.Arguments)}
		sc.defs[i] = t.byName[row.Name]
		if row.Outcome != schematype.OutcomePending {
			if row.Heard != nil {
				sc.heard[i] = *row.Heard
			}
			sc.failed[i] = !row.Outcome.Succeeded()
			continue
		}
		todo = append(todo, i)
	}
	return sc, todo
}

// settle puts call i's row as it ran: its arguments as sent, and a
// success for one that was pending.
func (sc *stepCalls) settle(i int) {
	if len(sc.sent[i]) > 0 {
		sc.rows[i].Arguments = string(sc.sent[i])
	}
	if !sc.failed[i] && sc.rows[i].Outcome == schematype.OutcomePending {
		sc.rows[i].Outcome = schematype.OutcomeHits
	}
}

// runCall carries out call i of the step, or records what a decision or
// a stop made of it.
func (t *turnRun) runCall(ctx context.Context, s dispatch.Scope, sc *stepCalls, i int, act approvalAct, resumed bool) {
	row, call := sc.rows[i], sc.calls[i]
	ctx, span := t.startToolCall(ctx, row)
	defer span.End()
	t.publish(events.Event{Kind: events.ToolCallStarted, ToolCallID: row.ID, Step: row.Step, Status: string(turn.StatusRUNNING), Decided: act.decided})
	if act.declined != nil {
		sc.heard[i], sc.failed[i], sc.errs[i] = t.record(ctx, row, call, *act.declined)
		sc.sent[i] = act.declined.Arguments
	} else if resumed && !act.fresh && !retry.Repeatable(sc.defs[i].Effect) {
		// It may have reached its backend before the stop: never again.
		res := dispatch.Result{Outcome: schematype.OutcomeMayHaveRun, Message: interrupted, Attempts: 1, Reached: true,
			Arguments: json.RawMessage(row.Arguments)}
		sc.heard[i], sc.failed[i], sc.errs[i] = t.record(ctx, row, call, res)
		sc.sent[i] = res.Arguments
	} else {
		sc.heard[i], sc.failed[i], sc.sent[i], sc.images[i], sc.errs[i] = t.runTool(ctx, s, row, call)
	}
	t.publish(events.Event{Kind: events.ToolCallFinished, ToolCallID: row.ID, Step: row.Step, Status: string(turn.StatusRUNNING), Decided: act.decided})
}

// pick returns the definitions at the given indexes.
func pick(defs []tools.Definition, idx []int) []tools.Definition {
	out := make([]tools.Definition, len(idx))
	for k, i := range idx {
		out[k] = defs[i]
	}
	return out
}

// repaired puts the arguments as sent in place of the model's own in the
// answer that asked for calls, the turn's last assistant message: the
// model's next call then reads what a resumed turn reads from the store.
func (t *turnRun) repaired(calls []model.ToolCall, sent []json.RawMessage) {
	for i := len(t.req.Messages) - 1; i >= 0; i-- {
		m := &t.req.Messages[i]
		if m.Role != model.RoleAssistant {
			continue
		}
		m.ToolCalls = slices.Clone(m.ToolCalls)
		for j := range m.ToolCalls {
			if j < len(calls) && m.ToolCalls[j].ID == calls[j].ID && len(sent[j]) > 0 {
				m.ToolCalls[j].Arguments = sent[j]
			}
		}
		return
	}
}

// runTool carries out one call and records it. It returns what the model
// hears, whether the call failed, the arguments as repaired and sent, and
// the images of a result of non-text media.
// A call cut by the end of a drain, or by the loss of the turn, is not
// recorded: whoever resumes the turn settles it.
func (t *turnRun) runTool(ctx context.Context, s dispatch.Scope, row *ent.ToolCall, c model.ToolCall) (string, bool, json.RawMessage, []model.Image, error) {
	res := t.r.cfg.Dispatcher.Do(ctx, s, dispatch.Call{ID: c.ID, Name: c.Name, Arguments: c.Arguments})
	if cause := context.Cause(ctx); errors.Is(cause, errStopped) || errors.Is(cause, errLeaseLost) {
		return "", false, nil, nil, cause
	}
	heard, failed, err := t.record(ctx, row, c, res)
	return heard, failed, res.Arguments, dispatch.Images(res), err
}

// record stores the call's result and what the model hears (prepare), in
// the store's batched records (store.Turn.RecordCall).
func (t *turnRun) record(ctx context.Context, row *ent.ToolCall, c model.ToolCall, res dispatch.Result) (string, bool, error) {
	t.traceToolCall(ctx, res)
	def := t.byName[c.Name]
	if def.Grounds() == tools.EvidenceWindows {
		var err error
		if res.Evidence, err = t.r.store.WindowsShown(ctx, t.conv.ID, res.Evidence); err != nil {
			return "", false, err
		}
	}
	rec, err := t.prepare(row, def, res)
	if err != nil {
		return "", false, err
	}
	stored, err := t.db.RecordCall(ctx, rec)
	if err != nil {
		return "", false, err
	}
	t.r.meter.ToolCall(t.r.toolLabel(c.Name), string(res.Outcome), res.Attempts, stored)
	failed := !res.Outcome.Succeeded()
	return rec.Heard, failed, nil
}

// prepare builds a call's record: the result stored under a new ref, what
// the model hears of it, and the evidence it gives.
func (t *turnRun) prepare(row *ent.ToolCall, def tools.Definition, res dispatch.Result) (store.CallRecord, error) {
	rec := store.CallRecord{ID: row.ID, ConversationID: t.conv.ID, Arguments: string(res.Arguments),
		Outcome: res.Outcome, Attempts: res.Attempts, Failures: res.Failures, Repairs: res.Repairs,
		Message: res.Message}
	// Every outcome is stored under a ref, so read_tool_result and the
	// transcript can reopen any call: a result whole, and for a refusal,
	// an error, an outage or a call that may have run, what the model was
	// told of it.
	ref, err := store.NewRef()
	if err != nil {
		return rec, err
	}
	rec.Ref = ref
	rec.Result = store.Result{Kind: res.Kind, Content: res.Content, TruncatedAtSource: res.TruncatedAtSource}
	if !res.Outcome.Succeeded() {
		told, err := dispatch.Render(res, def, ref, false)
		if err != nil {
			return rec, err
		}
		rec.Result = store.Result{Kind: schematype.KindText, Content: []byte(told.Text)}
	}
	// Later turns replay arguments cut (prompt.CapArguments): keep them
	// whole under a ref of their own, so the line beside the cut can name
	// where to read them.
	if _, cuts := prompt.CapArguments(string(res.Arguments)); len(cuts) > 0 {
		if rec.ArgumentsRef, err = store.NewRef(); err != nil {
			return rec, err
		}
	}
	h, err := dispatch.Render(res, def, ref, res.TruncatedAtSource)
	if err != nil {
		return rec, err
	}
	// Instruction-like text in what the model hears is marked where it
	// stands and recorded on the call; the backend's scope checks stay the
	// defence.
	if why := guard.Check(h.Text); why != "" {
		rec.Guardrail = why
		h.Text = guard.Line(why) + "\n" + h.Text
	}
	if note := t.notes[row.ID]; note != "" {
		h.Text = note + "\n" + h.Text
	}
	// Evidence: only previews and returned windows of content count, as
	// the definition says (tools.Evidence). A window read counts the
	// windows it names of results that are evidence themselves (record
	// kept only those), never its own text; any other tool what the model
	// saw of its successful result. An acknowledgement (a write's receipt,
	// the task list, suggestions, clarify), a skill's instructions and a
	// listing count for nothing; failed reads and saved write inputs show
	// nothing.
	switch def.Grounds() {
	case tools.EvidenceWindows:
		rec.Evidence = append(rec.Evidence, res.Evidence...)
	case tools.EvidenceShown:
		if res.Outcome == schematype.OutcomeHits {
			for _, v := range h.Visible {
				rec.Evidence = append(rec.Evidence, schematype.Span{Ref: ref, Start: v.Start, End: v.End})
			}
		}
	}
	rec.Heard = h.Text
	return rec, nil
}
