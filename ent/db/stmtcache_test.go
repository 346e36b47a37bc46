package db_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/ent/db"
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
