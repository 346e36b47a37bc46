package db_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/db"
	"github.com/toolgate/toolgate/db/dbtest"
)

// TestDialedCountsSessionsAndCancels: Options.Dialed hears of each session
// a pool opens and of the connection lib/pq opens to cancel a query.
func TestDialedCountsSessionsAndCancels(t *testing.T) {
	t.Parallel()
	var dials atomic.Int64
	ctx := context.Background()
	d, err := db.OpenWith(ctx, dbtest.URL(t, dbtest.Postgres), db.Options{Dialed: func() { dials.Add(1) }})
	require.NoError(t, err)
	t.Cleanup(func() { _ = d.Close() })
	require.NoError(t, d.SQL.PingContext(ctx))
	require.EqualValues(t, 1, dials.Load(), "the first session")
	require.NoError(t, d.SQL.PingContext(ctx))
	require.EqualValues(t, 1, dials.Load(), "a pooled session is reused")

	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	_, err = d.SQL.ExecContext(short, "SELECT pg_sleep(5)")
	require.Error(t, err)
	require.Eventually(t, func() bool { return dials.Load() == 2 }, 5*time.Second, 10*time.Millisecond,
		"a cancelled query's cancel request is a connection of its own")
}
