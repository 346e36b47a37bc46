package store

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"sync"

	"entgo.io/ent/dialect"
	"entgo.io/ent/dialect/sql"
	"entgo.io/ent/dialect/sql/schema"
	"entgo.io/ent/schema/field"

	"github.com/toolgate/toolgate/ent"
	"github.com/toolgate/toolgate/ent/migrate"
	"github.com/toolgate/toolgate/ent/schematype"
	"github.com/toolgate/toolgate/ent/storedresult"
	"github.com/toolgate/toolgate/ent/toolcall"
	"github.com/toolgate/toolgate/ent/turn"
	"github.com/toolgate/toolgate/runtime/preview"
)

// NewRef returns an opaque random ref: 128 bits, so a ref cannot be guessed,
// and nothing in it says where it belongs.
func NewRef() (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("make ref: %w", err)
	}
	return "r_" + base64.RawURLEncoding.EncodeToString(b), nil
}

// Result is content kept whole under a ref.
type Result struct {
	Kind              schematype.ResultKind
	Content           []byte
	TruncatedAtSource bool
}

// storeResult is the insert that keeps a result whole under ref, with its
// counts, before the model hears of it.
func storeResult(c *ent.Client, conversationID int, ref string, res Result) *ent.StoredResultCreate {
	kind := res.kind()
	counts := preview.Measure(kind, res.Content)
	content := res.Content
	if content == nil {
		content = []byte{}
	}
	return c.StoredResult.Create().
		SetConversationID(conversationID).SetRef(ref).SetKind(kind).SetContent(content).
		SetChars(counts.Chars).SetBytes(counts.Bytes).SetItems(counts.Items).
		SetTruncatedAtSource(res.TruncatedAtSource)
}

// CallRecord is a tool call's record: its outcome, the result stored under
// Ref, and what the model heard of it.
type CallRecord struct {
	// ID is the call's row, PENDING until this record.
	ID             int
	ConversationID int
	Arguments      string
	Outcome        schematype.Outcome
	Attempts       int
	Failures       []schematype.ItemFailure
	Repairs        []schematype.Repair
	Message        string
	Ref            string
	Result         Result
	// ArgumentsRef, when set, keeps the arguments whole under a ref of its
	// own (later turns replay them cut).
	ArgumentsRef string
	Heard        string
	Guardrail    string
	Evidence     []schematype.Span
}

// RecordCall stores a call's record and returns the bytes it stored.
// Calls that finish while another's record is being written are recorded
// together after it, in one transaction: each as soon as the database is
// free, in a few statements for the lot.
func (t *Turn) RecordCall(ctx context.Context, rec CallRecord) (int64, error) {
	e := &entry{rec: rec, done: make(chan struct{})}
	t.recs.add(ctx, t, e)
	return e.stored, e.err
}

// recorder writes the records of a turn's tool calls: the first call to
// finish writes its own, and while it does, the calls finishing meanwhile
// queue theirs, which it writes next, together.
type recorder struct {
	mu      sync.Mutex
	queue   []*entry
	writing bool
}

// entry is one call's record, and what its write gave.
type entry struct {
	rec    CallRecord
	stored int64
	err    error
	done   chan struct{}
}

// add queues e and returns once it is written, writing it (and what queues
// meanwhile) unless another call is writing already.
func (rc *recorder) add(ctx context.Context, t *Turn, e *entry) {
	rc.mu.Lock()
	rc.queue = append(rc.queue, e)
	if rc.writing {
		rc.mu.Unlock()
		<-e.done
		return
	}
	rc.writing = true
	for len(rc.queue) > 0 {
		batch := rc.queue
		rc.queue = nil
		rc.mu.Unlock()
		t.recordAll(ctx, batch)
		rc.mu.Lock()
	}
	rc.writing = false
	rc.mu.Unlock()
}

