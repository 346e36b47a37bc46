package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"entgo.io/ent/dialect"
	"entgo.io/ent/dialect/sql"

	"github.com/toolgate/toolgate/ent"
	"github.com/toolgate/toolgate/ent/conversation"
	"github.com/toolgate/toolgate/ent/modelcall"
	"github.com/toolgate/toolgate/ent/schematype"
	"github.com/toolgate/toolgate/ent/turn"
	"github.com/toolgate/toolgate/runtime/model"
)

// ModelCall is a model call as recorded: a step's or a summary's.
type ModelCall struct {
	// OrganizationID, AgentID and UserID are whom the call is attributed to.
	OrganizationID, AgentID, UserID int
	Text                            string
	Provider, Model                 string
	Usage                           model.Usage
	Cost                            schematype.Micros
	Duration                        time.Duration
	StartedAt                       time.Time
	PrefixTokens                    int64
	Attribution                     string
}

// create is the model call's insert, of kind at step.
func (m ModelCall) create(tx *ent.Tx, turnID int, kind modelcall.Kind, step int) *ent.ModelCallCreate {
	c := tx.ModelCall.Create().
		SetTurnID(turnID).SetOrganizationID(m.OrganizationID).SetAgentID(m.AgentID).SetUserID(m.UserID)
	if kind != modelcall.KindSTEP {
		c.SetKind(kind)
	}
	return c.SetStep(step).SetText(m.Text).
		SetProvider(m.Provider).SetModel(m.Model).
		SetInputTokens(m.Usage.InputUncached).SetCacheReadTokens(m.Usage.CacheRead).
		SetCacheWriteTokens(m.Usage.CacheWrite).SetOutputTokens(m.Usage.Output).
		SetCost(m.Cost.USD()).SetCostMicros(m.Cost).SetDurationMs(m.Duration.Milliseconds()).SetStartedAt(m.StartedAt).
		SetPrefixTokens(m.PrefixTokens).SetAttribution(m.Attribution)
}

// Step is one model call of a turn's, with what it asked for.
type Step struct {
	Number int
	Call   ModelCall
	// ConversationID is the turn's conversation, marked updated when the
	// final answer ends the turn.
	ConversationID int
	// Thinking is the turn's thinking with this step's, when the step
	// thought (Thought).
	Thinking *string
	Thought  bool
	// Calls are the tool calls the model asked for, at positions from
	// Position on; none: the call's text is the final answer.
	Calls    []model.ToolCall
	Position int
}

// RecordStep records one model call with the calls it asks for, in one
// transaction: a step is recorded whole or not at all, so a resumed run
// knows a recorded step with no calls for the final answer and carries out
// the calls of one that has them, never asking again. It returns the tool
// calls' rows, and whether the final answer ended the turn.
func (t *Turn) RecordStep(ctx context.Context, st Step) (rows []*ent.ToolCall, finished bool, err error) {
	// The final answer ends the turn in the step's own transaction: the
	// end's update checks the claim, so the step costs no statement more
	// than one with tool calls. A turn no longer RUNNING (cancelled
	// meanwhile) still has its model call recorded, with the claim
	// checked as for any write, and is not ended here.
	var claim func(ctx context.Context, tx *ent.Tx) (bool, error)
	// touched: the end's statement marked the conversation updated too.
	touched := false
	final := len(st.Calls) == 0
	if final {
		claim = func(ctx context.Context, tx *ent.Tx) (bool, error) {
			if t.s.dialect == dialect.Postgres {
				n, err := t.endTouched(ctx, tx, st.Number, st.Call.Text, st.Thinking, st.Thought)
				finished = err == nil && n > 0
				touched = finished
				return finished, err
			}
			u := tx.Turn.Update().
				Where(turn.ID(t.id), turn.ClaimedBy(t.s.runner), turn.StatusEQ(turn.StatusRUNNING), unrecorded(st.Number)).
				SetStatus(turn.StatusCOMPLETED).SetFinishedAt(t.s.now()).SetAnswer(st.Call.Text).
				ClearClaimedBy().ClearHeartbeatAt()
			if st.Thought {
				u.SetThinking(*st.Thinking)
			}
			t.recordAgent(u)
			n, err := u.Save(ctx)
			finished = err == nil && n > 0
			return finished, err
		}
	}
	// One step is recorded once: a run that lost its claim, or a second
	// runner, cannot record it again. The claim's update checks it.
	step := st.Number
	err = t.writeClaimed(ctx, &step, claim, func(ctx context.Context, tx *ent.Tx) error {
		if err := st.Call.create(tx, t.id, modelcall.KindSTEP, st.Number).Exec(ctx); err != nil {
			return fmt.Errorf("record model call: %w", err)
		}
		if st.Thought && !finished {
			if err := tx.Turn.Update().Where(turn.ID(t.id)).SetThinking(*st.Thinking).Exec(ctx); err != nil {
				return fmt.Errorf("record thinking: %w", err)
			}
		}
		if finished && !touched {
			return t.s.touch(ctx, tx.Client(), st.ConversationID)
		}
		if final {
			return nil
		}
		creates := make([]*ent.ToolCallCreate, len(st.Calls))
		for i, c := range st.Calls {
			creates[i] = tx.ToolCall.Create().
				SetTurnID(t.id).SetPosition(st.Position + i).SetStep(st.Number).
				SetCallID(c.ID).SetName(c.Name).SetArguments(string(c.Arguments)).
				SetStartedAt(t.s.now())
		}
		var err error
		rows, err = tx.ToolCall.CreateBulk(creates...).Save(ctx)
		if err != nil {
			return fmt.Errorf("record tool calls: %w", err)
		}
		return nil
	})
	if err != nil {
		return nil, false, err
	}
	if finished {
		t.unrecordedAgent = nil // the end's update recorded it
	}
	return rows, finished, nil
}

