package queuepgx

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river/riverdriver"
	"github.com/stretchr/testify/require"
)

// TestListenerPingsAtMostOnceAMinute: River's pings of the listening
// connection send nothing while it was heard from within
// ListenerPingEvery, and reach PostgreSQL once it was not (the backend's
// last statement, as PostgreSQL shows it, says which).
func TestListenerPingsAtMostOnceAMinute(t *testing.T) {
	dsn := os.Getenv("TEST_DATABASE_URL")
	if dsn == "" {
		t.Skip("TEST_DATABASE_URL not set: PostgreSQL skipped")
	}
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, dsn)
	require.NoError(t, err)
	defer pool.Close()
	l, ok := New(pool).GetListener(&riverdriver.GetListenenerParams{Schema: "public"}).(*quietListener)
	require.True(t, ok)
	require.NoError(t, l.Connect(ctx))
	defer func() { _ = l.Close(ctx) }()
	topic := fmt.Sprintf("toolgate_ping_%d", time.Now().UnixNano())
	require.NoError(t, l.Listen(ctx, topic))
	var pid int
	require.NoError(t, pool.QueryRow(ctx, `SELECT pid FROM pg_stat_activity WHERE query LIKE '%'||$1||'%' AND pid <> pg_backend_pid()`, topic).Scan(&pid))
	last := func() string {
		var q string
		require.NoError(t, pool.QueryRow(ctx, `SELECT query FROM pg_stat_activity WHERE pid = $1`, pid).Scan(&q))
		return q
	}

	require.NoError(t, l.Ping(ctx))
	require.Contains(t, last(), topic, "heard from at its connection: no ping sent")

	l.mu.Lock()
	l.heard = time.Now().Add(-ListenerPingEvery - time.Second)
	l.mu.Unlock()
	require.NoError(t, l.Ping(ctx))
	require.Equal(t, "-- ping", last(), "not heard from for a minute: pinged")
	require.NoError(t, l.Ping(ctx))
	require.Equal(t, "-- ping", last())
}
