package conn_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/db"
	"github.com/toolgate/toolgate/db/dbtest"
)

// TestSQLiteStatementCache runs the same statement while its rows are
// still open (the cached statement is busy: the second gets its own), and
// more distinct statements than the cache keeps (the oldest are evicted),
// and checks every answer.
func TestSQLiteStatementCache(t *testing.T) {
	ctx := context.Background()
	d, err := db.Open(ctx, "sqlite://"+filepath.Join(t.TempDir(), "cache.db"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = d.Close() })
	conn, err := d.SQL.Conn(ctx)
	require.NoError(t, err)
	defer conn.Close()
	_, err = conn.ExecContext(ctx, `CREATE TABLE n (v INTEGER)`)
	require.NoError(t, err)
	for i := range 5 {
		_, err := conn.ExecContext(ctx, `INSERT INTO n (v) VALUES (?)`, i)
		require.NoError(t, err)
	}
	const q = `SELECT v FROM n WHERE v >= ? ORDER BY v`
	outer, err := conn.QueryContext(ctx, q, 0)
	require.NoError(t, err)
	var got []int
	for outer.Next() {
		var v int
		require.NoError(t, outer.Scan(&v))
		inner, err := conn.QueryContext(ctx, q, v)
		require.NoError(t, err)
		n := 0
		for inner.Next() {
			n++
		}
		require.NoError(t, inner.Close())
		require.Equal(t, 5-v, n, "the same statement, run while its rows are open")
		got = append(got, v)
	}
	require.NoError(t, outer.Err())
	require.NoError(t, outer.Close())
	require.Equal(t, []int{0, 1, 2, 3, 4}, got)
	for i := range 600 {
		var v int
		require.NoError(t, conn.QueryRowContext(ctx, fmt.Sprintf(`SELECT %d + v FROM n WHERE v = ?`, i), 1).Scan(&v))
		require.Equal(t, i+1, v)
	}
	var v int
	require.NoError(t, conn.QueryRowContext(ctx, q, 3).Scan(&v), "a statement evicted is prepared again")
	require.Equal(t, 3, v)
}

// TestPostgresStatementCache: on PostgreSQL a statement sent with
// arguments is prepared once per session and run again from the cache (the
// session's pg_prepared_statements holds it, once, after three runs); one
// without arguments is sent as it is, so text of several statements still
// runs; and a statement whose result columns a migration changed (another
// replica's, say) runs again prepared afresh instead of failing.
func TestPostgresStatementCache(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d, err := db.Open(ctx, dbtest.URL(t, dbtest.Postgres))
	require.NoError(t, err)
	t.Cleanup(func() { _ = d.Close() })
	d.SQL.SetMaxOpenConns(1)
	_, err = d.SQL.ExecContext(ctx, `CREATE TABLE n (v integer); INSERT INTO n VALUES (1), (2), (3)`)
	require.NoError(t, err, "text of several statements, without arguments")

	const q = `SELECT v FROM n WHERE v >= $1 ORDER BY v LIMIT 1`
	for i := 1; i <= 3; i++ {
		var v int
		require.NoError(t, d.SQL.QueryRowContext(ctx, q, i).Scan(&v))
		require.Equal(t, i, v)
	}
	var prepared int
	require.NoError(t, d.SQL.QueryRowContext(ctx, `SELECT count(*) FROM pg_prepared_statements WHERE statement = $1`, q).Scan(&prepared))
	require.Equal(t, 1, prepared, "the statement is prepared once and reused")
	require.NoError(t, d.SQL.QueryRowContext(ctx, `SELECT count(*) FROM pg_prepared_statements WHERE statement LIKE 'CREATE TABLE%'`).Scan(&prepared))
	require.Zero(t, prepared, "a statement without arguments is not prepared")

	_, err = d.SQL.ExecContext(ctx, `ALTER TABLE n ALTER COLUMN v TYPE bigint`)
	require.NoError(t, err)
	var v int64
	require.NoError(t, d.SQL.QueryRowContext(ctx, q, 2).Scan(&v), "a cached statement whose result type changed runs again, prepared afresh")
	require.EqualValues(t, 2, v)
}
