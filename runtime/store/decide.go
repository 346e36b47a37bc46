package store

import (
	"context"
	"fmt"
	"time"

	"github.com/toolgate/toolgate/ent"
	"github.com/toolgate/toolgate/ent/approval"
	"github.com/toolgate/toolgate/ent/schematype"
	"github.com/toolgate/toolgate/ent/toolcall"
	"github.com/toolgate/toolgate/ent/turn"
)

// Decisions sends the statements of a person's decisions on calls waiting
// for approval, with a caller's client (its transaction): the loop's
// Decide checks, these store.
type Decisions struct{ c *ent.Client }

// On returns the decisions' statements sent with c.
func On(c *ent.Client) Decisions { return Decisions{c: c} }

// Take reads the turn and, when it waits for approval, takes its row (a
// heartbeat of now), so decisions on one turn are stored one after the
// other. It reports whether the turn waits.
func (d Decisions) Take(ctx context.Context, turnID int, now time.Time) (*ent.Turn, bool, error) {
	t, err := d.c.Turn.Get(ctx, turnID)
	if err != nil {
		return nil, false, err
	}
	waiting, err := d.c.Turn.Update().Where(turn.ID(t.ID), turn.StatusEQ(turn.StatusWAITING_FOR_APPROVAL)).
		SetHeartbeatAt(now).Save(ctx)
	if err != nil {
		return nil, false, fmt.Errorf("take turn: %w", err)
	}
	return t, waiting > 0, nil
}

// Approvals reads a turn's approvals.
func (d Decisions) Approvals(ctx context.Context, turnID int) ([]*ent.Approval, error) {
	as, err := d.c.Approval.Query().Where(approval.TurnID(turnID)).All(ctx)
	if err != nil {
		return nil, fmt.Errorf("load approvals: %w", err)
	}
	return as, nil
}

// Decision is a decision as stored on its approval.
type Decision struct {
	Decision  schematype.Decision
	At        time.Time
	By        *int
	TimedOut  bool
	Arguments *string
	Reason    *string
}

// Store stores a decision on an undecided approval; it reports whether
// the approval was undecided.
func (d Decisions) Store(ctx context.Context, approvalID int, dd Decision) (bool, error) {
	u := d.c.Approval.Update().Where(approval.ID(approvalID), approval.DecisionIsNil()).
		SetDecision(dd.Decision).SetDecidedAt(dd.At).SetNillableDecidedByID(dd.By).SetTimedOut(dd.TimedOut).
		SetNillableDecidedArguments(dd.Arguments)
	if dd.Reason != nil {
		u.SetReason(*dd.Reason)
	}
	n, err := u.Save(ctx)
	if err != nil {
		return false, fmt.Errorf("store decision: %w", err)
	}
	return n > 0, nil
}

// Step reads the step of a tool call.
func (d Decisions) Step(ctx context.Context, toolCallID int) (int, error) {
	call, err := d.c.ToolCall.Get(ctx, toolCallID)
	if err != nil {
		return 0, fmt.Errorf("load decided call: %w", err)
	}
	return call.Step, nil
}

// Undecided reports whether a call of the turn still waits for a decision.
func (d Decisions) Undecided(ctx context.Context, turnID int) (bool, error) {
	left, err := d.c.Approval.Query().Where(approval.TurnID(turnID), approval.DecisionIsNil()).Exist(ctx)
	if err != nil {
		return false, fmt.Errorf("count undecided calls: %w", err)
	}
	return left, nil
}

// StepCalls reads the calls of a turn's step, in the model's order.
func (d Decisions) StepCalls(ctx context.Context, turnID, step int) ([]*ent.ToolCall, error) {
	calls, err := d.c.ToolCall.Query().Where(toolcall.TurnID(turnID), toolcall.Step(step)).
		Order(ent.Asc(toolcall.FieldPosition)).All(ctx)
	if err != nil {
		return nil, fmt.Errorf("load the step's calls: %w", err)
	}
	return calls, nil
}

// Next moves a turn whose calls are all decided on from waiting for
// approval to next: RUNNING again (queued as of now), or waiting for its
// question's answer. It reports whether the turn was still waiting.
func (d Decisions) Next(ctx context.Context, turnID int, next turn.Status, now time.Time) (bool, error) {
	u := d.c.Turn.Update().Where(turn.ID(turnID), turn.StatusEQ(turn.StatusWAITING_FOR_APPROVAL)).SetStatus(next)
	if next == turn.StatusRUNNING {
		u.ClearClaimedBy().SetHeartbeatAt(now)
	} else {
		u.ClearHeartbeatAt()
	}
	n, err := u.Save(ctx)
	if err != nil {
		return false, fmt.Errorf("resume turn: %w", err)
	}
	return n == 1, nil
}

// Read reads approvals by id, in the model's order of their calls.
func (d Decisions) Read(ctx context.Context, ids []int) ([]*ent.Approval, error) {
	as, err := d.c.Approval.Query().Where(approval.IDIn(ids...)).Order(ent.Asc(approval.FieldToolCallID)).All(ctx)
	if err != nil {
		return nil, fmt.Errorf("read decisions: %w", err)
	}
	return as, nil
}