// endTouched is the final answer's end of the turn on PostgreSQL, as the
// update RecordStep sends on SQLite (the claim held, the turn RUNNING, the
// step unrecorded; the agent recorded if it is not yet), with the
// conversation marked updated in the same statement when the turn ends:
// the turn's update feeds the conversation's. It returns whether the turn
// ended.
func (t *Turn) endTouched(ctx context.Context, tx *ent.Tx, step int, answer string, thinking *string, thought bool) (int64, error) {
	now := t.s.now()
	b := sql.Dialect(dialect.Postgres)
	mt := b.Table(modelcall.Table)
	end := b.Update(turn.Table).
		Set(turn.FieldStatus, turn.StatusCOMPLETED.String()).Set(turn.FieldFinishedAt, now).Set(turn.FieldAnswer, answer).
		SetNull(turn.FieldClaimedBy).SetNull(turn.FieldHeartbeatAt).
		Where(sql.And(sql.EQ(turn.FieldID, t.id), sql.EQ(turn.FieldClaimedBy, t.s.runner),
			sql.EQ(turn.FieldStatus, turn.StatusRUNNING.String()),
			sql.NotExists(b.Select(mt.C(modelcall.FieldTurnID)).From(mt).Where(sql.And(
				sql.ColumnsEQ(mt.C(modelcall.FieldTurnID), b.Table(turn.Table).C(turn.FieldID)),
				sql.EQ(mt.C(modelcall.FieldKind), modelcall.KindSTEP.String()),
				sql.EQ(mt.C(modelcall.FieldStep), step)))))).
		Returning(turn.FieldConversationID)
	if thought {
		end.Set(turn.FieldThinking, *thinking)
	}
	if a := t.unrecordedAgent; a != nil {
		cfg, err := json.Marshal(a)
		if err != nil {
			return 0, fmt.Errorf("record the turn's agent: %w", err)
		}
		end.Set(turn.FieldAgentConfig, cfg)
	}
	ended := b.Table("ended")
	touch := b.Update(conversation.Table).Set(conversation.FieldUpdatedAt, now).
		Where(sql.In(conversation.FieldID, b.Select(ended.C(turn.FieldConversationID)).From(ended))).
		Prefix(sql.ExprFunc(func(b *sql.Builder) {
			b.WriteString(`WITH "ended" AS `).Wrap(func(b *sql.Builder) { b.Join(end) })
		}))
	query, args := touch.Query()
	if err := touch.Err(); err != nil {
		return 0, err
	}
	res, err := tx.Client().ExecContext(ctx, query, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// Summary is a summary of turns From–To, as recorded.
type Summary struct {
	ConversationID int
	From, To       int
	Call           ModelCall
}

// RecordSummary stores a summary with its model call (kind SUMMARY,
// attributed to this turn, numbered by the turn's summaries so far), in
// one transaction.
func (t *Turn) RecordSummary(ctx context.Context, sm Summary) error {
	return t.Write(ctx, func(ctx context.Context, tx *ent.Tx) error {
		round, err := tx.ModelCall.Query().Where(modelcall.TurnID(t.id), modelcall.KindEQ(modelcall.KindSUMMARY)).Count(ctx)
		if err != nil {
			return fmt.Errorf("count summaries: %w", err)
		}
		if err := sm.Call.create(tx, t.id, modelcall.KindSUMMARY, round).Exec(ctx); err != nil {
			return fmt.Errorf("record summary call: %w", err)
		}
		err = tx.Summary.Create().
			SetConversationID(sm.ConversationID).SetFromTurn(sm.From).SetToTurn(sm.To).SetText(sm.Call.Text).SetTurnID(t.id).
			SetModel(sm.Call.Model).SetCost(sm.Call.Cost.USD()).SetCostMicros(sm.Call.Cost).SetCreatedAt(t.s.now()).
			Exec(ctx)
		if err != nil {
			return fmt.Errorf("record summary: %w", err)
		}
		return nil
	})
}

// Finish ends the turn with status, unless it ended already or another
// runner holds it, and marks its conversation updated; a busy database is
// waited for (Persist). It reports whether the turn ended; touchErr is
// the conversation's mark that failed after it did.
func (t *Turn) Finish(ctx context.Context, conversationID int, status turn.Status, answer *string, reason string) (ended bool, touchErr, err error) {
	err = Persist(ctx, func(ctx context.Context) error {
		u := t.s.client.Turn.Update().
			Where(turn.ID(t.id), turn.StatusIn(turn.StatusRUNNING, turn.StatusWAITING_FOR_CLARIFICATION),
				turn.Or(turn.ClaimedByIsNil(), turn.ClaimedBy(t.s.runner))).
			SetStatus(status).SetFinishedAt(t.s.now()).ClearClaimedBy().ClearHeartbeatAt()
		if answer != nil {
			u.SetAnswer(*answer)
		}
		if reason != "" && status != turn.StatusCOMPLETED {
			u.SetError(reason)
		}
		n, err := u.Save(ctx)
		ended = n > 0
		return err
	})
	if err != nil || !ended {
		return false, nil, err
	}
	return true, t.s.touch(ctx, t.s.client, conversationID), nil
}

// touch marks a conversation as updated now.
func (s *Store) touch(ctx context.Context, c *ent.Client, conversationID int) error {
	err := c.Conversation.Update().Where(conversation.ID(conversationID)).SetUpdatedAt(s.now()).Exec(ctx)
	if err != nil {
		return fmt.Errorf("touch conversation: %w", err)
	}
	return nil
}

// Pause leaves the turn waiting (for a clarification or approvals), with
// cl the question it waits to have answered (nil: none stored), unless it
// no longer runs. It reports whether it paused.
func (t *Turn) Pause(ctx context.Context, status turn.Status, cl *schematype.Clarification) (bool, error) {
	var n int
	err := t.Write(ctx, func(ctx context.Context, tx *ent.Tx) error {
		var err error
		u := tx.Turn.Update().Where(turn.ID(t.id), turn.StatusEQ(turn.StatusRUNNING)).
			SetStatus(status).ClearClaimedBy().ClearHeartbeatAt()
		if cl != nil {
			u.SetClarification(cl)
		}
		n, err = u.Save(ctx)
		return err
	})
	return n == 1, err
}

// MarkReplayed records whether the turn runs on the replay provider.
func (t *Turn) MarkReplayed(ctx context.Context, replayed bool) error {
	if err := t.s.client.Turn.Update().Where(turn.ID(t.id)).SetReplayed(replayed).Exec(ctx); err != nil {
		return fmt.Errorf("mark replayed: %w", err)
	}
	return nil
}

// SetTraceParent records the trace the turn's runs join.
func (t *Turn) SetTraceParent(ctx context.Context, parent string) error {
	return t.s.client.Turn.UpdateOneID(t.id).SetTraceParent(parent).Exec(ctx)
}
