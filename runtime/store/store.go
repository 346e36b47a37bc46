// Package store holds every statement the turn loop sends: the claim and
// the load, the history's read, the claim-checked writes of a run (its
// steps, its tool calls' records, its pauses, its end), and the sweep's
// reads. The dialects differ only here: PostgreSQL's claim that loads in
// the same statement and its end that marks the conversation updated in
// the same statement, SQLite's times read as text. The loop holds a Store
// and, for each run, a Turn, and reads as calls to them, as River's
// executor reads as calls to its completer.
package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"entgo.io/ent/dialect"
	"entgo.io/ent/dialect/sql"

	"github.com/toolgate/toolgate/ent"
	"github.com/toolgate/toolgate/ent/modelcall"
	"github.com/toolgate/toolgate/ent/predicate"
	"github.com/toolgate/toolgate/ent/schematype"
	"github.com/toolgate/toolgate/ent/toolcall"
	"github.com/toolgate/toolgate/ent/turn"
)

// Errors a write returns that end a run without ending its turn, or refuse
// a write.
var (
	// ErrLeaseLost: another runner took the turn (this one looked dead), or
	// the turn was cancelled: nothing more is written for it here.
	ErrLeaseLost = errors.New("turn no longer claimed by this runner")
	// ErrStepRecorded refuses to record a step twice.
	ErrStepRecorded = errors.New("already recorded")
)

// Store sends the loop's statements for one runner: its claims carry the
// runner's id, its writes the runner's clock.
type Store struct {
	client  *ent.Client
	dialect string
	// runner names the runner in the turns it claims.
	runner string
	now    func() time.Time
}

// New returns the store of the runner named runner, on client (which reads
// and writes as the system) in the database's dialect.
func New(client *ent.Client, dialectName, runner string, now func() time.Time) *Store {
	if now == nil {
		now = time.Now
	}
	return &Store{client: client, dialect: dialectName, runner: runner, now: now}
}

// Client is the client the store sends its statements with: a caller's
// own statements (Decide's) share its transaction.
func (s *Store) Client() *ent.Client { return s.client }

// Turn is one run's handle on its turn: every write it sends checks that
// the runner still holds the turn.
type Turn struct {
	s  *Store
	id int
	// unrecordedAgent is the agent the run uses, until the turn records it
	// (recordAgent): nil when the turn had recorded one already.
	unrecordedAgent *schematype.AgentConfig
	// recs writes the records of the step's tool calls.
	recs recorder
}

// Turn returns the handle of a run of turn id.
func (s *Store) Turn(id int) *Turn { return &Turn{s: s, id: id} }

// RecordAgent has the run's first write (its first step, a summary, a
// pause) record cfg, the agent the run uses, with its claim check, in the
// same statement, and before any tool call can ask for it. A run that
// writes nothing leaves it unrecorded, as it leaves nothing a later run
// must agree with.
func (t *Turn) RecordAgent(cfg *schematype.AgentConfig) { t.unrecordedAgent = cfg }

// recordAgent adds the unrecorded agent to the turn's update, and reports
// whether it did.
func (t *Turn) recordAgent(u *ent.TurnUpdate) bool {
	if t.unrecordedAgent == nil {
		return false
	}
	u.SetAgentConfig(t.unrecordedAgent)
	return true
}

// Write runs one of the turn's writes in a transaction, on a context of its
// own with retries on a busy database (Persist), and only while this
// runner holds the turn: the claim is checked, and the heartbeat renewed,
// in the same transaction, so a runner that lost the turn writes nothing.
func (t *Turn) Write(ctx context.Context, fn func(ctx context.Context, tx *ent.Tx) error) error {
	return t.writeClaimed(ctx, nil, nil, fn)
}

// checkedByWrite is the claim of a write whose own statement checks the
// claim (holds): no statement more.
func checkedByWrite(context.Context, *ent.Tx) (bool, error) { return true, nil }

