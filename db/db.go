// Package db opens toolgate's database, SQLite (the embedded default) or
// PostgreSQL, and brings its schema up to date.
package db

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"entgo.io/ent/dialect"
	entsql "entgo.io/ent/dialect/sql"
	"github.com/jackc/pgx/v5/pgxpool"
	_ "github.com/lib/pq"  // registers "postgres"
	_ "modernc.org/sqlite" // registers "sqlite"

	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/riverdriver/riverdatabasesql"
	"github.com/riverqueue/river/riverdriver/riversqlite"
	"github.com/riverqueue/river/rivermigrate"

	"github.com/toolgate/toolgate/db/conn"
	"github.com/toolgate/toolgate/db/gate"
	"github.com/toolgate/toolgate/db/queue"
	"github.com/toolgate/toolgate/ent"
	"github.com/toolgate/toolgate/ent/conversation"
	"github.com/toolgate/toolgate/ent/hook"
	"github.com/toolgate/toolgate/ent/hybrid"
	"github.com/toolgate/toolgate/ent/intercept"
	"github.com/toolgate/toolgate/ent/migrate"
	_ "github.com/toolgate/toolgate/ent/runtime" // the schema's defaults, hooks and privacy policies
)

// DefaultPath is the SQLite file used when no database URL is given.
const DefaultPath = "./data/toolgate.db"

// DB is an open database: the driver that ent clients share and the
// underlying pool.
type DB struct {
	// Dialect is dialect.SQLite or dialect.Postgres.
	Dialect string
	// SQL is the connection pool.
	SQL *sql.DB
	// Driver is shared by every ent client of this database, so that each
	// can carry its own interceptors over one pool. Tests wrap it to count
	// statements.
	Driver dialect.Driver
	// jobs is the job queue's own pool on PostgreSQL: pgx can LISTEN, so
	// jobs are fetched when they are inserted instead of by polling. Nil on
	// SQLite.
	jobs *pgxpool.Pool
	// read is SQLite's pool of read-only connections, which the Driver's
	// reads outside a transaction run on (conn.RouteReads). Nil on
	// PostgreSQL.
	read *sql.DB
}

// Options change how OpenWith connects.
type Options struct {
	// Observe, when set, is told the text of every statement sent to the
	// database, by any pool of this DB (ent's, the job queue's), and of
	// each BEGIN, COMMIT and ROLLBACK: tests and benchmarks count round
	// trips with it. It must be safe for concurrent use.
	Observe func(query string)
	// Dialed, when set, is told of every network connection the DB opens
	// to PostgreSQL: each session of either pool, and each connection
	// lib/pq opens only to cancel a query. Tests count new sessions with
	// it. It must be safe for concurrent use.
	Dialed func()
	// noBusyWait: SQLite's connections never wait for its write lock, a
	// writer that finds it taken fails at once (tests of the write gate).
	noBusyWait bool
}

// Queue returns the database's job queue.
func (d *DB) Queue() queue.Queue { return queue.New(d.Dialect, d.SQL, d.jobs) }

// Open connects to the database named by rawURL: "" for the default SQLite
// file, "postgres://…" for PostgreSQL, "sqlite://PATH" or "file:PATH" for a
// SQLite file.
func Open(ctx context.Context, rawURL string) (*DB, error) {
	return OpenWith(ctx, rawURL, Options{})
}

// OpenWith is Open with options.
func OpenWith(ctx context.Context, rawURL string, o Options) (*DB, error) {
	var (
		d   *DB
		err error
	)
	switch {
	case rawURL == "":
		d, err = openSQLite(DefaultPath, o)
	case strings.HasPrefix(rawURL, "postgres://"), strings.HasPrefix(rawURL, "postgresql://"):
		d, err = openPostgres(rawURL, o)
	case strings.HasPrefix(rawURL, "sqlite://"):
		d, err = openSQLite(strings.TrimPrefix(rawURL, "sqlite://"), o)
	case strings.HasPrefix(rawURL, "file:"):
		d, err = openSQLite(strings.TrimPrefix(rawURL, "file:"), o)
	default:
		return nil, fmt.Errorf("database url %q: want postgres://, sqlite:// or file:PATH", redact(rawURL))
	}
	if err != nil {
		return nil, err
	}
	if err := d.SQL.PingContext(ctx); err != nil {
		_ = d.Close()
		return nil, fmt.Errorf("reach database: %w", err)
	}
	return d, nil
}

