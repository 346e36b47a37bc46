package db

import (
	"bytes"
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/riverdriver/riversqlite"
	"github.com/riverqueue/river/rivertype"
)

// IdlePoll is how often a job queue on SQLite looks for jobs it was not
// told about: the jobs this process inserts wake its own queue at once, so
// a poll finds only retries that fell due (a retry starts at most IdlePoll
// late). ListenPoll is the same on PostgreSQL, where every insert, and
// every retry that falls due, is notified: its poll is only a safety net,
// as is the turns' queue's on both databases, behind the sweep that
// enqueues again a turn not taken up within loop.StaleAfter.
const (
	IdlePoll   = 10 * time.Second
	ListenPoll = time.Minute
)

// Queue is the database's River job queue: turns and file processing run
// as durable jobs in it, on PostgreSQL and on SQLite alike.
type Queue struct {
	d      *DB
	shared *shared
}

// Queue returns the database's job queue.
func (d *DB) Queue() Queue { return Queue{d: d} }

// Shared returns the queue with one River client for all its users: each
// Client call adds its queues (and the workers it registered on Workers)
// to that one client, made and started by the first Start (or Insert). A
// server works its turns and its documents on it, so it elects one leader
// and polls once, not once per user; several runners of one test process
// (replicas) each keep a client of their own by using Queue.
func (q Queue) Shared() Queue {
	return Queue{d: q.d, shared: &shared{q: Queue{d: q.d}, workers: river.NewWorkers(), cfg: river.Config{Queues: map[string]river.QueueConfig{}}}}
}

// Workers returns the registry a client of the queue is made with: one for
// every user of a shared queue, a new one otherwise.
func (q Queue) Workers() *river.Workers {
	if q.shared != nil {
		return q.shared.workers
	}
	return river.NewWorkers()
}

// JobClient is a River client over the queue, whichever the driver.
type JobClient interface {
	// Start starts working jobs, until Stop.
	Start(ctx context.Context) error
	// Stop stops fetching and waits for the jobs in flight.
	Stop(ctx context.Context) error
	// StopAndCancel cancels the jobs in flight and waits for them.
	StopAndCancel(ctx context.Context) error
	// Insert enqueues a job outside any transaction.
	Insert(ctx context.Context, args river.JobArgs, opts *river.InsertOpts) (*rivertype.JobInsertResult, error)
}

// Client returns a River client over the queue, with cfg's workers and
// queues. How it learns of new jobs is set here: on PostgreSQL it has a
// pgx pool of its own and listens, so a job inserted by any replica is
// fetched at once and an idle queue sends almost nothing; on SQLite it is
// woken by the jobs this process inserts and polls every IdlePoll.
//
// On a shared queue it returns a handle on the one client: cfg's workers
// must be the queue's Workers, its queues are added to the client's, and a
// worker that needs its own timeout or retry policy says so itself
// (Timeout, NextRetry), as the client's are shared.
func (q Queue) Client(cfg *river.Config) (JobClient, error) {
	if q.shared != nil {
		return q.shared.add(cfg)
	}
	c := *cfg
	if c.FetchPollInterval == 0 {
		c.FetchPollInterval = IdlePoll
		if q.d.jobs != nil {
			c.FetchPollInterval = ListenPoll
		}
	}
	if q.d.jobs != nil {
		c.PollOnly = false
		drv := newPGQueueDriver(q.d.jobs)
		client, err := river.NewClient(drv, &c)
		if err != nil {
			return nil, fmt.Errorf("job queue: %w", err)
		}
		return &wakingClient{Client: client, exec: drv.GetExecutor(), cooldown: cmp.Or(c.FetchCooldown, river.FetchCooldownDefault), sent: map[string]time.Time{}}, nil
	}
	c.PollOnly = true
	client, err := river.NewClient(newSQLiteQueueDriver(q.d.SQL), &c)
	if err != nil {
		return nil, fmt.Errorf("job queue: %w", err)
	}
	return client, nil
}

// shared is the one client of a shared queue, and what its users asked of
// it.
type shared struct {
	q       Queue
	workers *river.Workers

	mu     sync.Mutex
	cfg    river.Config // merged
	client JobClient    // made at the first Start or Insert
	err    error
	// started, stopped: the client starts once, for all, and stops once
	// (the first Stop drains every user's jobs); cancelled, the same for
	// StopAndCancel.
	started, stopped, cancelled bool
}