// recordAll writes the records of calls in one transaction: their results
// in one insert, then each call's update, which checks the claim (holds).
func (t *Turn) recordAll(ctx context.Context, batch []*entry) {
	if t.s.dialect == dialect.Postgres {
		err := Persist(ctx, func(ctx context.Context) error { return t.recordAllOne(ctx, batch) })
		for _, e := range batch {
			e.err = err
			close(e.done)
		}
		return
	}
	err := t.writeClaimed(ctx, nil, checkedByWrite, func(ctx context.Context, tx *ent.Tx) error {
		var creates []*ent.StoredResultCreate
		counts := make([]int, len(batch))
		for i, e := range batch {
			r := e.rec
			creates = append(creates, storeResult(tx.Client(), r.ConversationID, r.Ref, r.Result))
			counts[i] = 1
			if r.ArgumentsRef != "" {
				args := Result{Kind: schematype.KindJSON, Content: []byte(r.Arguments)}
				creates = append(creates, storeResult(tx.Client(), r.ConversationID, r.ArgumentsRef, args))
				counts[i] = 2
			}
		}
		stored, err := tx.StoredResult.CreateBulk(creates...).Save(ctx)
		if err != nil {
			return fmt.Errorf("store results: %w", err)
		}
		for i, e := range batch {
			sr := stored[0]
			e.stored = sr.Bytes
			if counts[i] > 1 {
				e.stored += stored[1].Bytes
			}
			stored = stored[counts[i]:]
			n, err := t.update(tx.Client(), e.rec).SetResultID(sr.ID).Save(ctx)
			if err != nil {
				return fmt.Errorf("record tool call: %w", err)
			}
			if n == 0 {
				held, err := tx.Turn.Query().Where(turn.ID(t.id), turn.ClaimedBy(t.s.runner)).Exist(ctx)
				switch {
				case err != nil:
					return fmt.Errorf("check claim: %w", err)
				case !held:
					return ErrLeaseLost
				}
				return fmt.Errorf("tool call %d: %w", e.rec.ID, ErrStepRecorded)
			}
		}
		return nil
	})
	for _, e := range batch {
		e.err = err
		close(e.done)
	}
}

// update is a call's record as its row's update, which checks the claim.
func (t *Turn) update(c *ent.Client, r CallRecord) *ent.ToolCallUpdate {
	// Update, not UpdateOne: ent would read the row back after writing it.
	upd := c.ToolCall.Update().Where(append(pendingCall(r.ID), t.holds())...).
		SetArguments(r.Arguments).SetOutcome(r.Outcome).SetAttempts(r.Attempts).
		SetFailures(nonNil(r.Failures)).SetRepairs(nonNil(r.Repairs)).SetFinishedAt(t.s.now()).
		SetRef(r.Ref).SetHeard(r.Heard).SetEvidence(nonNil(r.Evidence))
	if r.Message != "" {
		upd.SetMessage(r.Message)
	}
	if r.ArgumentsRef != "" {
		upd.SetArgumentsRef(r.ArgumentsRef)
	}
	if r.Guardrail != "" {
		upd.SetGuardrail(r.Guardrail)
	}
	return upd
}

