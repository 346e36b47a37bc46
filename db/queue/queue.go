// Package queue is the database's River job queue, what the runtime and
// the document service run their jobs on. Its drivers are River's own,
// decorated one package per driver: queuepgx on PostgreSQL, queuesqlite
// on SQLite.
package queue

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/riverdriver/riversqlite"
	"github.com/riverqueue/river/rivertype"

	"github.com/toolgate/toolgate/db/queue/queuepgx"
	"github.com/toolgate/toolgate/db/queue/queuesqlite"
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
	dialect string
	// sql is the database/sql pool; jobs is the queue's own pgx pool on
	// PostgreSQL (pgx can LISTEN), nil on SQLite.
	sql    *sql.DB
	jobs   *pgxpool.Pool
	shared *shared
}

// New is the queue over a database's pools: on PostgreSQL, jobs is its
// pgx pool; on SQLite, jobs is nil and the queue runs on pool.
func New(dialect string, pool *sql.DB, jobs *pgxpool.Pool) Queue {
	return Queue{dialect: dialect, sql: pool, jobs: jobs}
}

// Shared returns the queue with one River client for all its users: each
// Client call adds its queues (and the workers it registered on Workers)
// to that one client, made and started by the first Start (or Insert). A
// server works its turns and its documents on it, so it elects one leader
// and polls once, not once per user; several runners of one test process
// (replicas) each keep a client of their own by using Queue.
func (q Queue) Shared() Queue {
	plain := q
	plain.shared = nil
	return Queue{dialect: q.dialect, sql: q.sql, jobs: q.jobs, shared: &shared{q: plain, workers: river.NewWorkers(), cfg: river.Config{Queues: map[string]river.QueueConfig{}}}}
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
		if q.jobs != nil {
			c.FetchPollInterval = ListenPoll
		}
	}
	if q.jobs != nil {
		c.PollOnly = false
		client, err := queuepgx.NewClient(q.jobs, &c)
		if err != nil {
			return nil, fmt.Errorf("job queue: %w", err)
		}
		return client, nil
	}
	c.PollOnly = true
	client, err := river.NewClient(queuesqlite.New(q.sql), &c)
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

// Executor runs River's own queries (counts of jobs by state).
func (q Queue) Executor() riverdriver.Executor {
	if q.jobs != nil {
		return riverpgxv5.New(q.jobs).GetExecutor()
	}
	return riversqlite.New(q.sql).GetExecutor()
}

var (
	_ JobClient = (*river.Client[*sql.Tx])(nil)
	_ JobClient = (*queuepgx.Client)(nil)
)

// Dialect is the queue's database's: dialect.SQLite or dialect.Postgres.
func (q Queue) Dialect() string { return q.dialect }
