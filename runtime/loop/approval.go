package loop

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/toolgate/toolgate/ent"
	"github.com/toolgate/toolgate/ent/schematype"
	"github.com/toolgate/toolgate/ent/tenancy"
	"github.com/toolgate/toolgate/ent/turn"
	gate "github.com/toolgate/toolgate/runtime/approval"
	"github.com/toolgate/toolgate/runtime/dispatch"
	"github.com/toolgate/toolgate/runtime/events"
	"github.com/toolgate/toolgate/runtime/mcp"
	"github.com/toolgate/toolgate/runtime/model"
	"github.com/toolgate/toolgate/runtime/store"
	"github.com/toolgate/toolgate/tools"
)

// DefaultApprovalTimeout is how long a call waits for a decision before it
// is declined as "no answer" (Config.ApprovalTimeout).
const DefaultApprovalTimeout = 24 * time.Hour

// ApprovalSweepEvery is how often the sweep looks for calls that waited
// past their time.
const ApprovalSweepEvery = 30 * time.Second

// NoAnswer is the reason of a call nobody decided on in time.
const NoAnswer = "no answer"

// approvalAct is what a decision makes of a call of the step being run.
type approvalAct struct {
	// declined: what the model hears in place of a result.
	declined *dispatch.Result
	// fresh: approved and never taken up, so sent as a first try even by
	// a resumed run.
	fresh bool
	// decided: the call has a decision; its events follow the pause.
	decided bool
}

// policyRules are the approval rules that reach def this turn.
func (t *turnRun) policyRules(def tools.Definition) gate.Rules {
	r := gate.Rules{Agent: t.agent.Approvals}
	if app, _, ok := mcp.SplitToolName(def.Name); ok && def.Family == mcp.Family {
		if row := t.appRows[app]; row != nil {
			r.Application, r.Default = row.Approvals, row.DefaultApproval
		}
	}
	return r
}

// gate sorts the step's calls to run (todo) by their approvals: a call
// whose policy makes it wait gets its approval stored, with its arguments
// repaired as they would be sent, and does not run; a call decided on runs
// (approved, with the person's arguments when edited) or is heard as
// declined. It returns the calls to run, what decisions make of them, and
// the calls still waiting. Nothing is read or written for a step none of
// whose calls waits.
func (t *turnRun) gate(ctx context.Context, s dispatch.Scope, rows []*ent.ToolCall, calls []model.ToolCall,
	defs []tools.Definition, todo []int, resumed bool) ([]int, map[int]approvalAct, []int, error) {
	var stored map[int]*ent.Approval
	if resumed {
		ids := make([]int, len(todo))
		for k, i := range todo {
			ids[k] = rows[i].ID
		}
		var err error
		if stored, err = t.r.store.Approvals(ctx, ids); err != nil {
			return nil, nil, nil, err
		}
	}
	var (
		run     []int
		waiting []int
		acts    = map[int]approvalAct{}
		asked   []store.Asked
		taken   []int
	)
	now := t.r.cfg.Now()
	for _, i := range todo {
		if a := stored[rows[i].ID]; a != nil {
			switch {
			case a.Decision == nil:
				waiting = append(waiting, i)
				continue
			case *a.Decision == schematype.DecisionDecline:
				acts[i] = approvalAct{decided: true, declined: &dispatch.Result{Outcome: schematype.OutcomeDeclined,
					Arguments: json.RawMessage(a.Arguments), Message: declinedWords(a)}}
			default:
				args := a.Arguments
				if *a.Decision == schematype.DecisionEdit && a.DecidedArguments != nil {
					args = *a.DecidedArguments
					t.notes[rows[i].ID] = fmt.Sprintf("The person changed this call's arguments before it ran: it ran with %s in place of %s.", args, a.Arguments)
				}
				calls[i].Arguments = json.RawMessage(args)
				acts[i] = approvalAct{decided: true, fresh: a.DispatchedAt == nil}
				if a.DispatchedAt == nil {
					taken = append(taken, a.ID)
				}
			}
			run = append(run, i)
			continue
		}
		p := gate.Policy(defs[i], t.policyRules(defs[i]))
		if !gate.Gates(defs[i], p) {
			run = append(run, i)
			continue
		}
		res, ok := t.r.cfg.Dispatcher.Prepare(s, dispatch.Call{ID: calls[i].ID, Name: calls[i].Name, Arguments: calls[i].Arguments})
		if !ok {
			run = append(run, i) // refused as it stands: nothing to approve, nothing sent
			continue
		}
		schema := string(defs[i].Schema)
		if schema == "" {
			schema = `{"type":"object"}`
		}
		calls[i].Arguments = res.Arguments
		rows[i].Arguments = string(res.Arguments)
		rows[i].Repairs = res.Repairs
		if rows[i].Repairs == nil {
			rows[i].Repairs = []schematype.Repair{}
		}
		asked = append(asked, store.Asked{ToolCallID: rows[i].ID, Arguments: rows[i].Arguments, Repairs: rows[i].Repairs,
			Tool: calls[i].Name, Description: defs[i].Description, InputSchema: schema, Policy: p,
			Annotations: defs[i].Annotations, ExpiresAt: now.Add(t.r.cfg.ApprovalTimeout)})
		waiting = append(waiting, i)
	}
	if len(asked) == 0 && len(taken) == 0 {
		return run, acts, waiting, nil
	}
	// Stored before anything of the step is sent: a call asked about never
	// runs undecided, and one taken up is in flight for any later run.
	if err := t.db.StoreApprovals(ctx, t.conv.ID, asked, taken, now); err != nil {
		return nil, nil, nil, err
	}
	return run, acts, waiting, nil
}