func openSQLite(path string, o Options) (*DB, error) {
	if path == "" {
		return nil, errors.New("sqlite database path is empty")
	}
	// Keep only the path: pragmas are ours to set.
	path, _, _ = strings.Cut(path, "?")
	if path != ":memory:" {
		if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
			return nil, fmt.Errorf("create database folder: %w", err)
		}
	}
	// modernc.org/sqlite ignores _fk=1: foreign keys, WAL and the busy wait
	// are set as pragmas on every connection. Immediate transactions take
	// the write lock at BEGIN, so two writers wait instead of deadlocking;
	// this process's writers wait at its write gate (package gate), the
	// busy wait is for other processes'.
	// Times are written in SQLite's own format, in UTC: without it the
	// driver writes Go's debug string (with its monotonic "m=+…" reading),
	// and ordering or paging by a time column compares those strings wrongly.
	busy := "10000"
	if o.noBusyWait {
		busy = "0"
	}
	dsn := "file:" + path + "?_pragma=foreign_keys(1)&_pragma=journal_mode(WAL)" +
		"&_pragma=busy_timeout(" + busy + ")&_pragma=synchronous(NORMAL)&_txlock=immediate" +
		"&_time_format=sqlite&_timezone=UTC"
	pool, err := conn.Open(conn.Config{Driver: "sqlite", DSN: dsn, Gate: gate.For(path), Observe: o.Observe})
	if err != nil {
		return nil, fmt.Errorf("open sqlite: %w", err)
	}
	pool.SetMaxIdleConns(conn.WriteIdle)
	d := &DB{Dialect: dialect.SQLite, SQL: pool}
	if path == ":memory:" {
		// Each connection is a database of its own: one pool for all.
		d.Driver = conn.Traced(entsql.OpenDB(dialect.SQLite, pool))
		return d, nil
	}
	// Reads on connections of their own, that cannot write (conn.RouteReads).
	read, err := conn.Open(conn.Config{Driver: "sqlite", DSN: "file:" + path + "?_pragma=foreign_keys(1)&_pragma=busy_timeout(" + busy + ")" +
		"&_pragma=query_only(1)&_time_format=sqlite&_timezone=UTC", Observe: o.Observe})
	if err != nil {
		_ = pool.Close()
		return nil, fmt.Errorf("open sqlite: %w", err)
	}
	read.SetMaxOpenConns(conn.ReadConns)
	read.SetMaxIdleConns(conn.ReadConns)
	d.read = read
	d.Driver = conn.Traced(conn.RouteReads(entsql.OpenDB(dialect.SQLite, pool), entsql.OpenDB(dialect.SQLite, read)))
	return d, nil
}

func openPostgres(rawURL string, o Options) (*DB, error) {
	pool, err := conn.Open(conn.Config{Driver: "postgres", DSN: rawURL, Observe: o.Observe, Dialed: o.Dialed})
	if err != nil {
		return nil, fmt.Errorf("open postgres: %w", err)
	}
	pool.SetMaxOpenConns(20)
	pool.SetMaxIdleConns(10)
	// The job queue's pool connects when the queue first needs it; one of
	// its connections listens while a queue runs.
	cfg, err := pgxpool.ParseConfig(rawURL)
	if err != nil {
		_ = pool.Close()
		return nil, fmt.Errorf("open postgres: %w", err)
	}
	cfg.MaxConns = 6
	cfg.MinConns = 0
	if o.Observe != nil {
		cfg.ConnConfig.Tracer = conn.PGXObserver(o.Observe)
	}
	cfg.ShouldPing = conn.ShouldPing(o.Observe)
	if dial, dialed := cfg.ConnConfig.DialFunc, o.Dialed; dialed != nil {
		cfg.ConnConfig.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
			dialed()
			return dial(ctx, network, addr)
		}
	}
	jobs, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		_ = pool.Close()
		return nil, fmt.Errorf("open postgres job pool: %w", err)
	}
	// Text keeps NUL and non-UTF-8 bytes, as SQLite's does (package
	// pgtext). Statements in a traced context get spans of their own.
	return &DB{Dialect: dialect.Postgres, SQL: pool, Driver: conn.Traced(conn.Escaping(entsql.OpenDB(dialect.Postgres, pool))), jobs: jobs}, nil
}

