// Package queuepgx is River's pgx driver (riverpgxv5) as the job queue
// runs it on PostgreSQL: what an idle queue need not send is not sent,
// and every job inserted or made available is fetched at once.
package queuepgx

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
)

// Driver is River's pgx driver as the queue uses it on PostgreSQL.
// It sends what River asks of it, less what an idle queue need not send:
//
//   - River's transactions (those its executor begins) send their BEGIN
//     with their first statement (lazyTx), and one that sends no statement
//     sends nothing: no BEGIN, COMMIT or ROLLBACK.
//
//   - River's scheduler opens a transaction every 5 s to make due retries
//     and scheduled jobs available. It first asks, in one statement outside
//     it, whether any job is retryable or scheduled and due: when none is,
//     that statement is all it sends (3 before).
//
//   - River's notifier pings its listening connection every 5 s without
//     a notification (12 statements a minute from an idle replica). The
//     listener sends that ping at most once a ListenerPingEvery, and a
//     notification received counts as one (quietListener).
//
// Everything else (LISTEN/NOTIFY, fetches, the leader's election) is
// River's own.
type Driver struct {
	*riverpgxv5.Driver
	pool *pgxpool.Pool
}

// New wraps River's pgx driver over pool.
func New(pool *pgxpool.Pool) *Driver {
	return &Driver{Driver: riverpgxv5.New(pool), pool: pool}
}

// ListenerPingEvery is how often the listening connection is pinged at
// most. A connection that dies is noticed by the wait for notifications as
// soon as its socket says so, and by the next ping at the latest; until
// then the queue's poll fetches new jobs.
const ListenerPingEvery = time.Minute

// GetListener is River's listener, pinging at most once a
// ListenerPingEvery.
func (d *Driver) GetListener(params *riverdriver.GetListenenerParams) riverdriver.Listener {
	return &quietListener{Listener: d.Driver.GetListener(params)}
}

// quietListener is a listener whose Ping sends nothing while the
// connection was heard from (connected, pinged or notified) within
// ListenerPingEvery.
type quietListener struct {
	riverdriver.Listener
	mu    sync.Mutex
	heard time.Time
}

func (l *quietListener) hear() {
	l.mu.Lock()
	l.heard = time.Now()
	l.mu.Unlock()
}

func (l *quietListener) Connect(ctx context.Context) error {
	if err := l.Listener.Connect(ctx); err != nil {
		return err
	}
	l.hear()
	return nil
}

func (l *quietListener) Ping(ctx context.Context) error {
	l.mu.Lock()
	recent := time.Since(l.heard) < ListenerPingEvery
	l.mu.Unlock()
	if recent {
		return nil
	}
	if err := l.Listener.Ping(ctx); err != nil {
		return err
	}
	l.hear()
	return nil
}

func (l *quietListener) WaitForNotification(ctx context.Context) (*riverdriver.Notification, error) {
	n, err := l.Listener.WaitForNotification(ctx)
	if err == nil {
		l.hear()
	}
	return n, err
}

// GetExecutor returns an executor whose transactions begin with their
// first statement.
func (d *Driver) GetExecutor() riverdriver.Executor {
	return &pgExecutor{Executor: d.Driver.GetExecutor(), d: d}
}

// UnwrapExecutor is River's executor over tx.
func (d *Driver) UnwrapExecutor(tx pgx.Tx) riverdriver.ExecutorTx {
	return &pgTx{ExecutorTx: d.Driver.UnwrapExecutor(tx), d: d}
}

// UnwrapTx is the pgx transaction under execTx.
func (d *Driver) UnwrapTx(execTx riverdriver.ExecutorTx) pgx.Tx {
	if t, ok := execTx.(*pgTx); ok {
		execTx = t.ExecutorTx
	}
	return d.Driver.UnwrapTx(execTx)
}

// pgExecutor is River's pgx executor whose transactions begin with their
// first statement.
type pgExecutor struct {
	riverdriver.Executor
	d *Driver
}

func (e *pgExecutor) Begin(context.Context) (riverdriver.ExecutorTx, error) {
	return e.d.UnwrapExecutor(&lazyTx{pool: e.d.pool}), nil
}

// pgTx is a transaction of the queue's pgx executor.
type pgTx struct {
	riverdriver.ExecutorTx
	d *Driver
}

func (t *pgTx) Begin(ctx context.Context) (riverdriver.ExecutorTx, error) {
	sub, err := t.ExecutorTx.Begin(ctx)
	if err != nil {
		return nil, err
	}
	return &pgTx{ExecutorTx: sub, d: t.d}, nil
}

// JobSchedule first asks, outside the transaction, whether any job is
// retryable or scheduled and due by params.Now; when none is, it returns
// nothing, and the scheduler's transaction, not begun, sends nothing. A
// job that falls due meanwhile is found by the next run, as it would be
// had the transaction run a moment sooner.
func (t *pgTx) JobSchedule(ctx context.Context, params *riverdriver.JobScheduleParams) ([]*riverdriver.JobScheduleResult, error) {
	if due, err := t.d.anyDue(ctx, params); err == nil && !due {
		return nil, nil
	}
	res, err := t.ExecutorTx.JobSchedule(ctx, params)
	if err == nil {
		t.d.wakeWhenDue(res)
	}
	return res, err
}

