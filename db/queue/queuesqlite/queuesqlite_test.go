package queuesqlite_test

import (
	"context"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/db"
	"github.com/toolgate/toolgate/db/queue/queuesqlite"
)

// sent records the statements a SQLite database is sent.
type sent struct {
	mu sync.Mutex
	qs []string
}

func (s *sent) observe(q string) {
	s.mu.Lock()
	s.qs = append(s.qs, q)
	s.mu.Unlock()
}

// during returns what f sent.
func (s *sent) during(t *testing.T, f func()) []string {
	t.Helper()
	s.mu.Lock()
	n := len(s.qs)
	s.mu.Unlock()
	f()
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.qs[n:])
}

func openObservedSQLite(t *testing.T) (*db.DB, *sent) {
	t.Helper()
	s := &sent{}
	d, err := db.OpenWith(context.Background(), "sqlite://"+filepath.Join(t.TempDir(), "q.db"), db.Options{Observe: s.observe})
	require.NoError(t, err)
	t.Cleanup(func() { _ = d.Close() })
	require.NoError(t, d.Migrate(context.Background()))
	return d, s
}

// A SQLite queue's producers read their queue's settings every 2 s: the
// queue's executor keeps them as written or read, and reads them again
// after this process changes them, in or out of a transaction.
func TestSQLiteQueueReadsItsSettingsOnce(t *testing.T) {
	t.Parallel()
	d, s := openObservedSQLite(t)
	ctx := context.Background()
	exec := queuesqlite.New(d.SQL).GetExecutor()
	_, err := exec.QueueCreateOrSetUpdatedAt(ctx, &riverdriver.QueueCreateOrSetUpdatedAtParams{Metadata: []byte("{}"), Name: "turns"})
	require.NoError(t, err)
	get := func() *rivertype.Queue {
		q, err := exec.QueueGet(ctx, &riverdriver.QueueGetParams{Name: "turns"})
		require.NoError(t, err)
		return q
	}

	sentNow := s.during(t, func() {
		for range 5 {
			require.Nil(t, get().PausedAt)
		}
	})
	require.Empty(t, sentNow, "five reads of the settings just written: %q", sentNow)

	require.NoError(t, exec.QueuePause(ctx, &riverdriver.QueuePauseParams{Name: "turns"}))
	sentNow = s.during(t, func() {
		for range 5 {
			require.NotNil(t, get().PausedAt, "a pause here is seen at the next read")
		}
	})
	require.Len(t, sentNow, 1, "five reads after a pause: %q", sentNow)

	tx, err := exec.Begin(ctx)
	require.NoError(t, err)
	require.NoError(t, tx.QueueResume(ctx, &riverdriver.QueueResumeParams{Name: "turns"}))
	require.NotNil(t, get().PausedAt, "read outside the transaction, before it commits")
	require.NoError(t, tx.Commit(ctx))
	require.Nil(t, get().PausedAt, "a resume committed here is seen at the next read")
}

// River's scheduler opens a transaction every 5 s on SQLite to make due
// jobs available; when none is due it sends one statement, and makes a
// due job available as River would.
func TestSQLiteSchedulerSendsOneStatementWhenNothingIsDue(t *testing.T) {
	t.Parallel()
	d, s := openObservedSQLite(t)
	ctx := context.Background()
	drv := queuesqlite.New(d.SQL)
	exec := drv.GetExecutor()
	schedule := func(now time.Time) []*riverdriver.JobScheduleResult {
		tx, err := exec.Begin(ctx)
		require.NoError(t, err)
		defer func() { _ = tx.Rollback(ctx) }()
		res, err := tx.JobSchedule(ctx, &riverdriver.JobScheduleParams{Max: 100, Now: &now})
		require.NoError(t, err)
		require.NoError(t, tx.Commit(ctx))
		return res
	}

	sentNow := s.during(t, func() { require.Empty(t, schedule(time.Now())) })
	require.Len(t, sentNow, 1, "nothing due: %q", sentNow)

	client, err := river.NewClient(drv, &river.Config{})
	require.NoError(t, err)
	at := time.Now().Add(time.Hour)
	_, err = client.Insert(ctx, pingArgs{}, &river.InsertOpts{ScheduledAt: at})
	require.NoError(t, err)

	sentNow = s.during(t, func() { require.Empty(t, schedule(time.Now())) })
	require.Len(t, sentNow, 1, "a job scheduled, not yet due: %q", sentNow)

	res := schedule(at.Add(time.Second))
	require.Len(t, res, 1, "the job once due")
	require.Equal(t, rivertype.JobStateAvailable, res[0].Job.State)
}

type pingArgs struct{}

func (pingArgs) Kind() string { return "test_ping" }
