package events

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/toolgate/toolgate/ent"
	"github.com/toolgate/toolgate/ent/approval"
	"github.com/toolgate/toolgate/ent/modelcall"
	"github.com/toolgate/toolgate/ent/schematype"
	"github.com/toolgate/toolgate/ent/toolcall"
	"github.com/toolgate/toolgate/ent/turn"
	"github.com/toolgate/toolgate/tools"
)

// A turn's events rebuilt from what is stored, at the places a live
// subscriber was told them: a client that joins late, or resumes after a
// drop on another replica, is told what it missed by Replay, and what it
// hears live falls after by Place.

// A turn's events fall in phases within each step, in the order they
// happen: a subscriber's place (its seq) is the step, the phase and the
// place within the phase.
const (
	PhaseStart    = iota // the turn's start
	PhaseModel           // MODEL_CALL_STARTED
	PhaseText            // TEXT_DELTA, TOOL_CALL_WRITING
	PhaseRecorded        // MODEL_CALL_FINISHED
	PhaseTools           // TOOL_CALL_STARTED, TOOL_CALL_FINISHED
	PhaseWaiting         // STATUS of a pause
	PhaseResumed         // STATUS RUNNING again: the pause was answered
	PhaseAnswer          // ANSWER
	PhaseEnd             // STATUS of the end
)

// Place is where an event falls: its step and phase. The answer and the
// end fall in the step the subscriber is at: they come last.
func Place(kind Kind, step int, status string) (int, int) {
	switch kind {
	case ModelCallStarted:
		return step, PhaseModel
	case TextDelta, ToolCallWriting:
		return step, PhaseText
	case ModelCallFinished:
		return step, PhaseRecorded
	case ToolCallStarted, ToolCallFinished:
		return step, PhaseTools
	case ApprovalRequested, ApprovalDecided:
		return step, PhaseWaiting
	case Answer:
		return -1, PhaseAnswer
	case Status:
		switch {
		case Ended(turn.Status(status)):
			return -1, PhaseEnd
		case status == string(turn.StatusRUNNING):
			return step, PhaseResumed
		default:
			return step, PhaseWaiting
		}
	}
	return step, PhaseEnd
}

// PlaceEvent is Place for an event heard live: the calls run after a
// person's decision are told after the turn's return to RUNNING.
func PlaceEvent(e Event) (int, int) {
	if e.Decided {
		return e.Step, PhaseResumed
	}
	return Place(e.Kind, e.Step, e.Status)
}

// Ended reports whether a turn in status s is over.
func Ended(s turn.Status) bool {
	return s == turn.StatusCOMPLETED || s == turn.StatusFAILED || s == turn.StatusCANCELLED
}

// WritingsOf is how step's tool calls were told while the model wrote
// them: one a call, in the order it wrote them (calls are in position
// order).
func WritingsOf(calls []*ent.ToolCall, step int) []Writing {
	var out []Writing
	for _, c := range calls {
		if c.Step == step {
			out = append(out, Writing{Index: len(out), Name: c.Name})
		}
	}
	return out
}

// Past is an event rebuilt from what is stored, with where it falls; or,
// with Text set (and Kind empty), a step's text as recorded.
type Past struct {
	Kind Kind
	// Status is the turn's as of the event; At when it happened.
	Status turn.Status
	At     time.Time
	// Call is the tool call the event is of, or nil.
	Call                    *ent.ToolCall
	Step, Phase, ToolCallID int
	Text                    *string
	// Calls are the tool calls the step's model wrote, told after its
	// text as they were told live.
	Calls []Writing
}

