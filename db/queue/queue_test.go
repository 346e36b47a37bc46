package queue_test

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/db"
	"github.com/toolgate/toolgate/db/dbtest"
	"github.com/toolgate/toolgate/db/queue"
)

type pingArgs struct{}

func (pingArgs) Kind() string { return "test_ping" }

type pingWorker struct {
	river.WorkerDefaults[pingArgs]
	ran chan time.Time
}

func (w *pingWorker) Work(context.Context, *river.Job[pingArgs]) error {
	w.ran <- time.Now()
	return nil
}

// pingQueue starts a queue of pingWorker on d, idle past its first fetch.
func pingQueue(t *testing.T, d *db.DB, workers int, cooldown time.Duration) (queue.JobClient, *pingWorker) {
	t.Helper()
	w := &pingWorker{ran: make(chan time.Time, 64)}
	registry := river.NewWorkers()
	river.AddWorker(registry, w)
	q, err := d.Queue().Client(&river.Config{
		Queues:        map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: workers}},
		Workers:       registry,
		FetchCooldown: cooldown,
		Logger:        slog.New(slog.DiscardHandler),
	})
	require.NoError(t, err)
	require.NoError(t, q.Start(context.Background()))
	t.Cleanup(func() { _ = q.Stop(context.Background()) })
	time.Sleep(300 * time.Millisecond) // past the first fetch
	return q, w
}

// A job inserted by this process is worked at once, on both databases,
// although the queue polls only every queue.IdlePoll: SQLite's queue is woken
// by the insert, PostgreSQL's by its notification.
func TestQueueWorksAJobAsItIsInserted(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d *db.DB) {
		q, w := pingQueue(t, d, 2, time.Millisecond)
		ctx := context.Background()
		for range 3 {
			at := time.Now()
			_, err := q.Insert(ctx, pingArgs{}, nil)
			require.NoError(t, err)
			select {
			case ran := <-w.ran:
				require.Less(t, ran.Sub(at), time.Second, "worked before the next poll")
			case <-time.After(queue.IdlePoll + 2*time.Second):
				t.Fatal("the job never ran")
			}
		}
	})
}

// A burst of jobs, inserted one after another and all at once, is worked
// at once on both databases: none waits for the queue's poll although the
// queue is told of at most one insert per FetchCooldown.
func TestQueueWorksABurstAsItIsInserted(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d *db.DB) {
		q, w := pingQueue(t, d, 50, 20*time.Millisecond)
		ctx := context.Background()
		worked := func(n int) {
			t.Helper()
			deadline := time.After(queue.IdlePoll - time.Second) // before any poll
			for i := range n {
				select {
				case <-w.ran:
				case <-deadline:
					t.Fatalf("%d of %d jobs waited for the poll", n-i, n)
				}
			}
		}
		for range 3 {
			for range 10 {
				_, err := q.Insert(ctx, pingArgs{}, nil)
				require.NoError(t, err)
			}
			worked(10)
			var wg sync.WaitGroup
			for range 10 {
				wg.Go(func() {
					_, err := q.Insert(ctx, pingArgs{}, nil)
					require.NoError(t, err)
				})
			}
			wg.Wait()
			worked(10)
		}
	})
}

// An idle server's job queue on SQLite (its turns' queue and its
// documents' queue, on one client, configured as the server does) sends
// its database at most one statement a second: over 11 s, about 7 (two
// runs of River's scheduler and of its leader election, a poll of the
// documents' queue, River's maintenance as it starts), not the 25 it sent
// when each producer read its queue's settings every 2 s and each run of
// the scheduler took three statements.
func TestIdleSQLiteQueueIsQuiet(t *testing.T) {
	t.Parallel()
	d, o := openObserved(t, dbtest.SQLite)
	startIdleQueue(t, d)
	const window = 11 * time.Second
	sent := o.during(func() { time.Sleep(window) })
	t.Logf("%d statements in %s", len(sent), window)
	require.LessOrEqual(t, len(sent), int(window/time.Second), "%d statements in %s: %q", len(sent), window, sent)
}

