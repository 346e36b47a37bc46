package db

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/riverdriver/riversqlite"
	"github.com/riverqueue/river/rivertype"
)

// IdlePoll is how often a job queue looks for jobs it was not told about:
// on PostgreSQL every insert notifies, and on SQLite (which cannot) the
// jobs this process inserts wake its own queue at once, so a poll finds
// only retries that fell due.
const IdlePoll = 5 * time.Second

// Queue is the database's River job queue: turns and file processing run
// as durable jobs in it, on PostgreSQL and on SQLite alike.
type Queue struct{ d *DB }

// Queue returns the database's job queue.
func (d *DB) Queue() Queue { return Queue{d} }

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
func (q Queue) Client(cfg *river.Config) (JobClient, error) {
	c := *cfg
	if c.FetchPollInterval == 0 {
		c.FetchPollInterval = IdlePoll
	}
	if q.d.jobs != nil {
		c.PollOnly = false
		client, err := river.NewClient(riverpgxv5.New(q.d.jobs), &c)
		if err != nil {
			return nil, fmt.Errorf("job queue: %w", err)
		}
		return client, nil
	}
	c.PollOnly = true
	client, err := river.NewClient(quietSQLite{riversqlite.New(q.d.SQL)}, &c)
	if err != nil {
		return nil, fmt.Errorf("job queue: %w", err)
	}
	return client, nil
}

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