// Replay rebuilds a turn's events so far from what client has stored (pauses
// says which tools pause a turn; now is when a status not yet told is): its
// start, each step's model call (and, for deltas, its text) and tool
// calls, each pause (for a question, or for decisions on calls that need
// approval: the calls asked about, each decision, the question asked with
// them, the calls run after) and its end, in the order and at the places
// a live subscriber was told them. A model call in flight is not stored
// yet: its start is told with its end. Calls of one batch that ran at once
// are told in the model's order (how they interleaved is not stored); the
// seqs still tell what was told, so a resumed stream misses none and
// repeats none.
func Replay(ctx context.Context, client *ent.Client, t *ent.Turn, deltas bool, pauses func(name string) bool, now time.Time) ([]Past, error) {
	// Tool calls first: a step's model call and its tool calls are stored
	// in one transaction, so every tool call read here has its model call
	// in the next read (read the other way round, a step stored in
	// between would show its tool calls without their model call, and the
	// model call would then be heard live after them). Approvals last:
	// each is stored after its call, and decided before its call runs.
	calls, err := client.ToolCall.Query().Where(toolcall.TurnID(t.ID)).
		Order(ent.Asc(toolcall.FieldPosition)).All(ctx)
	if err != nil {
		return nil, fmt.Errorf("load tool calls: %w", err)
	}
	mcs, err := client.ModelCall.Query().
		Where(modelcall.TurnID(t.ID), modelcall.KindEQ(modelcall.KindSTEP)).
		Order(ent.Asc(modelcall.FieldStep)).All(ctx)
	if err != nil {
		return nil, fmt.Errorf("load model calls: %w", err)
	}
	approvals := map[int]*ent.Approval{}
	if len(calls) > 0 {
		as, err := client.Approval.Query().Where(approval.TurnID(t.ID)).All(ctx)
		if err != nil {
			return nil, fmt.Errorf("load approvals: %w", err)
		}
		for _, a := range as {
			approvals[a.ToolCallID] = a
		}
	}
	var out []Past
	last := 0
	addAt := func(kind Kind, step, phase int, call *ent.ToolCall, status turn.Status, at time.Time) {
		id := 0
		if call != nil {
			id = call.ID
		}
		s, p := Place(kind, step, string(status))
		if phase >= 0 {
			p = phase
		}
		if s < 0 {
			s = last
		}
		last = max(last, s)
		out = append(out, Past{Kind: kind, Status: status, At: at, Call: call, Step: s, Phase: p, ToolCallID: id})
	}
	add := func(kind Kind, step int, call *ent.ToolCall, status turn.Status, at time.Time) {
		addAt(kind, step, -1, call, status, at)
	}
	// A call's own events, at phase: its start once it is stored (or, for a
	// call decided on, once it was taken up), its end once recorded.
	callEvents := func(c *ent.ToolCall, phase int, taken bool) {
		if c.Outcome == schematype.OutcomePending && !taken {
			return
		}
		addAt(ToolCallStarted, c.Step, phase, c, turn.StatusRUNNING, c.StartedAt)
		if c.Outcome != schematype.OutcomePending && c.FinishedAt != nil {
			addAt(ToolCallFinished, c.Step, phase, c, turn.StatusRUNNING, *c.FinishedAt)
		}
	}
	add(Status, 0, nil, turn.StatusRUNNING, t.StartedAt)
	// The start: never published, so never heard.
	out[0].Phase = PhaseStart

	steps := 0
	for _, mc := range mcs {
		steps = max(steps, mc.Step+1)
	}
	for _, c := range calls {
		steps = max(steps, c.Step+1)
	}
	later := func(step int) bool {
		return slices.ContainsFunc(mcs, func(mc *ent.ModelCall) bool { return mc.Step > step })
	}
	resumedAt := func(step int, at time.Time) time.Time {
		if i := slices.IndexFunc(mcs, func(mc *ent.ModelCall) bool { return mc.Step > step }); i >= 0 {
			return mcs[i].StartedAt
		}
		if t.HeartbeatAt != nil {
			return *t.HeartbeatAt
		}
		return at
	}
	status := turn.StatusRUNNING
	for step := range steps {
		if i := slices.IndexFunc(mcs, func(mc *ent.ModelCall) bool { return mc.Step == step }); i >= 0 {
			mc := mcs[i]
			add(ModelCallStarted, step, nil, turn.StatusRUNNING, mc.StartedAt)
			if deltas {
				out = append(out, Past{Step: step, Phase: PhaseText, Text: &mc.Text, Calls: WritingsOf(calls, step)})
			}
			add(ModelCallFinished, step, nil, turn.StatusRUNNING, mc.StartedAt.Add(time.Duration(mc.DurationMs)*time.Millisecond))
		}
		var own, gated []*ent.ToolCall
		for _, c := range calls {
			switch {
			case c.Step != step:
			case approvals[c.ID] != nil:
				gated = append(gated, c)
			default:
				own = append(own, c)
			}
		}
		for _, c := range own {
			callEvents(c, PhaseTools, true)
		}
		var pause *ent.ToolCall
		if i := tools.Asking(own, pauses); i >= 0 && own[i].FinishedAt != nil {
			pause = own[i]
		}
		if len(gated) > 0 {
			status = replayApprovals(t, step, gated, approvals, pause, later(step), addAt, callEvents, resumedAt, status)
			continue
		}
		if pause == nil {
			continue
		}
		// A pause is told once it is stored: the turn waits now, or went on.
		answered := t.Status == turn.StatusRUNNING && tools.Answered(t.Clarification, pause)
		if t.Status == turn.StatusWAITING_FOR_CLARIFICATION || later(step) || Ended(t.Status) || answered {
			add(Status, step, nil, turn.StatusWAITING_FOR_CLARIFICATION, *pause.FinishedAt)
			status = turn.StatusWAITING_FOR_CLARIFICATION
		}
		if later(step) || answered {
			add(Status, step, nil, turn.StatusRUNNING, resumedAt(step, *pause.FinishedAt))
			status = turn.StatusRUNNING
		}
	}
	if Ended(t.Status) {
		at := t.StartedAt
		if t.FinishedAt != nil {
			at = *t.FinishedAt
		}
		if t.Answer != nil {
			add(Answer, 0, nil, t.Status, at)
		}
		add(Status, 0, nil, t.Status, at)
	} else if status != t.Status {
		add(Status, max(steps-1, 0), nil, t.Status, now)
	}
	return out, nil
}

