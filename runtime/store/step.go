package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"entgo.io/ent/dialect"
	"entgo.io/ent/dialect/sql"

	"github.com/toolgate/toolgate/db"
	"github.com/toolgate/toolgate/ent"
	"github.com/toolgate/toolgate/ent/conversation"
	"github.com/toolgate/toolgate/ent/modelcall"
	"github.com/toolgate/toolgate/ent/monthlyspend"
	"github.com/toolgate/toolgate/ent/schematype"
	"github.com/toolgate/toolgate/ent/toolcall"
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

// fields are the model call's columns, of kind at step, as the insert
// writes them: one list for ent's insert (SQLite) and PostgreSQL's own.
func (m ModelCall) fields(turnID int, kind modelcall.Kind, step int) ([]string, []any) {
	return []string{
			modelcall.FieldTurnID, modelcall.FieldOrganizationID, modelcall.FieldAgentID, modelcall.FieldUserID,
			modelcall.FieldKind, modelcall.FieldStep, modelcall.FieldText, modelcall.FieldProvider, modelcall.FieldModel,
			modelcall.FieldInputTokens, modelcall.FieldCacheReadTokens, modelcall.FieldCacheWriteTokens, modelcall.FieldOutputTokens,
			modelcall.FieldCost, modelcall.FieldCostMicros, modelcall.FieldDurationMs, modelcall.FieldStartedAt,
			modelcall.FieldPrefixTokens, modelcall.FieldAttribution,
		}, []any{
			turnID, m.OrganizationID, m.AgentID, m.UserID,
			kind, step, m.Text, m.Provider, m.Model,
			m.Usage.InputUncached, m.Usage.CacheRead, m.Usage.CacheWrite, m.Usage.Output,
			m.Cost.USD(), m.Cost, m.Duration.Milliseconds(), m.StartedAt,
			m.PrefixTokens, m.Attribution,
		}
}

// record inserts the model call, of kind at step, in tx. On SQLite it goes
// through ent, whose hook adds its cost to the month's running totals
// (package db); on PostgreSQL the insert and the totals' upsert are one
// statement (insertSpent).
func (m ModelCall) record(ctx context.Context, tx *ent.Tx, dialectName string, turnID int, kind modelcall.Kind, step int) error {
	cols, vals := m.fields(turnID, kind, step)
	if dialectName == dialect.Postgres {
		insert := sql.Dialect(dialect.Postgres).Insert(modelcall.Table).Columns(cols...).Values(vals...)
		query, args := m.insertSpent(insert)
		_, err := tx.Client().ExecContext(ctx, query, args...)
		return err
	}
	c := tx.ModelCall.Create()
	for i, col := range cols {
		if err := c.Mutation().SetField(col, vals[i]); err != nil {
			return err
		}
	}
	return c.Exec(ctx)
}

// insertSpent is insert (a model call's, of m) with m's cost added to its
// user's and its organisation's running totals for the UTC month the call
// started in, in the same statement, as the db package's hook adds it to
// an insert made through ent; a call that cost nothing adds nothing.
func (m ModelCall) insertSpent(insert sql.Querier) (string, []any) {
	if m.Cost == 0 {
		return insert.Query()
	}
	month := m.StartedAt.UTC().Format(db.SpendMonth)
	b := &sql.Builder{}
	b.SetDialect(dialect.Postgres)
	{
		b.WriteString(`WITH "call" AS `).Wrap(func(b *sql.Builder) { b.Join(insert) })
		b.WriteString(" INSERT INTO ").Ident(monthlyspend.Table).Wrap(func(b *sql.Builder) {
			b.IdentComma(monthlyspend.FieldOrganizationID, monthlyspend.FieldUserID, monthlyspend.FieldMonth, monthlyspend.FieldCostMicros)
		})
		b.WriteString(" VALUES (").Args(m.OrganizationID, 0, month, m.Cost).WriteString("), (").
			Args(m.OrganizationID, m.UserID, month, m.Cost).WriteString(")")
		spendConflict(b)
	}
	return b.Query()
}