// declinedWords is what the model hears of a declined call.
func declinedWords(a *ent.Approval) string {
	switch {
	case a.TimedOut:
		return "Nobody decided on it in time (no answer), so it was declined."
	case a.Reason != nil && *a.Reason != "":
		return "The person declined it. Their reason: " + *a.Reason
	}
	return "The person declined it (no reason given)."
}

// pauseForApproval leaves the turn waiting for the decisions on the
// step's calls that wait. A question the step asked too is stored with
// them (the portal may show it): once every call is decided the turn
// waits for its answer (Decide), and resumes only then. The turn pauses
// once, and runs again with both answered.
func (t *turnRun) pauseForApproval(ctx context.Context, rows []*ent.ToolCall, waiting []int) error {
	var cl *schematype.Clarification
	if i := t.pausing(rows); i >= 0 {
		q, err := tools.Question(rows[i])
		if err != nil {
			return fmt.Errorf("read clarification: %w", err)
		}
		cl = &q
	}
	paused, err := t.db.Pause(ctx, turn.StatusWAITING_FOR_APPROVAL, cl)
	if err != nil {
		return fmt.Errorf("pause for approval: %w", err)
	}
	if paused {
		step := rows[waiting[0]].Step
		setTurnStatus(t.span, string(turn.StatusWAITING_FOR_APPROVAL))
		t.publish(events.Event{Kind: events.Status, Step: step, Status: string(turn.StatusWAITING_FOR_APPROVAL)})
		for _, i := range waiting {
			t.publish(events.Event{Kind: events.ApprovalRequested, ToolCallID: rows[i].ID, Step: step,
				Status: string(turn.StatusWAITING_FOR_APPROVAL)})
		}
	}
	return nil
}

// Decision is a person's decision on one call waiting for approval.
type Decision struct {
	ToolCallID int
	Decision   schematype.Decision
	// Arguments replace the call's with EDIT (JSON).
	Arguments *string
	// Reason says why, with DECLINE.
	Reason *string
	// TimedOut: nobody decided in time (the sweep's DECLINE).
	TimedOut bool
}

// Decided is what Decide stored.
type Decided struct {
	// Approvals are the decided calls' approvals, as now stored.
	Approvals []*ent.Approval
	// Resumed: every call of the turn is decided, and the turn RUNNING
	// again (queued as of now): start its job once this commits.
	Resumed bool
	// Step is the model call that asked for the calls.
	Step int
	// Asked, once every call is decided, is the call of the same step whose
	// question the turn now waits to have answered (WAITING_FOR_CLARIFICATION),
	// or 0.
	Asked int
}

