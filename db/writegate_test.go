package db_test

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/db"
	"github.com/toolgate/toolgate/db/conn"
	"github.com/toolgate/toolgate/ent/organization"
	"github.com/toolgate/toolgate/ent/tenancy"
)

// logged keeps the warnings and errors logged through it.
type logged struct {
	mu      sync.Mutex
	records []string
}

func (l *logged) Enabled(_ context.Context, level slog.Level) bool { return level >= slog.LevelWarn }

func (l *logged) Handle(_ context.Context, r slog.Record) error {
	line := r.Message
	r.Attrs(func(a slog.Attr) bool {
		line += " " + a.String()
		return true
	})
	l.mu.Lock()
	l.records = append(l.records, line)
	l.mu.Unlock()
	return nil
}

func (l *logged) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logged) WithGroup(string) slog.Handler      { return l }

func (l *logged) lines() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.records...)
}

type countArgs struct{}

func (countArgs) Kind() string { return "test_count" }

type countWorker struct {
	river.WorkerDefaults[countArgs]
	n atomic.Int64
}

func (w *countWorker) Work(context.Context, *river.Job[countArgs]) error {
	w.n.Add(1)
	return nil
}

// Many writers at once on one SQLite file (transactions, single
// statements through ent and raw, the job queue's inserts, fetches,
// completions and leader election) while readers read: none ever meets
// another at SQLite's write lock: they queue at the process's write gate
// instead. Without the gate the same file refuses a second writer at once
// (the first subtest), so with SQLite's own wait for the lock turned off
// the writers here would fail by the dozen. With the gate no write fails
// for any other reason, and SQLITE_BUSY is at most one write in 200: with
// its wait off, SQLite also answers BUSY, rarely and for an instant, for
// other reasons than two writers meeting (seen about once in a -race run
// of the whole suite), which production's wait absorbs.
func TestSQLiteWritersNeverMeetAtTheLock(t *testing.T) {
	t.Parallel()
	ctx := tenancy.System(context.Background())
	path := filepath.Join(t.TempDir(), "team.db")
	d, err := db.OpenNoBusyWait(ctx, "sqlite://"+path)
	require.NoError(t, err)
	t.Cleanup(func() { _ = d.Close() })
	require.NoError(t, d.Migrate(ctx))

	t.Run("without the gate a second writer fails", func(t *testing.T) {
		plain, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(0)&_txlock=immediate")
		require.NoError(t, err)
		defer plain.Close()
		tx, err := plain.BeginTx(ctx, nil)
		require.NoError(t, err)
		defer tx.Rollback() //nolint:errcheck // read-only end of the test
		_, err = plain.ExecContext(ctx, "UPDATE organizations SET name = name")
		require.ErrorContains(t, err, "SQLITE_BUSY")
	})

	log := &logged{}
	w := &countWorker{}
	workers := river.NewWorkers()
	river.AddWorker(workers, w)
	q, err := d.Queue().Client(&river.Config{
		Queues:        map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: 20}},
		Workers:       workers,
		FetchCooldown: time.Millisecond,
		Logger:        slog.New(log),
	})
	require.NoError(t, err)
	require.NoError(t, q.Start(ctx))
	t.Cleanup(func() { _ = q.Stop(context.Background()) })

	c := d.Client()
	const writers, rounds = 16, 15
	var (
		wg   sync.WaitGroup
		errs = make(chan error, writers*rounds*4+64)
		stop = make(chan struct{})
		// renamed and enqueued count the writes that succeeded, which the
		// database must then hold, every one.
		renamed, enqueued atomic.Int64
	)
	for i := range writers {
		wg.Go(func() {
			for r := range rounds {
				tx, err := c.Tx(ctx)
				if err != nil {
					errs <- fmt.Errorf("begin: %w", err)
					continue
				}
				o, err := tx.Organization.Create().SetName(fmt.Sprintf("org %d-%d", i, r)).Save(ctx)
				if err == nil {
					_, err = tx.User.Create().SetOrganizationID(o.ID).SetName("Ann").Save(ctx)
				}
				if err != nil {
					_ = tx.Rollback()
					errs <- fmt.Errorf("write in a transaction: %w", err)
					continue
				}
				if err := tx.Commit(); err != nil {
					errs <- fmt.Errorf("commit: %w", err)
					continue
				}
				if err := c.Organization.UpdateOneID(o.ID).SetName(o.Name + " renamed").Exec(ctx); err != nil {
					errs <- fmt.Errorf("update: %w", err)
				} else {
					renamed.Add(1)
				}
				if _, err := d.SQL.ExecContext(ctx, "UPDATE organizations SET name = name WHERE id = ?", o.ID); err != nil {
					errs <- fmt.Errorf("raw update: %w", err)
				}
				if _, err := q.Insert(ctx, countArgs{}, nil); err != nil {
					errs <- fmt.Errorf("enqueue: %w", err)
				} else {
					enqueued.Add(1)
				}
			}
		})
	}
	var readers sync.WaitGroup
	for range 8 {
		readers.Go(func() {
			rctx := conn.Reading(ctx)
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := c.Organization.Query().Where(organization.NameContains("renamed")).Count(rctx); err != nil {
					errs <- fmt.Errorf("read: %w", err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(stop)
	readers.Wait()
	close(errs)
	var busy []string
	for err := range errs {
		if strings.Contains(err.Error(), "SQLITE_BUSY") {
			busy = append(busy, err.Error())
			continue
		}
		require.NoError(t, err)
	}
	for _, line := range log.lines() {
		require.Contains(t, line, "SQLITE_BUSY", "the queue logs no other failure")
		busy = append(busy, line)
	}
	require.LessOrEqual(t, len(busy), writers*rounds*4/200, "writers met at SQLite's lock: %q", busy)
	if len(busy) > 0 {
		t.Logf("SQLITE_BUSY, not two writers meeting: %q", busy)
	}
	require.GreaterOrEqual(t, renamed.Load(), int64(writers*rounds-len(busy)), "a write lost only where SQLite said BUSY")
	require.Eventually(t, func() bool { return w.n.Load() == enqueued.Load() }, 30*time.Second, 20*time.Millisecond,
		"every job enqueued is worked")
	n, err := c.Organization.Query().Where(organization.NameContains("renamed")).Count(ctx)
	require.NoError(t, err)
	require.Equal(t, int(renamed.Load()), n)
}

// A reader's reads run on the read pool, whose connections cannot write;
// its writes, a write that returns rows included, and everyone else's
// reads run on the writers' pool.
func TestSQLiteReaderReadsOnTheReadPool(t *testing.T) {
	t.Parallel()
	ctx := tenancy.System(context.Background())
	d, err := db.Open(ctx, "sqlite://"+filepath.Join(t.TempDir(), "read.db"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = d.Close() })
	require.NoError(t, d.Migrate(ctx))
	type rawQuerier interface {
		QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	}
	queryOnly := func(ctx context.Context) int {
		rows, err := d.Driver.(rawQuerier).QueryContext(ctx, "PRAGMA query_only")
		require.NoError(t, err)
		defer rows.Close()
		require.True(t, rows.Next())
		var on int
		require.NoError(t, rows.Scan(&on))
		return on
	}
	// PRAGMA is not a read the router knows: it goes to the writers' pool.
	require.Equal(t, 0, queryOnly(conn.Reading(ctx)))
	require.Equal(t, 0, queryOnly(ctx))
	rows, err := d.Driver.(rawQuerier).QueryContext(conn.Reading(ctx), "SELECT COUNT(*) FROM pragma_query_only() WHERE query_only = 1")
	require.NoError(t, err)
	require.True(t, rows.Next())
	var n int
	require.NoError(t, rows.Scan(&n))
	require.NoError(t, rows.Close())
	require.Equal(t, 1, n, "a reader's SELECT runs on a read-only connection")

	// ent creates with INSERT … RETURNING, a query: a reader's goes to the
	// writers' pool, and is read back on the read pool.
	rctx := conn.Reading(ctx)
	o, err := d.Client().Organization.Create().SetName("Acme").Save(rctx)
	require.NoError(t, err)
	got, err := d.Client().Organization.Get(rctx, o.ID)
	require.NoError(t, err)
	require.Equal(t, "Acme", got.Name)
}