// replayApprovals rebuilds the pause of a step whose calls waited for
// approval (gated, in the model's order), as the runtime and
// decideToolCalls told it: the pause, each call asked about, each
// decision in the order stored; once every call is decided, the question
// asked in the same batch (pause, when there is one) and its answer, or
// else the turn's return to RUNNING; then the decided calls' own
// It returns the turn's status as of the last event told.
func replayApprovals(t *ent.Turn, step int, gated []*ent.ToolCall, approvals map[int]*ent.Approval, pause *ent.ToolCall,
	later bool, addAt func(Kind, int, int, *ent.ToolCall, turn.Status, time.Time),
	callEvents func(*ent.ToolCall, int, bool), resumedAt func(int, time.Time) time.Time, status turn.Status) turn.Status {
	var decided []*ent.ToolCall
	ran := false
	for _, c := range gated {
		a := approvals[c.ID]
		if a.Decision != nil {
			decided = append(decided, c)
		}
		ran = ran || c.Outcome != schematype.OutcomePending || a.DispatchedAt != nil
	}
	// Stored with the approvals, the pause is told once the turn took it
	// (a decision needs it), or went on past it.
	if t.Status != turn.StatusWAITING_FOR_APPROVAL && len(decided) == 0 && !later && !Ended(t.Status) {
		return status
	}
	first := approvals[gated[0].ID]
	addAt(Status, step, -1, nil, turn.StatusWAITING_FOR_APPROVAL, first.CreatedAt)
	for _, c := range gated {
		addAt(ApprovalRequested, step, -1, c, turn.StatusWAITING_FOR_APPROVAL, approvals[c.ID].CreatedAt)
	}
	slices.SortStableFunc(decided, func(a, b *ent.ToolCall) int {
		return approvals[a.ID].DecidedAt.Compare(*approvals[b.ID].DecidedAt)
	})
	for _, c := range decided {
		addAt(ApprovalDecided, step, -1, c, turn.StatusWAITING_FOR_APPROVAL, *approvals[c.ID].DecidedAt)
	}
	status = turn.StatusWAITING_FOR_APPROVAL
	if len(decided) < len(gated) {
		return status
	}
	at := *approvals[decided[len(decided)-1].ID].DecidedAt
	if pause != nil {
		addAt(Status, step, PhaseWaiting, pause, turn.StatusWAITING_FOR_CLARIFICATION, at)
		status = turn.StatusWAITING_FOR_CLARIFICATION
		if !ran && !later && !tools.Answered(t.Clarification, pause) {
			return status
		}
		at = resumedAt(step, at)
	}
	addAt(Status, step, -1, nil, turn.StatusRUNNING, at)
	for _, c := range gated {
		a := approvals[c.ID]
		callEvents(c, PhaseResumed, a.DispatchedAt != nil)
	}
	return turn.StatusRUNNING
}
