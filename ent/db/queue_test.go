package db_test

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/ent/db"
	"github.com/toolgate/toolgate/ent/db/dbtest"
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
func pingQueue(t *testing.T, d *db.DB, workers int, cooldown time.Duration) (db.JobClient, *pingWorker) {
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
// although the queue polls only every db.IdlePoll: SQLite's queue is woken
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
			case <-time.After(db.IdlePoll + 2*time.Second):
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
			deadline := time.After(db.IdlePoll - time.Second) // before any poll
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
	var (
		mu   sync.Mutex
		sent []string
	)
	ctx := context.Background()
	d, err := db.OpenWith(ctx, dbtest.URL(t, dbtest.SQLite), db.Options{Observe: func(q string) {
		mu.Lock()
		sent = append(sent, q)
		mu.Unlock()
	}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = d.Close() })
	require.NoError(t, d.Migrate(ctx))
	q := d.Queue().Shared()
	w := &pingWorker{ran: make(chan time.Time, 1)}
	river.AddWorker(q.Workers(), w)
	turns, err := q.Client(&river.Config{
		Queues:  map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: 100, FetchPollInterval: db.ListenPoll}},
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
	mu.Lock()
	sent = nil
	mu.Unlock()
	const window = 11 * time.Second
	time.Sleep(window)
	mu.Lock()
	defer mu.Unlock()
	t.Logf("%d statements in %s", len(sent), window)
	require.LessOrEqual(t, len(sent), int(window/time.Second), "%d statements in %s: %q", len(sent), window, sent)
}