// holds is the claim check of a tool call's record, in its update: the
// turn is this runner's, and on PostgreSQL its row is locked until the
// commit, as an update of it would lock it, so a runner taking the turn
// meanwhile waits for the record and then finds its heartbeat fresh.
// SQLite's one writer needs no lock.
func (t *Turn) holds() predicate.ToolCall {
	return func(s *sql.Selector) {
		tt := sql.Table(turn.Table)
		sub := sql.Dialect(s.Dialect()).Select(tt.C(turn.FieldID)).From(tt).
			Where(sql.And(sql.EQ(tt.C(turn.FieldID), t.id), sql.EQ(tt.C(turn.FieldClaimedBy), t.s.runner)))
		if s.Dialect() == dialect.Postgres {
			sub.ForUpdate()
		}
		s.Where(sql.Exists(sub))
	}
}

// unrecorded holds while the turn has not recorded the step: a claim's
// update that records a step checks it in the same statement.
// The subquery is correlated, by the turn's id (model_calls' turn_id
// index): ent's HasModelCallsWith is an uncorrelated IN over every model
// call of the step's number, which grows with all the turns ever run.
func unrecorded(step int) predicate.Turn {
	return func(s *sql.Selector) {
		mt := sql.Table(modelcall.Table)
		s.Where(sql.NotExists(sql.Select(mt.C(modelcall.FieldTurnID)).From(mt).Where(sql.And(
			sql.ColumnsEQ(mt.C(modelcall.FieldTurnID), s.C(turn.FieldID)),
			sql.EQ(mt.C(modelcall.FieldKind), modelcall.KindSTEP.String()),
			sql.EQ(mt.C(modelcall.FieldStep), step)))))
	}
}

// writeClaimed is Write whose claim check may be an update the write makes
// anyway: claim, when set, runs first in the transaction and reports
// whether it checked the claim (it changed a row only while this runner
// holds the turn); when it did not, the claim is checked as Write does.
// With step, the write records that step, and the claim's check also
// holds only while it is unrecorded (ErrStepRecorded otherwise).
func (t *Turn) writeClaimed(ctx context.Context, step *int, claim func(ctx context.Context, tx *ent.Tx) (bool, error),
	fn func(ctx context.Context, tx *ent.Tx) error) error {
	return Persist(ctx, func(ctx context.Context) error {
		tx, err := t.s.client.Tx(ctx)
		if err != nil {
			return fmt.Errorf("begin: %w", err)
		}
		defer func() { _ = tx.Rollback() }()
		checked, agent := false, false
		if claim != nil {
			if checked, err = claim(ctx, tx); err != nil {
				return fmt.Errorf("check claim: %w", err)
			}
		}
		if !checked {
			u := tx.Turn.Update().Where(turn.ID(t.id), turn.ClaimedBy(t.s.runner))
			if step != nil {
				u.Where(unrecorded(*step))
			}
			agent = t.recordAgent(u)
			n, err := u.SetHeartbeatAt(t.s.now()).Save(ctx)
			if err != nil {
				return fmt.Errorf("check claim: %w", err)
			}
			if n == 0 && step != nil {
				done, err := tx.ModelCall.Query().Where(modelcall.TurnID(t.id), modelcall.KindEQ(modelcall.KindSTEP), modelcall.Step(*step)).Exist(ctx)
				if err != nil {
					return fmt.Errorf("check step: %w", err)
				}
				if done {
					return fmt.Errorf("step %d: %w", *step, ErrStepRecorded)
				}
			}
			if n == 0 {
				return ErrLeaseLost
			}
		}
		if err := fn(ctx, tx); err != nil {
			return err
		}
		if err := tx.Commit(); err != nil {
			return fmt.Errorf("commit: %w", err)
		}
		if agent {
			t.unrecordedAgent = nil
		}
		return nil
	})
}

// pendingCall holds while a tool call has no outcome yet.
func pendingCall(id int) []predicate.ToolCall {
	return []predicate.ToolCall{toolcall.ID(id), toolcall.OutcomeEQ(schematype.OutcomePending)}
}
