package store

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"sync"

	"github.com/toolgate/toolgate/ent"
	"github.com/toolgate/toolgate/ent/schematype"
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
	kind := res.Kind
	if kind == "" {
		kind = schematype.KindText
	}
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
			n, err := t.update(tx, e.rec).SetResultID(sr.ID).Save(ctx)
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
func (t *Turn) update(tx *ent.Tx, r CallRecord) *ent.ToolCallUpdate {
	// Update, not UpdateOne: ent would read the row back after writing it.
	upd := tx.ToolCall.Update().Where(append(pendingCall(r.ID), t.holds())...).
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