func (s *shared) add(cfg *river.Config) (JobClient, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.client != nil:
		return nil, errors.New("job queue: a client joins a shared queue before it starts")
	case cfg.Workers != s.workers:
		return nil, errors.New("job queue: a shared queue's client registers its workers on Queue.Workers")
	case cfg.ID != "" && s.cfg.ID != "" && cfg.ID != s.cfg.ID:
		return nil, errors.New("job queue: a shared queue's client has one ID")
	}
	for name, qc := range cfg.Queues {
		if _, ok := s.cfg.Queues[name]; ok {
			return nil, fmt.Errorf("job queue: queue %q is already served", name)
		}
		s.cfg.Queues[name] = qc
	}
	c := &s.cfg
	c.Workers = s.workers
	if cfg.FetchCooldown > 0 && (c.FetchCooldown == 0 || cfg.FetchCooldown < c.FetchCooldown) {
		c.FetchCooldown = cfg.FetchCooldown
	}
	c.RescueStuckJobsAfter = max(c.RescueStuckJobsAfter, cfg.RescueStuckJobsAfter)
	// The client's ID is what River records as a job's worker
	// (attempted_by): the turn runner names it, as its claims carry it.
	c.ID = cmp.Or(c.ID, cfg.ID)
	if c.Logger == nil {
		c.Logger = cfg.Logger
	}
	return sharedClient{s}, nil
}

// get makes the client, once.
func (s *shared) get() (JobClient, error) {
	if s.client == nil && s.err == nil {
		s.client, s.err = s.q.Client(&s.cfg)
	}
	return s.client, s.err
}

// sharedClient is one user's handle on a shared queue's client.
type sharedClient struct{ s *shared }

func (h sharedClient) Start(ctx context.Context) error {
	h.s.mu.Lock()
	defer h.s.mu.Unlock()
	c, err := h.s.get()
	if err != nil || h.s.started {
		return err
	}
	h.s.started = true
	return c.Start(ctx)
}

func (h sharedClient) Stop(ctx context.Context) error {
	return h.once(&h.s.stopped, func(c JobClient) error { return c.Stop(ctx) })
}

func (h sharedClient) StopAndCancel(ctx context.Context) error {
	return h.once(&h.s.cancelled, func(c JobClient) error { return c.StopAndCancel(ctx) })
}

// once calls stop on the started client the first time done is set.
func (h sharedClient) once(done *bool, stop func(JobClient) error) error {
	h.s.mu.Lock()
	if *done || !h.s.started {
		h.s.mu.Unlock()
		return nil
	}
	*done = true
	c := h.s.client
	h.s.mu.Unlock()
	return stop(c)
}

func (h sharedClient) Insert(ctx context.Context, args river.JobArgs, opts *river.InsertOpts) (*rivertype.JobInsertResult, error) {
	h.s.mu.Lock()
	c, err := h.s.get()
	h.s.mu.Unlock()
	if err != nil {
		return nil, err
	}
	return c.Insert(ctx, args, opts)
}

// wakingClient is a River client on PostgreSQL whose every inserted job
// is fetched at once. River notifies its producers of an insert in the
// inserting transaction, but at most once per queue per FetchCooldown:
// a job inserted right after another is told of by no one, and waits for
// the next poll (ListenPoll, a minute) if the fetch the first woke took
// its snapshot before the second committed. The same happens to a job a
// duplicate insert of it locked while a fetch passed over it. So after
// such an insert, committed, the queue is notified again; the producer
// debounces what it hears, so this costs a fetch at most, and only in
// bursts.
type wakingClient struct {
	*river.Client[pgx.Tx]
	exec     riverdriver.Executor
	cooldown time.Duration

	mu   sync.Mutex
	sent map[string]time.Time // each queue's last insert
}

func (c *wakingClient) Insert(ctx context.Context, args river.JobArgs, opts *river.InsertOpts) (*rivertype.JobInsertResult, error) {
	now := time.Now()
	res, err := c.Client.Insert(ctx, args, opts)
	if err != nil || res.Job.State != rivertype.JobStateAvailable {
		return res, err
	}
	queue := res.Job.Queue
	c.mu.Lock()
	// River surely notified if its last notification, no later than the
	// last insert (give or take the moment between the two clocks read),
	// is older than the cooldown; otherwise it may not have.
	quiet := now.Sub(c.sent[queue]) > c.cooldown+5*time.Millisecond
	c.sent[queue] = now
	c.mu.Unlock()
	if quiet && !res.UniqueSkippedAsDuplicate {
		return res, nil
	}
	payload, _ := json.Marshal(struct {
		Queue string `json:"queue"`
	}{queue})
	// The job is in whatever this says: unheard, it is found by the poll.
	_ = c.exec.NotifyMany(context.WithoutCancel(ctx), &riverdriver.NotifyManyParams{Payload: []string{string(payload)}, Topic: insertTopic})
	return res, nil
}