// DecisionError is a decision refused; its words are the client's.
type DecisionError struct{ msg string }

func (e *DecisionError) Error() string { return e.msg }

func refuse(format string, args ...any) error {
	return &DecisionError{msg: fmt.Sprintf(format, args...)}
}

// ErrNoSuchCall is a decision on a call that does not wait in the turn, or
// is out of the caller's reach: the same answer for both.
var ErrNoSuchCall = errors.New("tool call not found")

// Decide stores decisions on a turn's calls waiting for approval, with c
// (the caller's transaction), and resumes the turn when none waits any
// more. Every decision is checked before any is stored: a call decided
// already (a double click, a second tab, another approver), edited
// arguments that do not fit the tool's schema, a turn no longer waiting:
// nothing is stored, and the error says why. Decisions on one turn take
// the turn's row first, so two at once are stored one after the other.
func Decide(ctx context.Context, c *ent.Client, turnID int, ds []Decision, by *int, now time.Time) (*Decided, error) {
	if len(ds) == 0 {
		return nil, refuse("decisions is empty: decide on at least one call")
	}
	db := store.On(c)
	t, waiting, err := db.Take(ctx, turnID, now)
	if err != nil {
		return nil, err
	}
	as, err := db.Approvals(ctx, t.ID)
	if err != nil {
		return nil, err
	}
	byCall := make(map[int]*ent.Approval, len(as))
	for _, a := range as {
		byCall[a.ToolCallID] = a
	}
	// Decisions on one turn are stored one after the other (the turn's row
	// is taken): each is stored later than the one before, so a stream
	// rebuilt from what is stored tells them in the order they were told.
	for _, a := range as {
		if a.DecidedAt != nil && !now.After(*a.DecidedAt) {
			now = a.DecidedAt.Add(time.Microsecond)
		}
	}
	edited, err := checkDecisions(ds, byCall)
	if err != nil {
		return nil, err
	}
	if !waiting {
		return nil, refuse("the turn is %s, not waiting for a decision", t.Status)
	}
	out := &Decided{}
	for k, d := range ds {
		a := byCall[d.ToolCallID]
		undecided, err := db.Store(ctx, a.ID, store.Decision{Decision: d.Decision, At: now, By: by, TimedOut: d.TimedOut,
			Arguments: edited[k], Reason: d.Reason})
		if err != nil {
			return nil, err
		}
		if !undecided {
			return nil, refuse("decision %d: the call was decided already; this decision changed nothing", k)
		}
		out.Approvals = append(out.Approvals, a)
	}
	if out.Step, err = db.Step(ctx, ds[0].ToolCallID); err != nil {
		return nil, err
	}
	left, err := db.Undecided(ctx, t.ID)
	if err != nil {
		return nil, err
	}
	if !left {
		// A question asked in the same batch is answered next: the turn
		// goes on waiting, for the answer now.
		next := turn.StatusRUNNING
		if cl := t.Clarification; cl != nil && cl.Answer == nil {
			calls, err := db.StepCalls(ctx, t.ID, out.Step)
			if err != nil {
				return nil, err
			}
			if i := tools.Asking(calls, func(name string) bool { return name == tools.ClarifyTool }); i >= 0 {
				next, out.Asked = turn.StatusWAITING_FOR_CLARIFICATION, calls[i].ID
			}
		}
		moved, err := db.Next(ctx, t.ID, next, now)
		if err != nil {
			return nil, err
		}
		out.Resumed = moved && next == turn.StatusRUNNING
		if !moved {
			out.Asked = 0
		}
	}
	ids := make([]int, len(out.Approvals))
	for i, a := range out.Approvals {
		ids[i] = a.ID
	}
	// In the model's order: as Announce tells them, and a rebuilt stream.
	if out.Approvals, err = db.Read(ctx, ids); err != nil {
		return nil, err
	}
	return out, nil
}