// startIdleQueue starts d's job queue as a server configures it (its
// turns' queue and its documents' queue, on one client) and lets it settle
// past its start.
func startIdleQueue(t *testing.T, d *db.DB) {
	t.Helper()
	ctx := context.Background()
	q := d.Queue().Shared()
	w := &pingWorker{ran: make(chan time.Time, 1)}
	river.AddWorker(q.Workers(), w)
	turns, err := q.Client(&river.Config{
		Queues:  map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: 100, FetchPollInterval: queue.ListenPoll}},
		Workers: q.Workers(),
		Logger:  slog.New(slog.DiscardHandler),
	})
	require.NoError(t, err)
	_, err = q.Client(&river.Config{
		Queues:  map[string]river.QueueConfig{"documents": {MaxWorkers: 2}},
		Workers: q.Workers(),
	})
	require.NoError(t, err)
	require.NoError(t, turns.Start(ctx))
	t.Cleanup(func() { _ = turns.Stop(context.Background()) })
	time.Sleep(2 * time.Second) // past the start
}

// openObserved opens a new database on backend b whose every statement,
// the job queue's included, is recorded.
func openObserved(t *testing.T, b dbtest.Backend) (*db.DB, *observed) {
	t.Helper()
	o := &observed{}
	ctx := context.Background()
	d, err := db.OpenWith(ctx, dbtest.URL(t, b), db.Options{Observe: o.observe})
	require.NoError(t, err)
	t.Cleanup(func() { _ = d.Close() })
	require.NoError(t, d.Migrate(ctx))
	return d, o
}

// observed is what a database was sent.
type observed struct {
	mu   sync.Mutex
	sent []string
}

func (o *observed) observe(q string) {
	o.mu.Lock()
	o.sent = append(o.sent, q)
	o.mu.Unlock()
}

// during returns what f sent.
func (o *observed) during(f func()) []string {
	o.mu.Lock()
	n := len(o.sent)
	o.mu.Unlock()
	f()
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.sent[n:])
}

// River's scheduler opens a transaction every 5 s to make due jobs
// available. On PostgreSQL, when none is due, it sends one statement (it
// sent BEGIN, its query and COMMIT), and a due job, scheduled or to be
// retried, is made available as River would.
func TestPostgresSchedulerSendsOneStatementWhenNothingIsDue(t *testing.T) {
	t.Parallel()
	d, o := openObserved(t, dbtest.Postgres)
	ctx := context.Background()
	exec := queue.DriverExecutor(d.Queue())
	schedule := func(now time.Time) []*riverdriver.JobScheduleResult {
		tx, err := exec.Begin(ctx)
		require.NoError(t, err)
		defer func() { _ = tx.Rollback(ctx) }()
		res, err := tx.JobSchedule(ctx, &riverdriver.JobScheduleParams{Max: 100, Now: &now})
		require.NoError(t, err)
		require.NoError(t, tx.Commit(ctx))
		return res
	}

	sentNow := o.during(func() { require.Empty(t, schedule(time.Now())) })
	require.Len(t, sentNow, 1, "nothing due: %q", sentNow)

	q, err := d.Queue().Client(&river.Config{Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	at := time.Now().Add(time.Hour)
	scheduled, err := q.Insert(ctx, pingArgs{}, &river.InsertOpts{ScheduledAt: at})
	require.NoError(t, err)
	retried, err := q.Insert(ctx, pingArgs{}, &river.InsertOpts{ScheduledAt: at.Add(time.Minute)})
	require.NoError(t, err)
	_, err = exec.JobUpdateFull(ctx, &riverdriver.JobUpdateFullParams{ID: retried.Job.ID, StateDoUpdate: true, State: rivertype.JobStateRetryable})
	require.NoError(t, err)

	sentNow = o.during(func() { require.Empty(t, schedule(time.Now())) })
	require.Len(t, sentNow, 1, "jobs scheduled and to be retried, not yet due: %q", sentNow)

	// River's statement returns each job's row as it was before; the job is
	// read again.
	state := func(id int64) rivertype.JobState {
		j, err := exec.JobGetByID(ctx, &riverdriver.JobGetByIDParams{ID: id})
		require.NoError(t, err)
		return j.State
	}
	res := schedule(at.Add(time.Second))
	require.Len(t, res, 1, "the scheduled job once due")
	require.Equal(t, scheduled.Job.ID, res[0].Job.ID)
	require.Equal(t, rivertype.JobStateAvailable, state(scheduled.Job.ID))
	require.Equal(t, rivertype.JobStateRetryable, state(retried.Job.ID))
	res = schedule(at.Add(2 * time.Minute))
	require.Len(t, res, 1, "the job to be retried once due")
	require.Equal(t, retried.Job.ID, res[0].Job.ID)
	require.Equal(t, rivertype.JobStateAvailable, state(retried.Job.ID))
}

// failOnceWorker fails each job's first attempt, to be retried a moment
// later.
type failOnceWorker struct {
	river.WorkerDefaults[failOnceArgs]
	ran chan int
}

type failOnceArgs struct{}

func (failOnceArgs) Kind() string { return "test_fail_once" }

func (w *failOnceWorker) Work(_ context.Context, j *river.Job[failOnceArgs]) error {
	w.ran <- j.Attempt
	if j.Attempt == 1 {
		return errors.New("first attempt fails")
	}
	return nil
}

func (*failOnceWorker) NextRetry(*river.Job[failOnceArgs]) time.Time {
	return time.Now().Add(time.Second)
}

// A running queue on PostgreSQL still makes available a job scheduled a
// moment ahead and a failed job to be retried: River's scheduler (every
// 5 s, on the leader) moves them.
func TestPostgresQueueMakesScheduledAndRetriedJobsAvailable(t *testing.T) {
	t.Parallel()
	d := dbtest.Open(t, dbtest.Postgres)
	fail := &failOnceWorker{ran: make(chan int, 2)}
	registry := river.NewWorkers()
	river.AddWorker(registry, &pingWorker{ran: make(chan time.Time, 1)})
	river.AddWorker(registry, fail)
	q, err := d.Queue().Client(&river.Config{
		Queues:  map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: 2}},
		Workers: registry,
		Logger:  slog.New(slog.DiscardHandler),
	})
	require.NoError(t, err)
	ctx := context.Background()
	require.NoError(t, q.Start(ctx))
	t.Cleanup(func() { _ = q.Stop(context.Background()) })

	scheduled, err := q.Insert(ctx, pingArgs{}, &river.InsertOpts{ScheduledAt: time.Now().Add(time.Second)})
	require.NoError(t, err)
	failing, err := q.Insert(ctx, failOnceArgs{}, nil)
	require.NoError(t, err)
	select {
	case attempt := <-fail.ran:
		require.Equal(t, 1, attempt)
	case <-time.After(10 * time.Second):
		t.Fatal("the failing job never ran")
	}
	exec := d.Queue().Executor()
	waiting := func(id int64) bool {
		j, err := exec.JobGetByID(ctx, &riverdriver.JobGetByIDParams{ID: id})
		require.NoError(t, err)
		return j.State == rivertype.JobStateScheduled || j.State == rivertype.JobStateRetryable
	}
	deadline := time.Now().Add(20 * time.Second) // four runs of the scheduler
	for waiting(scheduled.Job.ID) || waiting(failing.Job.ID) {
		require.True(t, time.Now().Before(deadline), "a due job was never made available")
		time.Sleep(100 * time.Millisecond)
	}
}