// insertTopic is the channel River's producers listen on for inserts.
const insertTopic = "river_insert"

// sqliteQueueDriver is River's SQLite driver as the queue uses it. It
// sends what River asks of it, less what an idle queue need not send:
//
//   - No emulation of LISTEN/NOTIFY, which polls a table every 50 ms: told
//     the driver cannot listen, River wakes its own producer when this
//     process inserts a job.
//   - Each queue's producer reads its queue's settings (paused, metadata)
//     every 2 s when it cannot listen. The executor answers from what it
//     read within the last QueueSettingsFresh, and reads again once this
//     process changes a queue's settings (pause, resume, update): a change
//     made here is seen at the next read, one made by another process
//     sharing the file within QueueSettingsFresh, as on PostgreSQL, where
//     a producer that listens reads them once a minute.
//   - River's scheduler opens a transaction every 5 s to make due retries
//     and scheduled jobs available. Its transactions send their BEGIN with
//     their first statement (deferBegin), and the scheduler first asks, in
//     one statement outside them, whether any job is retryable or
//     scheduled and due: when none is, nothing else is sent.
type sqliteQueueDriver struct {
	*riversqlite.Driver
	settings *queueSettings
}

// QueueSettingsFresh is how long a SQLite queue's settings, once read, are
// taken as they were (see sqliteQueueDriver).
const QueueSettingsFresh = time.Minute

func newSQLiteQueueDriver(pool *sql.DB) *sqliteQueueDriver {
	return &sqliteQueueDriver{Driver: riversqlite.New(pool), settings: &queueSettings{read: map[string]queueRead{}}}
}

func (*sqliteQueueDriver) SupportsListener() bool     { return false }
func (*sqliteQueueDriver) SupportsListenNotify() bool { return false }

func (d *sqliteQueueDriver) GetExecutor() riverdriver.Executor {
	return &sqliteExecutor{Executor: d.Driver.GetExecutor(), d: d}
}

func (d *sqliteQueueDriver) UnwrapExecutor(tx *sql.Tx) riverdriver.ExecutorTx {
	return &sqliteTx{ExecutorTx: d.Driver.UnwrapExecutor(tx), d: d, root: &sqliteTxRoot{}}
}

