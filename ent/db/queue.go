package db

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
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
// a poll finds only retries that fell due. ListenPoll is the same on
// PostgreSQL, where every insert, and every retry that falls due, is
// notified: its poll is only a safety net, behind the sweep that enqueues
// again a turn not taken up within loop.StaleAfter.
const (
	IdlePoll   = 5 * time.Second
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
		drv := riverpgxv5.New(q.d.jobs)
		client, err := river.NewClient(drv, &c)
		if err != nil {
			return nil, fmt.Errorf("job queue: %w", err)
		}
		return &wakingClient{Client: client, exec: drv.GetExecutor(), cooldown: cmp.Or(c.FetchCooldown, river.FetchCooldownDefault), sent: map[string]time.Time{}}, nil
	}
	c.PollOnly = true
	client, err := river.NewClient(quietSQLite{riversqlite.New(q.d.SQL)}, &c)
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

// quietSQLite is River's SQLite driver without its emulation of
// LISTEN/NOTIFY, which polls a table every 50 ms: told the driver cannot
// listen, River wakes its own producer when this process inserts a job.
type quietSQLite struct{ *riversqlite.Driver }

func (quietSQLite) SupportsListener() bool     { return false }
func (quietSQLite) SupportsListenNotify() bool { return false }

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