// A job scheduled a few seconds ahead runs when it falls due on
// PostgreSQL, though the queue polls once a minute: River's scheduler makes
// it available up to 5 s early without a notice, and the queue is told of
// it when its time comes.
func TestPostgresScheduledJobRunsWhenDue(t *testing.T) {
	t.Parallel()
	q, w := pingQueue(t, dbtest.Open(t, dbtest.Postgres), 2, 0) // polls every queue.ListenPoll
	ctx := context.Background()
	// Due in 4.9 s: the scheduler, which runs every 5 s and looks 5 s
	// ahead, almost surely makes it available before it is due.
	due := time.Now().Add(4900 * time.Millisecond)
	_, err := q.Insert(ctx, pingArgs{}, &river.InsertOpts{ScheduledAt: due})
	require.NoError(t, err)
	select {
	case ran := <-w.ran:
		require.False(t, ran.Before(due), "ran %s before it was due", due.Sub(ran))
	case <-time.After(time.Until(due) + 5*time.Second):
		t.Fatal("a job made available early waited for the queue's poll")
	}
}

// An idle job queue on PostgreSQL (its turns' queue and its documents'
// queue, on one client, configured as the server does) sends its database
// well under one statement a second: over 20 s, River's scheduler's one
// question and its leader's election every 5 s, and the first run of
// River's cleaners as it starts (8 to 13), not the 16 or more it sent when
// each run of the scheduler took BEGIN, its query and COMMIT.
func TestIdlePostgresQueueIsQuiet(t *testing.T) {
	t.Parallel()
	d, o := openObserved(t, dbtest.Postgres)
	startIdleQueue(t, d)
	const window = 20 * time.Second
	sent := o.during(func() { time.Sleep(window) })
	t.Logf("%d statements in %s: %q", len(sent), window, sent)
	require.LessOrEqual(t, len(sent), idleBound, "%d statements in %s: %q", len(sent), window, sent)
}

// idleBound is the most an idle PostgreSQL queue may send over its 20 s
// window: 0.65 a second.
const idleBound = 13
