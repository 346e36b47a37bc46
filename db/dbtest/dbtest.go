// Package dbtest gives each test its own migrated database: a SQLite file
// always, and a PostgreSQL schema of its own when TEST_DATABASE_URL is set.
package dbtest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"entgo.io/ent/dialect"
	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/db"
)

// Backend names a database the suite runs on.
type Backend string

// The backends.
const (
	SQLite   Backend = "sqlite"
	Postgres Backend = "postgres"
)

// Each runs f once per backend as a subtest: SQLite always, PostgreSQL when
// TEST_DATABASE_URL is set (and says it was skipped otherwise).
func Each(t *testing.T, f func(t *testing.T, d *db.DB)) {
	t.Helper()
	for _, b := range []Backend{SQLite, Postgres} {
		t.Run(string(b), func(t *testing.T) {
			t.Parallel()
			f(t, Open(t, b))
		})
	}
}

// Open returns a new, migrated database on backend b, removed when the test
// ends. For PostgreSQL it skips the test when TEST_DATABASE_URL is unset.
func Open(t testing.TB, b Backend) *db.DB {
	t.Helper()
	ctx := context.Background()
	d, err := db.Open(ctx, URL(t, b))
	require.NoError(t, err)
	t.Cleanup(func() { _ = d.Close() })
	require.NoError(t, d.Migrate(ctx))
	return d
}

// URL returns the address of a new, empty database on backend b (for a
// process of its own to open), removed when the test ends. For PostgreSQL
// it skips the test when TEST_DATABASE_URL is unset.
func URL(t testing.TB, b Backend) string {
	t.Helper()
	if b == Postgres {
		base := os.Getenv("TEST_DATABASE_URL")
		if base == "" {
			t.Skip("TEST_DATABASE_URL not set: PostgreSQL skipped")
		}
		return newSchema(t, base)
	}
	return "sqlite://" + filepath.Join(t.TempDir(), "toolgate.db")
}

var admin struct {
	once sync.Once
	db   *sql.DB
	err  error
}

// newSchema creates a schema of the test's own and returns a URL whose
// search_path is that schema. The schema is dropped when the test ends.
func newSchema(t testing.TB, base string) string {
	t.Helper()
	admin.once.Do(func() { admin.db, admin.err = sql.Open("postgres", base) })
	require.NoError(t, admin.err)
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	schema := "t_" + hex.EncodeToString(b)
	_, err := admin.db.Exec("CREATE SCHEMA " + schema)
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = admin.db.Exec("DROP SCHEMA " + schema + " CASCADE") })
	u, err := url.Parse(base)
	require.NoError(t, err)
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

// Counter is a driver that records every statement sent through it.
type Counter struct {
	dialect.Driver
	mu    sync.Mutex
	stmts []string
}

// Count wraps d's driver so that every statement is recorded, and returns
// the counter.
func Count(d *db.DB) *Counter {
	c := &Counter{Driver: d.Driver}
	d.Driver = c
	return c
}

func (c *Counter) record(query string) {
	c.mu.Lock()
	c.stmts = append(c.stmts, query)
	c.mu.Unlock()
}

// Exec records and runs a statement.
func (c *Counter) Exec(ctx context.Context, query string, args, v any) error {
	c.record(query)
	return c.Driver.Exec(ctx, query, args, v)
}

// Query records and runs a query.
func (c *Counter) Query(ctx context.Context, query string, args, v any) error {
	c.record(query)
	return c.Driver.Query(ctx, query, args, v)
}

// Tx starts a transaction whose statements are recorded too.
func (c *Counter) Tx(ctx context.Context) (dialect.Tx, error) {
	tx, err := c.Driver.Tx(ctx)
	if err != nil {
		return nil, err
	}
	return &countingTx{Tx: tx, c: c}, nil
}

// Reset forgets what was recorded.
func (c *Counter) Reset() {
	c.mu.Lock()
	c.stmts = nil
	c.mu.Unlock()
}

// Statements returns what was recorded since the last Reset.
func (c *Counter) Statements() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.stmts...)
}

type countingTx struct {
	dialect.Tx
	c *Counter
}

func (t *countingTx) Exec(ctx context.Context, query string, args, v any) error {
	t.c.record(query)
	return t.Tx.Exec(ctx, query, args, v)
}

func (t *countingTx) Query(ctx context.Context, query string, args, v any) error {
	t.c.record(query)
	return t.Tx.Query(ctx, query, args, v)
}

// String describes the counter, for failure messages.
func (c *Counter) String() string {
	return fmt.Sprintf("%d statements", len(c.Statements()))
}
