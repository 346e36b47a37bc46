// Package queuesqlite is River's SQLite driver (riversqlite) as the job
// queue runs it: what an idle queue need not send is not sent.
package queuesqlite

import (
	"bytes"
	"context"
	"database/sql"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/riverdriver/riversqlite"
	"github.com/riverqueue/river/rivertype"

	"github.com/toolgate/toolgate/db/conn"
)

// Driver is River's SQLite driver as the queue uses it. It
// sends what River asks of it, less what an idle queue need not send:
//
//   - No emulation of LISTEN/NOTIFY, which polls a table every 50 ms: told
//     the driver cannot listen, River wakes its own producer when this
//     process inserts a job.
//   - Each queue's producer reads its queue's settings (paused, metadata)
//     every 2 s when it cannot listen. The executor answers from what it
//     read within the last SettingsFresh, and reads again once this
//     process changes a queue's settings (pause, resume, update): a change
//     made here is seen at the next read, one made by another process
//     sharing the file within SettingsFresh, as on PostgreSQL, where
//     a producer that listens reads them once a minute.
//   - River's scheduler opens a transaction every 5 s to make due retries
//     and scheduled jobs available. Its transactions send their BEGIN with
//     their first statement (conn.DeferBegin), and the scheduler first asks, in
//     one statement outside them, whether any job is retryable or
//     scheduled and due: when none is, nothing else is sent.
type Driver struct {
	*riversqlite.Driver
	settings *queueSettings
}

// SettingsFresh is how long a SQLite queue's settings, once read, are
// taken as they were (see Driver).
const SettingsFresh = time.Minute

// New wraps River's SQLite driver over pool.
func New(pool *sql.DB) *Driver {
	return &Driver{Driver: riversqlite.New(pool), settings: &queueSettings{read: map[string]queueRead{}}}
}

// SupportsListener is false: River then wakes its own producer when this
// process inserts a job, instead of polling a table every 50 ms.
func (*Driver) SupportsListener() bool { return false }

// SupportsListenNotify is false, as SupportsListener.
func (*Driver) SupportsListenNotify() bool { return false }

// GetExecutor returns an executor that keeps the queues' settings and
// defers its transactions' BEGIN.
func (d *Driver) GetExecutor() riverdriver.Executor {
	return &executor{Executor: d.Driver.GetExecutor(), d: d}
}

// UnwrapExecutor is River's executor over tx, its writes to queues'
// settings read again once it commits.
func (d *Driver) UnwrapExecutor(tx *sql.Tx) riverdriver.ExecutorTx {
	return &txExecutor{ExecutorTx: d.Driver.UnwrapExecutor(tx), d: d, root: &txRoot{}}
}

// UnwrapTx is the database/sql transaction under execTx.
func (d *Driver) UnwrapTx(execTx riverdriver.ExecutorTx) *sql.Tx {
	if t, ok := execTx.(*txExecutor); ok {
		execTx = t.ExecutorTx
	}
	return d.Driver.UnwrapTx(execTx)
}

// queueSettings are the queues' settings as last read, by schema and name.
// gen counts the writes to them: a read that began before a write does not
// keep what it read.
type queueSettings struct {
	mu   sync.Mutex
	read map[string]queueRead
	gen  uint64
}

type queueRead struct {
	q  rivertype.Queue
	at time.Time
}

func settingsKey(schema, name string) string { return schema + "." + name }

func (s *queueSettings) get(key string) (*rivertype.Queue, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.read[key]
	if !ok || time.Since(r.at) >= SettingsFresh {
		return nil, false
	}
	q := r.q
	q.Metadata = bytes.Clone(q.Metadata)
	return &q, true
}

// generation is the count of writes so far, for put.
func (s *queueSettings) generation() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gen
}

// put keeps q, read at at, unless a write came since generation gen.
func (s *queueSettings) put(key string, q *rivertype.Queue, at time.Time, gen uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gen != gen {
		return
	}
	c := *q
	c.Metadata = bytes.Clone(q.Metadata)
	s.read[key] = queueRead{q: c, at: at}
}

// wrote keeps q as a write returned it.
func (s *queueSettings) wrote(key string, q *rivertype.Queue, at time.Time) {
	s.mu.Lock()
	s.gen++
	gen := s.gen
	s.mu.Unlock()
	s.put(key, q, at, gen)
}

// forget drops the settings of the queues named (of every queue when a
// name is "*", as River's pause and resume take it): the next read of each
// goes to the database.
func (s *queueSettings) forget(schema string, names ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gen++
	for _, name := range names {
		if name == "*" {
			clear(s.read)
			return
		}
		delete(s.read, settingsKey(schema, name))
	}
}

// forgetAll drops every queue's settings.
func (s *queueSettings) forgetAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gen++
	clear(s.read)
}

// executor is River's SQLite executor with the queue's settings kept
// and its transactions deferred (Driver).
type executor struct {
	riverdriver.Executor
	d *Driver
}

func (e *executor) Begin(ctx context.Context) (riverdriver.ExecutorTx, error) {
	tx, err := e.Executor.Begin(conn.DeferBegin(ctx))
	if err != nil {
		return nil, err
	}
	return &txExecutor{ExecutorTx: tx, d: e.d, root: &txRoot{}}, nil
}

func (e *executor) QueueGet(ctx context.Context, params *riverdriver.QueueGetParams) (*rivertype.Queue, error) {
	key := settingsKey(params.Schema, params.Name)
	if q, ok := e.d.settings.get(key); ok {
		return q, nil
	}
	at, gen := time.Now(), e.d.settings.generation()
	q, err := e.Executor.QueueGet(ctx, params)
	if err == nil && q != nil {
		e.d.settings.put(key, q, at, gen)
	}
	return q, err
}