// checkDecisions checks every decision before any is stored, against the
// turn's approvals by call, and returns the edited arguments, by decision.
func checkDecisions(ds []Decision, byCall map[int]*ent.Approval) ([]*string, error) {
	edited := make([]*string, len(ds))
	seen := map[int]bool{}
	for k, d := range ds {
		a := byCall[d.ToolCallID]
		if a == nil {
			return nil, ErrNoSuchCall
		}
		if seen[d.ToolCallID] {
			return nil, refuse("decision %d: the call is decided twice in one request", k)
		}
		seen[d.ToolCallID] = true
		if a.Decision != nil {
			return nil, refuse("decision %d: the call was decided already (%s at %s); this decision changed nothing",
				k, *a.Decision, a.DecidedAt.UTC().Format(time.RFC3339))
		}
		switch d.Decision {
		case schematype.DecisionEdit:
			if d.Arguments == nil {
				return nil, refuse("decision %d: EDIT needs arguments (a JSON object)", k)
			}
			args, err := gate.Check(a.Tool, a.InputSchema, *d.Arguments)
			if err != nil {
				return nil, refuse("decision %d: the edited arguments do not fit %s's schema: %v", k, a.Tool, err)
			}
			edited[k] = &args
		case schematype.DecisionApprove, schematype.DecisionDecline:
			if d.Arguments != nil {
				return nil, refuse("decision %d: arguments go with EDIT only", k)
			}
		default:
			return nil, refuse("decision %d: want APPROVE, EDIT or DECLINE", k)
		}
		if d.Reason != nil && d.Decision != schematype.DecisionDecline {
			return nil, refuse("decision %d: a reason goes with DECLINE only", k)
		}
	}
	return edited, nil
}

// Announce publishes what Decide stored, once it is committed: a decision
// event per call, and the turn's return to RUNNING.
func (r *Runner) Announce(turnID int, d *Decided) {
	now := r.cfg.Now()
	for _, a := range d.Approvals {
		r.cfg.Events.Publish(events.Event{Kind: events.ApprovalDecided, TurnID: turnID, ToolCallID: a.ToolCallID, Step: d.Step,
			Status: string(turn.StatusWAITING_FOR_APPROVAL), At: now})
	}
	switch {
	case d.Resumed:
		r.cfg.Events.Publish(events.Event{Kind: events.Status, TurnID: turnID, Step: d.Step, Status: string(turn.StatusRUNNING), At: now})
	case d.Asked != 0:
		// Told as one more event of the pause, after the decisions.
		r.cfg.Events.Publish(events.Event{Kind: events.Status, TurnID: turnID, ToolCallID: d.Asked, Step: d.Step,
			Status: string(turn.StatusWAITING_FOR_CLARIFICATION), At: now})
	}
}

// ExpireApprovals declines, as "no answer", the calls that waited past
// their time in turns still waiting, and resumes those turns. It returns
// how many calls it declined.
func (r *Runner) ExpireApprovals(ctx context.Context) (int, error) {
	ctx = tenancy.System(ctx)
	now := r.cfg.Now()
	due, err := r.store.DueApprovals(ctx, now)
	if err != nil {
		return 0, err
	}
	byTurn := map[int][]Decision{}
	var turns []int
	for _, a := range due {
		if _, ok := byTurn[a.TurnID]; !ok {
			turns = append(turns, a.TurnID)
		}
		reason := NoAnswer
		byTurn[a.TurnID] = append(byTurn[a.TurnID], Decision{ToolCallID: a.ToolCallID, Decision: schematype.DecisionDecline,
			Reason: &reason, TimedOut: true})
	}
	n := 0
	for _, id := range slices.Compact(turns) {
		var d *Decided
		err := r.store.Tx(ctx, func(ctx context.Context, c *ent.Client) error {
			var err error
			d, err = Decide(ctx, c, id, byTurn[id], nil, now)
			return err
		})
		var refused *DecisionError
		if errors.As(err, &refused) {
			continue // decided meanwhile
		}
		if err != nil {
			return n, err
		}
		n += len(d.Approvals)
		r.Announce(id, d)
		if d.Resumed {
			if _, err := r.Start(ctx, id); err != nil {
				return n, err
			}
		}
	}
	return n, nil
}