func (d *sqliteQueueDriver) UnwrapTx(execTx riverdriver.ExecutorTx) *sql.Tx {
	if t, ok := execTx.(*sqliteTx); ok {
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
	if !ok || time.Since(r.at) >= QueueSettingsFresh {
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

// sqliteExecutor is River's SQLite executor with the queue's settings kept
// and its transactions deferred (sqliteQueueDriver).
type sqliteExecutor struct {
	riverdriver.Executor
	d *sqliteQueueDriver
}

func (e *sqliteExecutor) Begin(ctx context.Context) (riverdriver.ExecutorTx, error) {
	tx, err := e.Executor.Begin(deferBegin(ctx))
	if err != nil {
		return nil, err
	}
	return &sqliteTx{ExecutorTx: tx, d: e.d, root: &sqliteTxRoot{}}, nil
}

func (e *sqliteExecutor) QueueGet(ctx context.Context, params *riverdriver.QueueGetParams) (*rivertype.Queue, error) {
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

func (e *sqliteExecutor) QueueCreateOrSetUpdatedAt(ctx context.Context, params *riverdriver.QueueCreateOrSetUpdatedAtParams) (*rivertype.Queue, error) {
	return e.keep(params.Schema, params.Name, func() (*rivertype.Queue, error) {
		return e.Executor.QueueCreateOrSetUpdatedAt(ctx, params)
	})
}

func (e *sqliteExecutor) QueueUpdate(ctx context.Context, params *riverdriver.QueueUpdateParams) (*rivertype.Queue, error) {
	return e.keep(params.Schema, params.Name, func() (*rivertype.Queue, error) {
		return e.Executor.QueueUpdate(ctx, params)
	})
}

// keep runs write, which returns the queue's row as written, and keeps it.
func (e *sqliteExecutor) keep(schema, name string, write func() (*rivertype.Queue, error)) (*rivertype.Queue, error) {
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

func (e *sqliteExecutor) QueueDeleteExpired(ctx context.Context, params *riverdriver.QueueDeleteExpiredParams) ([]string, error) {
	names, err := e.Executor.QueueDeleteExpired(ctx, params)
	e.d.settings.forget(params.Schema, names...)
	return names, err
}

func (e *sqliteExecutor) QueuePause(ctx context.Context, params *riverdriver.QueuePauseParams) error {
	defer e.d.settings.forget(params.Schema, params.Name)
	return e.Executor.QueuePause(ctx, params)
}

func (e *sqliteExecutor) QueueResume(ctx context.Context, params *riverdriver.QueueResumeParams) error {
	defer e.d.settings.forget(params.Schema, params.Name)
	return e.Executor.QueueResume(ctx, params)
}

// sqliteTx is a transaction of the queue's SQLite executor. Its reads of
// queues' settings go to the database; its writes to them are read again
// once it commits.
type sqliteTx struct {
	riverdriver.ExecutorTx
	d    *sqliteQueueDriver
	root *sqliteTxRoot
}

// sqliteTxRoot is what a transaction and its savepoints share.
type sqliteTxRoot struct {
	wroteSettings atomic.Bool
}

func (t *sqliteTx) Begin(ctx context.Context) (riverdriver.ExecutorTx, error) {
	sub, err := t.ExecutorTx.Begin(ctx)
	if err != nil {
		return nil, err
	}
	return &sqliteTx{ExecutorTx: sub, d: t.d, root: t.root}, nil
}

func (t *sqliteTx) Commit(ctx context.Context) error {
	err := t.ExecutorTx.Commit(ctx)
	if t.root.wroteSettings.Load() {
		t.d.settings.forgetAll()
	}
	return err
}

// wrote notes a write to queues' settings: forgotten now, and again at
// commit, in case they were read meanwhile.
func (t *sqliteTx) wrote() {
	t.root.wroteSettings.Store(true)
	t.d.settings.forgetAll()
}

func (t *sqliteTx) QueueCreateOrSetUpdatedAt(ctx context.Context, params *riverdriver.QueueCreateOrSetUpdatedAtParams) (*rivertype.Queue, error) {
	t.wrote()
	return t.ExecutorTx.QueueCreateOrSetUpdatedAt(ctx, params)
}

func (t *sqliteTx) QueueDeleteExpired(ctx context.Context, params *riverdriver.QueueDeleteExpiredParams) ([]string, error) {
	t.wrote()
	return t.ExecutorTx.QueueDeleteExpired(ctx, params)
}

func (t *sqliteTx) QueuePause(ctx context.Context, params *riverdriver.QueuePauseParams) error {
	t.wrote()
	return t.ExecutorTx.QueuePause(ctx, params)
}

func (t *sqliteTx) QueueResume(ctx context.Context, params *riverdriver.QueueResumeParams) error {
	t.wrote()
	return t.ExecutorTx.QueueResume(ctx, params)
}

func (t *sqliteTx) QueueUpdate(ctx context.Context, params *riverdriver.QueueUpdateParams) (*rivertype.Queue, error) {
	t.wrote()
	return t.ExecutorTx.QueueUpdate(ctx, params)
}

// JobSchedule first asks, outside the transaction, whether any job is
// retryable or scheduled and due by params.Now; when none is, it returns
// nothing, and the scheduler's transaction, deferred, sends nothing. A
// job that falls due meanwhile is found by the next run, as it would be
// had the transaction run a moment sooner.
func (t *sqliteTx) JobSchedule(ctx context.Context, params *riverdriver.JobScheduleParams) ([]*riverdriver.JobScheduleResult, error) {
	if due, err := t.d.anyDue(ctx, params); err == nil && !due {
		return nil, nil
	}
	return t.ExecutorTx.JobSchedule(ctx, params)
}

// anyDue says whether any job is retryable or scheduled and due by
// params.Now (now when nil), in the time format River's SQLite driver
// writes.
func (d *sqliteQueueDriver) anyDue(ctx context.Context, params *riverdriver.JobScheduleParams) (bool, error) {
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

// Executor runs River's own queries (counts of jobs by state).
func (q Queue) Executor() riverdriver.Executor {
	if q.d.jobs != nil {
		return riverpgxv5.New(q.d.jobs).GetExecutor()
	}
	return q.d.sqlQueue().GetExecutor()
}

var (
	_ JobClient = (*river.Client[*sql.Tx])(nil)
	_ JobClient = (*river.Client[pgx.Tx])(nil)
)

// Dialect is the queue's database's: dialect.SQLite or dialect.Postgres.
func (q Queue) Dialect() string { return q.d.Dialect }
