package conn

import (
	"context"
	"database/sql"
	"runtime"

	"entgo.io/ent/dialect"
	entsql "entgo.io/ent/dialect/sql"
)

// On SQLite, the reads of readers (Reading) outside a transaction run on
// a pool of their own: ReadConns connections opened read-only
// (query_only), which in WAL mode read while the writer writes. Every
// SQLite connection of a process shares the library's locks (its
// allocator's, its page cache's): a few hundred reads at once, as a team's
// clients make, spend their time queueing on those locks, and the writer
// in the transaction they hold up with them, so readers queue for a
// connection instead. Writers read where they write, on the writers' pool
// (DB.SQL), without queueing behind readers: transactions, with their
// reads, every write, the job queue, and whatever is not marked a
// reader's (the turn runtime, a mutation's reads before its transaction).

// ReadConns is the size of SQLite's read pool: a few reads per core keep
// the cores busy while one waits for the disk.
var ReadConns = max(4, 2*runtime.GOMAXPROCS(0))

// WriteIdle is how many of the writers' pool's connections stay open when
// idle: a connection opened anew reads the schema and prepares its
// statements again.
const WriteIdle = 16

// readerKey marks a reader's context (Reading).
type readerKey struct{}

// Reading marks ctx as a reader's, such as an API query's: on SQLite, what
// it reads outside a transaction is read on the read pool, where readers
// queue for a connection. Writers' reads, unmarked, are not held up behind
// theirs. On PostgreSQL it changes nothing.
func Reading(ctx context.Context) context.Context {
	return context.WithValue(ctx, readerKey{}, true)
}

// reading reports whether ctx is a reader's.
func reading(ctx context.Context) bool {
	r, _ := ctx.Value(readerKey{}).(bool)
	return r
}

// readRouted sends a reader's read outside a transaction to the read pool;
// writes, other reads, and transactions with all they send go to the
// writers' pool (Driver).
type readRouted struct {
	*entsql.Driver
	read *entsql.Driver
}

// RouteReads sends a reader's reads outside a transaction to read, the
// rest to write.
func RouteReads(write, read *entsql.Driver) dialect.Driver {
	return readRouted{Driver: write, read: read}
}

var _ dialect.Driver = readRouted{}

// Query runs a reader's statement that only reads on the read pool; a
// write that returns rows (INSERT … RETURNING) on the writers'.
func (d readRouted) Query(ctx context.Context, query string, args, v any) error {
	if reading(ctx) && readOnly(query) {
		return d.read.Query(ctx, query, args, v)
	}
	return d.Driver.Query(ctx, query, args, v)
}

// QueryContext runs a raw query, on the read pool when a reader's only
// reads (its rows are read from there).
func (d readRouted) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if reading(ctx) && readOnly(query) {
		return d.read.QueryContext(ctx, query, args...)
	}
	return d.Driver.QueryContext(ctx, query, args...)
}

// Close closes both pools' drivers.
func (d readRouted) Close() error {
	err := d.read.Close()
	if werr := d.Driver.Close(); werr != nil {
		return werr
	}
	return err
}

// Writer is the writers' driver under drv's layers (Traced, Escaping,
// RouteReads): migrations read the catalogue through database/sql's own
// rows, which the escaping and the spans have no use for, and on SQLite
// they read where they write.
func Writer(drv dialect.Driver) dialect.Driver {
	if t, ok := drv.(traceDriver); ok {
		drv = t.Driver
	}
	if t, ok := drv.(textDriver); ok {
		drv = t.Driver
	}
	if r, ok := drv.(readRouted); ok {
		drv = r.Driver
	}
	return drv
}