// Client returns a new ent client over the database, with no interceptors
// and the hooks that keep derived columns true.
func (d *DB) Client(opts ...ent.Option) *ent.Client {
	c := ent.NewClient(append([]ent.Option{ent.Driver(d.Driver)}, opts...)...)
	c.Turn.Use(countTurns)
	c.ModelCall.Use(addSpend)
	c.Intercept(noDistinctOverJSON)
	return c
}

// jsonTables are the entities with a JSON column (json, not jsonb, on
// PostgreSQL: ent/schema/json.go).
var jsonTables = map[string]bool{"Agent": true, "Application": true, "ToolCall": true, "Turn": true}

// noDistinctOverJSON reads a traversal to an entity with a JSON column
// (conversation.QueryTurns(), turn.QueryToolCalls(), …) without the
// DISTINCT ent adds by default: PostgreSQL's json has no equality, so
// SELECT DISTINCT over its row fails. None is needed: no edge to these
// entities goes through a join table, and a traversal by IN (subquery)
// never repeats a row.
var noDistinctOverJSON = ent.InterceptFunc(func(next ent.Querier) ent.Querier {
	return ent.QuerierFunc(func(ctx context.Context, q ent.Query) (ent.Value, error) {
		if iq, err := intercept.NewQuery(q); err == nil && jsonTables[iq.Type()] {
			iq.Unique(false)
		}
		return next.Query(ctx, q)
	})
})

// countTurns counts a new turn towards its conversation's turns_count, in
// the same transaction as the insert, and marks the conversation updated
// as of the turn's start in the same statement: a new message updates its
// conversation, and nobody writes its updated_at a second time for it.
func countTurns(next ent.Mutator) ent.Mutator {
	return hook.TurnFunc(func(ctx context.Context, m *ent.TurnMutation) (ent.Value, error) {
		v, err := next.Mutate(ctx, m)
		if err != nil || !m.Op().Is(ent.OpCreate) {
			return v, err
		}
		id, _ := m.ConversationID()
		u := m.Client().Conversation.Update().Where(conversation.ID(id)).AddTurnsCount(1)
		if at, ok := m.StartedAt(); ok {
			u.SetUpdatedAt(at)
		}
		if err := u.Exec(ctx); err != nil {
			return nil, fmt.Errorf("count turn: %w", err)
		}
		return v, nil
	})
}

// Close closes the pools.
func (d *DB) Close() error {
	if d.jobs != nil {
		d.jobs.Close()
	}
	if d.read != nil {
		_ = d.read.Close()
	}
	return d.SQL.Close()
}