// nonNil is s, or an empty slice: a JSON column holds [] rather than null.
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// recordAllOne is recordAll on PostgreSQL, in one statement and no
// transaction: while this runner holds the turn (its row locked, as
// holds locks it) and every call of the batch is PENDING, each result is
// stored and each call's update made, as recordAll's statements make them
// (the same columns, from the same builders); otherwise nothing is
// written, and the error says why.
func (t *Turn) recordAllOne(ctx context.Context, batch []*entry) error {
	now := t.s.now()
	q := &sql.Builder{}
	q.SetDialect(dialect.Postgres)
	q.WriteString(`WITH "held" AS (SELECT `).Ident(turn.FieldID).WriteString(" FROM ").Ident(turn.Table).
		WriteString(" WHERE ").Ident(turn.FieldID).WriteString(" = ").Arg(t.id).
		WriteString(" AND ").Ident(turn.FieldClaimedBy).WriteString(" = ").Arg(t.s.runner).WriteString(" FOR UPDATE)")
	ids := make([]any, len(batch))
	for i, e := range batch {
		ids[i] = e.rec.ID
	}
	q.WriteString(`, "gate" AS (SELECT 1 FROM "held" WHERE (SELECT COUNT(*) FROM `).Ident(toolcall.Table).
		WriteString(" WHERE ").Ident(toolcall.FieldID).WriteString(" IN (").Args(ids...).WriteString(") AND ").
		Ident(toolcall.FieldOutcome).WriteString(" = ").Arg(schematype.OutcomePending).WriteString(") = ").Arg(len(batch)).WriteString(")")
	stored := 0
	store := func(r CallRecord, ref string, res Result) (string, error) {
		c := storeResult(t.s.client, r.ConversationID, ref, res).SetCreatedAt(now).SetUpdatedAt(now)
		cols, vals, err := fieldsOf(c.Mutation(), storedresult.Table)
		if err != nil {
			return "", err
		}
		name := fmt.Sprintf("s%d", stored)
		stored++
		q.WriteString(", ").Ident(name).WriteString(" AS (INSERT INTO ").Ident(storedresult.Table).
			Wrap(func(b *sql.Builder) { b.IdentComma(cols...) }).
			WriteString(" SELECT ").Args(vals...).WriteString(` FROM "gate" RETURNING `).Ident(storedresult.FieldID).WriteString(")")
		return name, nil
	}
	for i, e := range batch {
		r := e.rec
		result, err := store(r, r.Ref, r.Result)
		if err != nil {
			return err
		}
		if r.ArgumentsRef != "" {
			if _, err := store(r, r.ArgumentsRef, Result{Kind: schematype.KindJSON, Content: []byte(r.Arguments)}); err != nil {
				return err
			}
		}
		cols, vals, err := fieldsOf(t.update(t.s.client, r).Mutation(), toolcall.Table)
		if err != nil {
			return err
		}
		q.WriteString(fmt.Sprintf(`, "u%d" AS (UPDATE `, i)).Ident(toolcall.Table).WriteString(" SET ")
		for j, col := range cols {
			q.Ident(col).WriteString(" = ").Arg(vals[j]).WriteString(", ")
		}
		q.Ident(toolcall.FieldResultID).WriteString(" = (SELECT ").Ident(storedresult.FieldID).WriteString(" FROM ").Ident(result).WriteString(")").
			WriteString(" WHERE ").Ident(toolcall.FieldID).WriteString(" = ").Arg(r.ID).WriteString(` AND EXISTS (SELECT 1 FROM "gate"))`)
	}
	q.WriteString(` SELECT COUNT(*) FROM "gate"`)
	ok, err := count(ctx, t.s.client, q)
	if err != nil {
		return fmt.Errorf("record tool calls: %w", err)
	}
	if !ok {
		held, err := t.s.client.Turn.Query().Where(turn.ID(t.id), turn.ClaimedBy(t.s.runner)).Exist(ctx)
		switch {
		case err != nil:
			return fmt.Errorf("check claim: %w", err)
		case !held:
			return ErrLeaseLost
		}
		return fmt.Errorf("tool calls %v: %w", ids, ErrStepRecorded)
	}
	for _, e := range batch {
		e.stored = e.rec.Result.bytes()
		if e.rec.ArgumentsRef != "" {
			e.stored += Result{Kind: schematype.KindJSON, Content: []byte(e.rec.Arguments)}.bytes()
		}
	}
	return nil
}

// kind is the result's kind: text unless it says.
func (res Result) kind() schematype.ResultKind {
	if res.Kind == "" {
		return schematype.KindText
	}
	return res.Kind
}

// bytes is what storeResult stores of res, in bytes.
func (res Result) bytes() int64 { return preview.Measure(res.kind(), res.Content).Bytes }

// jsonColumns are the JSON columns of the tables recordAllOne writes,
// read once at start: ent's migration rewrites its tables' lookups while
// it runs.
var jsonColumns = func() map[string]bool {
	m := map[string]bool{}
	for _, t := range []*schema.Table{migrate.ToolCallsTable, migrate.StoredResultsTable} {
		for _, c := range t.Columns {
			if c.Type == field.TypeJSON {
				m[t.Name+"."+c.Name] = true
			}
		}
	}
	return m
}()

// fieldsOf returns the columns of table that m sets and their values as
// ent writes them (a JSON column's marshalled).
func fieldsOf(m ent.Mutation, table string) ([]string, []any, error) {
	cols := m.Fields()
	vals := make([]any, len(cols))
	for i, col := range cols {
		v, _ := m.Field(col)
		if jsonColumns[table+"."+col] {
			b, err := json.Marshal(v)
			if err != nil {
				return nil, nil, fmt.Errorf("encode %s.%s: %w", table, col, err)
			}
			v = b
		}
		vals[i] = v
	}
	return cols, vals, nil
}