// wakeWhenDue tells each queue of a job made available ahead of its time
// of it once the time comes. River's scheduler makes jobs available up to
// its interval (5 s) early but notifies only the queues of those already
// due, and a producer that listens fetches only when notified or when it
// polls, once a minute: such a job would wait for that poll. A notice for
// a job whose transaction then rolled back only makes a fetch find
// nothing.
func (d *Driver) wakeWhenDue(results []*riverdriver.JobScheduleResult) {
	horizon := time.Now().Add(5 * time.Millisecond) // River's own
	at := map[string]map[time.Time]bool{}           // one notice per queue and 10 ms
	for _, r := range results {
		if r.ConflictDiscarded || !r.Job.ScheduledAt.After(horizon) {
			continue
		}
		q, when := r.Job.Queue, r.Job.ScheduledAt.Truncate(10*time.Millisecond).Add(10*time.Millisecond)
		if at[q] == nil {
			at[q] = map[time.Time]bool{}
		}
		if at[q][when] {
			continue
		}
		at[q][when] = true
		payload, _ := json.Marshal(struct {
			Queue string `json:"queue"`
		}{q})
		time.AfterFunc(time.Until(when), func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			// Unheard (the pool closed, say), the job is found by the poll.
			_ = d.GetExecutor().NotifyMany(ctx, &riverdriver.NotifyManyParams{Payload: []string{string(payload)}, Topic: insertTopic})
		})
	}
}

// anyDue says whether any job is retryable or scheduled and due by
// params.Now (now when nil).
func (d *Driver) anyDue(ctx context.Context, params *riverdriver.JobScheduleParams) (bool, error) {
	now := time.Now()
	if params.Now != nil {
		now = *params.Now
	}
	table := pgx.Identifier{"river_job"}
	if params.Schema != "" {
		table = pgx.Identifier{params.Schema, "river_job"}
	}
	var due bool
	err := d.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM `+table.Sanitize()+
		` WHERE state IN ('retryable', 'scheduled') AND scheduled_at <= $1)`, now).Scan(&due)
	return due, err
}

// lazyTx is a pgx transaction that begins on the pool just before its
// first statement, so one that sends none sends nothing at all: no BEGIN,
// COMMIT or ROLLBACK. Nothing runs in it in between, so the transaction is
// the same; only its connection is taken a moment later.
type lazyTx struct {
	pool *pgxpool.Pool

	mu     sync.Mutex
	tx     pgx.Tx // nil until begun
	err    error  // the BEGIN's, if it failed
	closed bool   // ended before it began
}

// begin begins the transaction, once, with the context of its first
// statement.
func (l *lazyTx) begin(ctx context.Context) (pgx.Tx, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.tx != nil:
		return l.tx, nil
	case l.closed:
		return nil, pgx.ErrTxClosed
	case l.err != nil:
		return nil, l.err
	}
	l.tx, l.err = l.pool.Begin(ctx)
	return l.tx, l.err
}

// end ends a transaction that never began; ok is false when it did.
func (l *lazyTx) end() (pgx.Tx, bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.tx != nil {
		return l.tx, false, nil
	}
	if l.closed {
		return nil, true, pgx.ErrTxClosed
	}
	l.closed = true
	return nil, true, nil
}

func (l *lazyTx) Begin(ctx context.Context) (pgx.Tx, error) {
	tx, err := l.begin(ctx)
	if err != nil {
		return nil, err
	}
	return tx.Begin(ctx)
}

func (l *lazyTx) Commit(ctx context.Context) error {
	tx, never, err := l.end()
	if never {
		return err
	}
	return tx.Commit(ctx)
}

func (l *lazyTx) Rollback(ctx context.Context) error {
	tx, never, err := l.end()
	if never {
		return err
	}
	return tx.Rollback(ctx)
}

func (l *lazyTx) CopyFrom(ctx context.Context, table pgx.Identifier, columns []string, rows pgx.CopyFromSource) (int64, error) {
	tx, err := l.begin(ctx)
	if err != nil {
		return 0, err
	}
	return tx.CopyFrom(ctx, table, columns, rows)
}

func (l *lazyTx) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	tx, err := l.begin(ctx)
	if err != nil {
		return errBatch{err}
	}
	return tx.SendBatch(ctx, b)
}

// LargeObjects begins the transaction: its large objects are used at once.
func (l *lazyTx) LargeObjects() pgx.LargeObjects {
	tx, err := l.begin(context.Background())
	if err != nil {
		return pgx.LargeObjects{}
	}
	return tx.LargeObjects()
}

func (l *lazyTx) Prepare(ctx context.Context, name, sql string) (*pgconn.StatementDescription, error) {
	tx, err := l.begin(ctx)
	if err != nil {
		return nil, err
	}
	return tx.Prepare(ctx, name, sql)
}

func (l *lazyTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	tx, err := l.begin(ctx)
	if err != nil {
		return pgconn.CommandTag{}, err
	}
	return tx.Exec(ctx, sql, args...)
}

func (l *lazyTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	tx, err := l.begin(ctx)
	if err != nil {
		return nil, err
	}
	return tx.Query(ctx, sql, args...)
}

func (l *lazyTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	tx, err := l.begin(ctx)
	if err != nil {
		return errRow{err}
	}
	return tx.QueryRow(ctx, sql, args...)
}

// Conn is the transaction's connection, nil before it begins. River asks
// for it, or for Config, just before each statement, to learn the pool's
// query mode: Config answers without beginning.
func (l *lazyTx) Conn() *pgx.Conn {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.tx == nil {
		return nil
	}
	return l.tx.Conn()
}

// Config is the pool's.
func (l *lazyTx) Config() *pgxpool.Config { return l.pool.Config() }

// errRow and errBatch return a failed BEGIN's error.
type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }

type errBatch struct{ err error }

func (b errBatch) Exec() (pgconn.CommandTag, error) { return pgconn.CommandTag{}, b.err }
func (b errBatch) Query() (pgx.Rows, error)         { return nil, b.err }
func (b errBatch) QueryRow() pgx.Row                { return errRow(b) }
func (b errBatch) Close() error                     { return b.err }

var _ pgx.Tx = (*lazyTx)(nil)