// Migrate brings the schema up to date. It is safe to run again: a schema
// that is current is left as it is.
func (d *DB) Migrate(ctx context.Context) error {
	// ent's migration shares state across clients in a process: one at a time.
	migrating.Lock()
	defer migrating.Unlock()
	if err := d.schemaClient().Schema.Create(ctx, migrate.WithDropIndex(true)); err != nil {
		return fmt.Errorf("migrate schema: %w", err)
	}
	if d.Dialect == dialect.SQLite {
		if err := d.rewriteDebugTimes(ctx); err != nil {
			return err
		}
	}
	if d.Dialect == dialect.Postgres {
		if err := d.storeResultsUncompressed(ctx); err != nil {
			return err
		}
	}
	// Conversations made before turns were counted as they are added.
	if _, err := d.SQL.ExecContext(ctx, `UPDATE conversations SET turns_count =
		(SELECT COUNT(*) FROM turns WHERE turns.conversation_id = conversations.id)
		WHERE turns_count = 0 AND EXISTS (SELECT 1 FROM turns WHERE turns.conversation_id = conversations.id)`); err != nil {
		return fmt.Errorf("count turns of earlier conversations: %w", err)
	}
	// Costs recorded before money was kept exact: their micro-dollars from
	// the dollars they stored. A row with its micro-dollars is not matched,
	// so running it again changes nothing.
	for _, table := range []string{migrate.ModelCallsTable.Name, migrate.SummariesTable.Name} {
		if _, err := d.SQL.ExecContext(ctx, `UPDATE `+table+` SET cost_micros = CAST(ROUND(cost * 1000000) AS BIGINT)
			WHERE cost_micros = 0 AND cost <> 0`); err != nil {
			return fmt.Errorf("exact costs of earlier %s: %w", table, err)
		}
	}
	if err := d.backfillSpend(ctx); err != nil {
		return err
	}
	if err := hybrid.Migrate(ctx, d.SQL, d.Dialect); err != nil {
		return err
	}
	m, err := rivermigrate.New(d.sqlQueue(), nil)
	if err != nil {
		return fmt.Errorf("job queue migrations: %w", err)
	}
	if _, err := m.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return fmt.Errorf("migrate job queue: %w", err)
	}
	return nil
}

// storeResultsUncompressed keeps stored results' content out of line and
// uncompressed on PostgreSQL. Results are read in windows and searched
// whole: compressed, a window deep in a large result decompressed all
// before it, and a search the whole value, which cost more than reading
// it. Uncompressed, substring reads only the pages it needs. Results
// stored before keep their compression until rewritten. The ALTER takes
// a lock, so it runs only when the setting is not there yet.
func (d *DB) storeResultsUncompressed(ctx context.Context) error {
	table := migrate.StoredResultsTable.Name
	var storage string
	err := d.SQL.QueryRowContext(ctx, `SELECT attstorage FROM pg_attribute
		WHERE attrelid = to_regclass($1) AND attname = 'content'`, table).Scan(&storage)
	if err != nil {
		return fmt.Errorf("read stored results' storage: %w", err)
	}
	if storage == "e" {
		return nil
	}
	if _, err := d.SQL.ExecContext(ctx, `ALTER TABLE `+table+` ALTER COLUMN content SET STORAGE EXTERNAL`); err != nil {
		return fmt.Errorf("store results uncompressed: %w", err)
	}
	return nil
}

// sqlQueue is River's driver over the database/sql pool: migrations run on it.
func (d *DB) sqlQueue() riverdriver.Driver[*sql.Tx] {
	if d.Dialect == dialect.Postgres {
		return riverdatabasesql.New(d.SQL)
	}
	return riversqlite.New(d.SQL)
}

var migrating sync.Mutex

// Pending reports whether the schema lacks changes that Migrate would make.
func (d *DB) Pending(ctx context.Context) (bool, error) {
	migrating.Lock()
	defer migrating.Unlock()
	var b strings.Builder
	if err := d.schemaClient().Schema.WriteTo(ctx, &b); err != nil {
		return false, fmt.Errorf("inspect schema: %w", err)
	}
	for _, line := range strings.Split(b.String(), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || line == "BEGIN;" || line == "COMMIT;" || strings.HasPrefix(line, "--") {
			continue
		}
		return true, nil
	}
	return false, nil
}

// redact drops the password from a database URL, for error messages.
func redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.User == nil {
		return raw
	}
	if _, ok := u.User.Password(); ok {
		u.User = url.UserPassword(u.User.Username(), "xxxxx")
	}
	return u.String()
}

// schemaClient is a client for migrations, on the writers' driver under
// the escaping and the spans (conn.Writer).
func (d *DB) schemaClient() *ent.Client {
	return ent.NewClient(ent.Driver(conn.Writer(d.Driver)))
}