// spendConflict adds a row's cost to the running total the row meets.
func spendConflict(b *sql.Builder) {
	b.WriteString(" ON CONFLICT ").Wrap(func(b *sql.Builder) {
		b.IdentComma(monthlyspend.FieldOrganizationID, monthlyspend.FieldMonth, monthlyspend.FieldUserID)
	})
	b.WriteString(" DO UPDATE SET ").Ident(monthlyspend.FieldCostMicros).WriteString(" = ").
		Ident(monthlyspend.Table).WriteString(".").Ident(monthlyspend.FieldCostMicros).
		WriteString(" + EXCLUDED.").Ident(monthlyspend.FieldCostMicros)
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
	// The final answer ends the turn with the step's record: the end's
	// update checks the claim, so the step costs no statement more than
	// one with tool calls. On PostgreSQL the end, the conversation's mark
	// and the model call are one statement (endRecorded), which needs no
	// transaction around it. A turn no longer RUNNING (cancelled
	// meanwhile) still has its model call recorded, with the claim
	// checked as for any write, and is not ended here.
	final := len(st.Calls) == 0
	if final && t.s.dialect == dialect.Postgres {
		err := Persist(ctx, func(ctx context.Context) error {
			var err error
			finished, err = t.endRecorded(ctx, st)
			return err
		})
		if err != nil {
			return nil, false, fmt.Errorf("record the answer: %w", err)
		}
		if finished {
			t.unrecordedAgent = nil // the end's update recorded it
			return nil, true, nil
		}
	}
	if !final && t.s.dialect == dialect.Postgres {
		// The claim's check, the model call, its cost, the thinking and
		// the tool calls in one statement (stepRecorded).
		err := Persist(ctx, func(ctx context.Context) error {
			var err error
			rows, err = t.stepRecorded(ctx, st)
			return err
		})
		if err != nil {
			return nil, false, fmt.Errorf("record step: %w", err)
		}
		if rows != nil {
			t.unrecordedAgent = nil // the claim's update recorded it
			return rows, false, nil
		}
		// Not held: the claim is checked as for any write, which says why.
	}
	var claim func(ctx context.Context, tx *ent.Tx) (bool, error)
	if final && t.s.dialect != dialect.Postgres {
		claim = func(ctx context.Context, tx *ent.Tx) (bool, error) {
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
		if err := st.Call.record(ctx, tx, t.s.dialect, t.id, modelcall.KindSTEP, st.Number); err != nil {
			return fmt.Errorf("record model call: %w", err)
		}
		if st.Thought && !finished {
			if err := tx.Turn.Update().Where(turn.ID(t.id)).SetThinking(*st.Thinking).Exec(ctx); err != nil {
				return fmt.Errorf("record thinking: %w", err)
			}
		}
		if finished {
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

// endRecorded is the final answer's record on PostgreSQL, in one
// statement: the turn's end, as the update RecordStep sends on SQLite (the
// claim held, the turn RUNNING, the step unrecorded; the agent recorded
// if it is not yet); the conversation marked updated; and the step's
// model call with its cost added to the month's running totals, inserted
// only when the turn ended (the end's update feeds them all). A statement
// is atomic: no transaction is needed. It returns whether the turn ended;
// when it did not, nothing was written.
func (t *Turn) endRecorded(ctx context.Context, st Step) (bool, error) {
	now := t.s.now()
	b := sql.Dialect(dialect.Postgres)
	end, err := t.claimUpdate(b, st, sql.EQ(turn.FieldStatus, turn.StatusRUNNING.String()))
	if err != nil {
		return false, err
	}
	end.Set(turn.FieldStatus, turn.StatusCOMPLETED.String()).Set(turn.FieldFinishedAt, now).Set(turn.FieldAnswer, st.Call.Text).
		SetNull(turn.FieldClaimedBy).SetNull(turn.FieldHeartbeatAt).
		Returning(turn.FieldConversationID)
	ended := b.Table("ended")
	touch := b.Update(conversation.Table).Set(conversation.FieldUpdatedAt, now).
		Where(sql.In(conversation.FieldID, b.Select(ended.C(turn.FieldConversationID)).From(ended)))
	q := &sql.Builder{}
	q.SetDialect(dialect.Postgres)
	q.WriteString(`WITH "ended" AS `).Wrap(func(b *sql.Builder) { b.Join(end) })
	q.WriteString(`, "touched" AS `).Wrap(func(b *sql.Builder) { b.Join(touch) })
	st.Call.insertWith(q, "ended", t.id, modelcall.KindSTEP, st.Number)
	q.WriteString(` SELECT COUNT(*) FROM "ended"`)
	return count(ctx, t.s.client, q)
}

// stepRecorded records a step with tool calls on PostgreSQL in one
// statement, with no transaction around it: the claim's check, as
// writeClaimed's update (the claim held, the step unrecorded, the
// heartbeat renewed, the agent recorded if it is not yet), recording the
// turn's thinking; and, only when it holds, the step's model call with its
// cost and the tool calls' rows. It returns the rows, as ent's insert
// returns them; none when the claim did not hold, and nothing was written.
func (t *Turn) stepRecorded(ctx context.Context, st Step) ([]*ent.ToolCall, error) {
	now := t.s.now()
	claim, err := t.claimUpdate(sql.Dialect(dialect.Postgres), st)
	if err != nil {
		return nil, err
	}
	claim.Set(turn.FieldHeartbeatAt, now).Returning(turn.FieldID)
	q := &sql.Builder{}
	q.SetDialect(dialect.Postgres)
	q.WriteString(`WITH "claimed" AS `).Wrap(func(b *sql.Builder) { b.Join(claim) })
	st.Call.insertWith(q, "claimed", t.id, modelcall.KindSTEP, st.Number)
	// Each call's row is what ent's insert makes of it, its defaults
	// included; one insert each, so that each value is typed by its
	// column.
	rows := make([]*ent.ToolCall, len(st.Calls))
	for i, c := range st.Calls {
		rows[i] = &ent.ToolCall{
			TurnID: t.id, Position: st.Position + i, Step: st.Number, CallID: c.ID, Name: c.Name,
			Arguments: string(c.Arguments), Outcome: toolcall.DefaultOutcome, Attempts: toolcall.DefaultAttempts,
			Failures: toolcall.DefaultFailures, Evidence: toolcall.DefaultEvidence, Repairs: toolcall.DefaultRepairs,
			StartedAt: now,
		}
		r := rows[i]
		failures, err := json.Marshal(r.Failures)
		if err != nil {
			return nil, err
		}
		evidence, err := json.Marshal(r.Evidence)
		if err != nil {
			return nil, err
		}
		repairs, err := json.Marshal(r.Repairs)
		if err != nil {
			return nil, err
		}
		cols := []string{toolcall.FieldTurnID, toolcall.FieldPosition, toolcall.FieldStep, toolcall.FieldCallID, toolcall.FieldName,
			toolcall.FieldArguments, toolcall.FieldOutcome, toolcall.FieldAttempts, toolcall.FieldFailures, toolcall.FieldEvidence,
			toolcall.FieldRepairs, toolcall.FieldStartedAt}
		vals := []any{r.TurnID, r.Position, r.Step, r.CallID, r.Name, r.Arguments, r.Outcome, r.Attempts, failures, evidence, repairs, r.StartedAt}
		q.WriteString(fmt.Sprintf(`, "c%d" AS `, i)).Wrap(func(b *sql.Builder) {
			b.WriteString("INSERT INTO ").Ident(toolcall.Table).Wrap(func(b *sql.Builder) { b.IdentComma(cols...) }).
				WriteString(" SELECT ").Args(vals...).WriteString(` FROM "claimed" RETURNING `).Ident(toolcall.FieldID)
		})
	}
	q.WriteString(" ")
	for i := range st.Calls {
		if i > 0 {
			q.WriteString(" UNION ALL ")
		}
		q.WriteString(fmt.Sprintf(`SELECT %d, "id" FROM "c%d"`, i, i))
	}
	query, args := q.Query()
	res, err := t.s.client.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer res.Close()
	got := 0
	for res.Next() {
		var i, id int
		if err := res.Scan(&i, &id); err != nil {
			return nil, err
		}
		rows[i].ID = id
		got++
	}
	if err := res.Err(); err != nil {
		return nil, err
	}
	if got == 0 {
		return nil, nil
	}
	if got != len(rows) {
		return nil, fmt.Errorf("record tool calls: %d of %d rows returned", got, len(rows))
	}
	return rows, nil
}

// claimUpdate is the update of the turn that checks a step's record on
// PostgreSQL: the claim held, the step unrecorded (its model-call subquery
// correlated by the turn's id, as unrecorded's), and more; it records the
// turn's thinking when the step thought, and the agent if it is not yet.
func (t *Turn) claimUpdate(b *sql.DialectBuilder, st Step, more ...*sql.Predicate) (*sql.UpdateBuilder, error) {
	mt := b.Table(modelcall.Table)
	u := b.Update(turn.Table).
		Where(sql.And(append([]*sql.Predicate{sql.EQ(turn.FieldID, t.id), sql.EQ(turn.FieldClaimedBy, t.s.runner),
			sql.NotExists(b.Select(mt.C(modelcall.FieldTurnID)).From(mt).Where(sql.And(
				sql.ColumnsEQ(mt.C(modelcall.FieldTurnID), b.Table(turn.Table).C(turn.FieldID)),
				sql.EQ(mt.C(modelcall.FieldKind), modelcall.KindSTEP.String()),
				sql.EQ(mt.C(modelcall.FieldStep), st.Number))))}, more...)...))
	if st.Thought {
		u.Set(turn.FieldThinking, *st.Thinking)
	}
	if a := t.unrecordedAgent; a != nil {
		cfg, err := json.Marshal(a)
		if err != nil {
			return nil, fmt.Errorf("record the turn's agent: %w", err)
		}
		u.Set(turn.FieldAgentConfig, cfg)
	}
	return u, nil
}

// insertWith adds to q, a PostgreSQL WITH list, the model call's insert,
// of kind at step, and its cost's upsert into the month's running totals:
// each a row for each row of the gate, there at most one. INSERT …
// SELECT: PostgreSQL types each value by its column, as it types VALUES.
func (m ModelCall) insertWith(q *sql.Builder, gate string, turnID int, kind modelcall.Kind, step int) {
	cols, vals := m.fields(turnID, kind, step)
	q.WriteString(`, "call" AS `).Wrap(func(b *sql.Builder) {
		b.WriteString("INSERT INTO ").Ident(modelcall.Table).Wrap(func(b *sql.Builder) { b.IdentComma(cols...) }).
			WriteString(" SELECT ").Args(vals...).WriteString(" FROM ").Ident(gate)
	})
	if m.Cost == 0 {
		return
	}
	month := m.StartedAt.UTC().Format(db.SpendMonth)
	q.WriteString(`, "spent" AS `).Wrap(func(b *sql.Builder) {
		b.WriteString("INSERT INTO ").Ident(monthlyspend.Table).Wrap(func(b *sql.Builder) {
			b.IdentComma(monthlyspend.FieldOrganizationID, monthlyspend.FieldUserID, monthlyspend.FieldMonth, monthlyspend.FieldCostMicros)
		})
		b.WriteString(" SELECT ").Arg(m.OrganizationID).WriteString(`, "u"."id", `).Args(month, m.Cost).
			WriteString(" FROM ").Ident(gate).WriteString(` CROSS JOIN (VALUES (0::bigint), (`).Arg(m.UserID).WriteString(`::bigint)) AS "u"("id")`)
		spendConflict(b)
	})
}

// count runs q, whose one row is a count, and reports whether it is not
// zero.
func count(ctx context.Context, c *ent.Client, q *sql.Builder) (bool, error) {
	query, args := q.Query()
	rows, err := c.QueryContext(ctx, query, args...)
	if err != nil {
		return false, err
	}
	defer rows.Close()
	var n int
	if rows.Next() {
		if err := rows.Scan(&n); err != nil {
			return false, err
		}
	}
	return n > 0, rows.Err()
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
		if err := sm.Call.record(ctx, tx, t.s.dialect, t.id, modelcall.KindSUMMARY, round); err != nil {
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
