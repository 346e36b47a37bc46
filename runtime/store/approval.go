package store

import (
	"context"
	"fmt"
	"time"

	"github.com/toolgate/toolgate/ent"
	"github.com/toolgate/toolgate/ent/approval"
	"github.com/toolgate/toolgate/ent/schematype"
	"github.com/toolgate/toolgate/ent/turn"
)

// Approvals reads the approvals of tool calls, by call.
func (s *Store) Approvals(ctx context.Context, toolCallIDs []int) (map[int]*ent.Approval, error) {
	as, err := s.client.Approval.Query().Where(approval.ToolCallIDIn(toolCallIDs...)).All(ctx)
	if err != nil {
		return nil, fmt.Errorf("load approvals: %w", err)
	}
	out := make(map[int]*ent.Approval, len(as))
	for _, a := range as {
		out[a.ToolCallID] = a
	}
	return out, nil
}

// Asked is a call that waits for a person's approval: its arguments as
// repaired, which it would be sent with, and its approval to store.
type Asked struct {
	ToolCallID  int
	Arguments   string
	Repairs     []schematype.Repair
	Tool        string
	Description string
	InputSchema string
	Policy      schematype.ApprovalPolicy
	Annotations *schematype.ToolAnnotations
	ExpiresAt   time.Time
}

// StoreApprovals stores, in one claim-checked transaction, the approvals
// of the calls asked about (with their arguments as they would be sent),
// and takes up the approved calls taken (their approvals' ids) as
// dispatched at now: before anything of the step is sent, a call asked
// about never runs undecided, and one taken up is in flight for any later
// run.
func (t *Turn) StoreApprovals(ctx context.Context, conversationID int, asked []Asked, taken []int, now time.Time) error {
	return t.Write(ctx, func(ctx context.Context, tx *ent.Tx) error {
		for _, a := range asked {
			err := tx.ToolCall.Update().Where(pendingCall(a.ToolCallID)...).
				SetArguments(a.Arguments).SetRepairs(nonNil(a.Repairs)).Exec(ctx)
			if err != nil {
				return fmt.Errorf("record arguments to approve: %w", err)
			}
		}
		if len(asked) > 0 {
			bulk := make([]*ent.ApprovalCreate, len(asked))
			for k, a := range asked {
				c := tx.Approval.Create().
					SetConversationID(conversationID).SetTurnID(t.id).SetToolCallID(a.ToolCallID).
					SetTool(a.Tool).SetArguments(a.Arguments).SetDescription(a.Description).
					SetInputSchema(a.InputSchema).SetPolicy(a.Policy).SetCreatedAt(now).SetExpiresAt(a.ExpiresAt)
				if a.Annotations != nil {
					c.SetAnnotations(a.Annotations)
				}
				bulk[k] = c
			}
			if err := tx.Approval.CreateBulk(bulk...).Exec(ctx); err != nil {
				return fmt.Errorf("store approvals: %w", err)
			}
		}
		if len(taken) > 0 {
			n, err := tx.Approval.Update().Where(approval.IDIn(taken...), approval.DispatchedAtIsNil()).SetDispatchedAt(now).Save(ctx)
			if err != nil {
				return fmt.Errorf("take up approved calls: %w", err)
			}
			if n != len(taken) {
				return fmt.Errorf("take up approved calls: %w", ErrStepRecorded)
			}
		}
		return nil
	})
}

// DueApprovals reads the calls undecided past their time in turns still
// waiting for approval, by turn.
func (s *Store) DueApprovals(ctx context.Context, now time.Time) ([]*ent.Approval, error) {
	due, err := s.client.Approval.Query().
		Where(approval.DecisionIsNil(), approval.ExpiresAtLT(now),
			approval.HasTurnWith(turn.StatusEQ(turn.StatusWAITING_FOR_APPROVAL))).
		Order(ent.Asc(approval.FieldTurnID), ent.Asc(approval.FieldID)).All(ctx)
	if err != nil {
		return nil, fmt.Errorf("find approvals past their time: %w", err)
	}
	return due, nil
}

// Tx runs fn in a transaction of its own, with retries on a busy database
// (Persist): a caller's statements (Decide's) made as one.
func (s *Store) Tx(ctx context.Context, fn func(ctx context.Context, c *ent.Client) error) error {
	return Persist(ctx, func(ctx context.Context) error {
		tx, err := s.client.Tx(ctx)
		if err != nil {
			return fmt.Errorf("begin: %w", err)
		}
		defer func() { _ = tx.Rollback() }()
		if err := fn(ctx, tx.Client()); err != nil {
			return err
		}
		return tx.Commit()
	})
}