// The writes to queues' settings: those written are read again
// afterwards, or kept as the write returned them.

func (e *executor) QueueCreateOrSetUpdatedAt(ctx context.Context, params *riverdriver.QueueCreateOrSetUpdatedAtParams) (*rivertype.Queue, error) {
	return e.keep(params.Schema, params.Name, func() (*rivertype.Queue, error) {
		return e.Executor.QueueCreateOrSetUpdatedAt(ctx, params)
	})
}

func (e *executor) QueueUpdate(ctx context.Context, params *riverdriver.QueueUpdateParams) (*rivertype.Queue, error) {
	return e.keep(params.Schema, params.Name, func() (*rivertype.Queue, error) {
		return e.Executor.QueueUpdate(ctx, params)
	})
}

// keep runs write, which returns the queue's row as written, and keeps it.
func (e *executor) keep(schema, name string, write func() (*rivertype.Queue, error)) (*rivertype.Queue, error) {
	at := time.Now()
	e.d.settings.forget(schema, name)
	q, err := write()
	if err != nil || q == nil {
		e.d.settings.forget(schema, name)
		return q, err
	}
	e.d.settings.wrote(settingsKey(schema, name), q, at)
	return q, nil
}

func (e *executor) QueueDeleteExpired(ctx context.Context, params *riverdriver.QueueDeleteExpiredParams) ([]string, error) {
	names, err := e.Executor.QueueDeleteExpired(ctx, params)
	e.d.settings.forget(params.Schema, names...)
	return names, err
}

func (e *executor) QueuePause(ctx context.Context, params *riverdriver.QueuePauseParams) error {
	defer e.d.settings.forget(params.Schema, params.Name)
	return e.Executor.QueuePause(ctx, params)
}

func (e *executor) QueueResume(ctx context.Context, params *riverdriver.QueueResumeParams) error {
	defer e.d.settings.forget(params.Schema, params.Name)
	return e.Executor.QueueResume(ctx, params)
}

// txExecutor is a transaction of the queue's SQLite executor. Its reads of
// queues' settings go to the database; its writes to them are read again
// once it commits.
type txExecutor struct {
	riverdriver.ExecutorTx
	d    *Driver
	root *txRoot
}

// txRoot is what a transaction and its savepoints share.
type txRoot struct {
	wroteSettings atomic.Bool
}

func (t *txExecutor) Begin(ctx context.Context) (riverdriver.ExecutorTx, error) {
	sub, err := t.ExecutorTx.Begin(ctx)
	if err != nil {
		return nil, err
	}
	return &txExecutor{ExecutorTx: sub, d: t.d, root: t.root}, nil
}

func (t *txExecutor) Commit(ctx context.Context) error {
	err := t.ExecutorTx.Commit(ctx)
	if t.root.wroteSettings.Load() {
		t.d.settings.forgetAll()
	}
	return err
}

// wrote notes a write to queues' settings: forgotten now, and again at
// commit, in case they were read meanwhile.
func (t *txExecutor) wrote() {
	t.root.wroteSettings.Store(true)
	t.d.settings.forgetAll()
}

func (t *txExecutor) QueueCreateOrSetUpdatedAt(ctx context.Context, params *riverdriver.QueueCreateOrSetUpdatedAtParams) (*rivertype.Queue, error) {
	t.wrote()
	return t.ExecutorTx.QueueCreateOrSetUpdatedAt(ctx, params)
}

func (t *txExecutor) QueueDeleteExpired(ctx context.Context, params *riverdriver.QueueDeleteExpiredParams) ([]string, error) {
	t.wrote()
	return t.ExecutorTx.QueueDeleteExpired(ctx, params)
}

func (t *txExecutor) QueuePause(ctx context.Context, params *riverdriver.QueuePauseParams) error {
	t.wrote()
	return t.ExecutorTx.QueuePause(ctx, params)
}

func (t *txExecutor) QueueResume(ctx context.Context, params *riverdriver.QueueResumeParams) error {
	t.wrote()
	return t.ExecutorTx.QueueResume(ctx, params)
}

func (t *txExecutor) QueueUpdate(ctx context.Context, params *riverdriver.QueueUpdateParams) (*rivertype.Queue, error) {
	t.wrote()
	return t.ExecutorTx.QueueUpdate(ctx, params)
}

// JobSchedule first asks, outside the transaction, whether any job is
// retryable or scheduled and due by params.Now; when none is, it returns
// nothing, and the scheduler's transaction, deferred, sends nothing. A
// job that falls due meanwhile is found by the next run, as it would be
// had the transaction run a moment sooner.
func (t *txExecutor) JobSchedule(ctx context.Context, params *riverdriver.JobScheduleParams) ([]*riverdriver.JobScheduleResult, error) {
	if due, err := t.d.anyDue(ctx, params); err == nil && !due {
		return nil, nil
	}
	return t.ExecutorTx.JobSchedule(ctx, params)
}

// anyDue says whether any job is retryable or scheduled and due by
// params.Now (now when nil), in the time format River's SQLite driver
// writes.
func (d *Driver) anyDue(ctx context.Context, params *riverdriver.JobScheduleParams) (bool, error) {
	now := time.Now()
	if params.Now != nil {
		now = *params.Now
	}
	table := "river_job"
	if params.Schema != "" {
		table = strconv.Quote(params.Schema) + "." + table
	}
	var due int64
	err := d.Driver.GetExecutor().QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM `+table+
		` WHERE state IN ('retryable', 'scheduled') AND scheduled_at <= ?)`,
		now.UTC().Round(time.Millisecond).Format("2006-01-02 15:04:05.000")).Scan(&due)
	return due != 0, err
}
