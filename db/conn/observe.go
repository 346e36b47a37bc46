package conn

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"net"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/lib/pq"

	"github.com/toolgate/toolgate/db/gate"
)

// Config is a database/sql pool to open.
type Config struct {
	// Driver is the database/sql driver's name: "sqlite" or "postgres".
	Driver string
	// DSN is the driver's data source name.
	DSN string
	// Gate, on SQLite's writers' pool, is the file's write gate.
	Gate gate.Gate
	// Observe, when set, is told the text of every statement before it is
	// sent, and of each BEGIN, COMMIT and ROLLBACK.
	Observe func(query string)
	// Dialed, when set, is told of every network connection lib/pq opens,
	// for a session or to cancel a query.
	Dialed func()
}

// Open opens a database/sql pool. Each connection keeps its prepared
// statements (stmtcache.go; on PostgreSQL those sent with arguments); with
// a gate (SQLite's writers' pool) its writes go through the file's write
// gate and it can defer a transaction's BEGIN (sqliteconn.go); when
// observe is set, every statement is reported to it before it is sent.
func Open(cfg Config) (*sql.DB, error) {
	driverName, dsn, o := cfg.Driver, cfg.DSN, cfg
	sqlite := driverName == "sqlite"
	observe := o.Observe
	probe, err := sql.Open(driverName, dsn)
	if err != nil {
		return nil, err
	}
	drv := probe.Driver()
	_ = probe.Close()
	var inner driver.Connector = dsnConnector{dsn: dsn, drv: drv}
	if dc, ok := drv.(driver.DriverContext); ok {
		if inner, err = dc.OpenConnector(dsn); err != nil {
			return nil, fmt.Errorf("open %s: %w", driverName, err)
		}
	}
	if driverName == "postgres" && o.Dialed != nil {
		pc, err := pq.NewConnector(dsn)
		if err != nil {
			return nil, fmt.Errorf("open %s: %w", driverName, err)
		}
		pc.Dialer(countingDialer{dialed: o.Dialed})
		inner = pc
	}
	inner = cachingConnector{Connector: inner, withArgsOnly: !sqlite}
	if observe != nil {
		inner = observingConnector{Connector: inner, observe: observe}
	}
	if cfg.Gate != nil {
		inner = sqliteConnector{Connector: inner, gate: cfg.Gate}
	}
	return sql.OpenDB(inner), nil
}

// countingDialer is lib/pq's own way of dialling, counted: lib/pq dials
// with it for its sessions and for the connections that send a cancel.
type countingDialer struct{ dialed func() }

func (d countingDialer) Dial(network, address string) (net.Conn, error) {
	d.dialed()
	return (&net.Dialer{}).Dial(network, address)
}

func (d countingDialer) DialTimeout(network, address string, timeout time.Duration) (net.Conn, error) {
	d.dialed()
	return (&net.Dialer{Timeout: timeout}).Dial(network, address)
}

func (d countingDialer) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	d.dialed()
	return (&net.Dialer{}).DialContext(ctx, network, address)
}

type dsnConnector struct {
	dsn string
	drv driver.Driver
}

func (c dsnConnector) Connect(context.Context) (driver.Conn, error) { return c.drv.Open(c.dsn) }
func (c dsnConnector) Driver() driver.Driver                        { return c.drv }

type observingConnector struct {
	driver.Connector
	observe func(string)
}

func (c observingConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &observingConn{layer: layer{conn}, observe: c.observe}, nil
}

// observingConn passes everything to its driver's connection; the
// interfaces it does not implement answer driver.ErrSkip, so database/sql
// takes the way it would have taken without the wrapper.
type observingConn struct {
	layer
	observe func(string)
}

func (c *observingConn) Prepare(query string) (driver.Stmt, error) {
	return c.PrepareContext(context.Background(), query)
}

func (c *observingConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	var (
		st  driver.Stmt
		err error
	)
	if p, ok := c.Conn.(driver.ConnPrepareContext); ok {
		st, err = p.PrepareContext(ctx, query)
	} else {
		st, err = c.Conn.Prepare(query)
	}
	if err != nil {
		return nil, err
	}
	return &observingStmt{Stmt: st, query: query, observe: c.observe}, nil
}

func (c *observingConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	e, ok := c.Conn.(driver.ExecerContext)
	if !ok {
		return nil, driver.ErrSkip
	}
	c.observe(query)
	return e.ExecContext(ctx, query, args)
}

func (c *observingConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	q, ok := c.Conn.(driver.QueryerContext)
	if !ok {
		return nil, driver.ErrSkip
	}
	c.observe(query)
	return q.QueryContext(ctx, query, args)
}

func (c *observingConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	var (
		tx  driver.Tx
		err error
	)
	c.observe("BEGIN")
	if b, ok := c.Conn.(driver.ConnBeginTx); ok {
		tx, err = b.BeginTx(ctx, opts)
	} else {
		tx, err = c.Conn.Begin() //nolint:staticcheck // the driver has nothing newer
	}
	if err != nil {
		return nil, err
	}
	return observingTx{Tx: tx, observe: c.observe}, nil
}

func (c *observingConn) CheckNamedValue(nv *driver.NamedValue) error {
	if ch, ok := c.Conn.(driver.NamedValueChecker); ok {
		return ch.CheckNamedValue(nv)
	}
	return driver.ErrSkip
}

type observingTx struct {
	driver.Tx
	observe func(string)
}

func (t observingTx) Commit() error {
	t.observe("COMMIT")
	return t.Tx.Commit()
}

func (t observingTx) Rollback() error {
	t.observe("ROLLBACK")
	return t.Tx.Rollback()
}

type observingStmt struct {
	driver.Stmt
	query   string
	observe func(string)
}

func (s *observingStmt) ExecContext(ctx context.Context, args []driver.NamedValue) (driver.Result, error) {
	s.observe(s.query)
	if e, ok := s.Stmt.(driver.StmtExecContext); ok {
		return e.ExecContext(ctx, args)
	}
	vals, err := values(args)
	if err != nil {
		return nil, err
	}
	return s.Stmt.Exec(vals) //nolint:staticcheck // the driver has nothing newer
}

func (s *observingStmt) QueryContext(ctx context.Context, args []driver.NamedValue) (driver.Rows, error) {
	s.observe(s.query)
	if q, ok := s.Stmt.(driver.StmtQueryContext); ok {
		return q.QueryContext(ctx, args)
	}
	vals, err := values(args)
	if err != nil {
		return nil, err
	}
	return s.Stmt.Query(vals) //nolint:staticcheck // the driver has nothing newer
}

func (s *observingStmt) CheckNamedValue(nv *driver.NamedValue) error {
	if ch, ok := s.Stmt.(driver.NamedValueChecker); ok {
		return ch.CheckNamedValue(nv)
	}
	return driver.ErrSkip
}

func values(args []driver.NamedValue) ([]driver.Value, error) {
	out := make([]driver.Value, len(args))
	for i, a := range args {
		if a.Name != "" {
			return nil, fmt.Errorf("named argument %q: the driver takes positions only", a.Name)
		}
		out[i] = a.Value
	}
	return out, nil
}

// PGXObserver reports the statements of a pgx pool (the job queue's) to
// observe.
func PGXObserver(observe func(string)) pgx.QueryTracer { return pgxObserver{observe} }

// pgxObserver reports the statements of a pgx pool.
type pgxObserver struct{ observe func(string) }

func (o pgxObserver) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	o.observe(data.SQL)
	return ctx
}

func (pgxObserver) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// PingAfterIdle is how long a connection of the job queue's pool rests
// before it is pinged when next taken. pgx's default, a second, pinged
// before nearly every poll of the queue: half of an idle replica's
// statements. A connection in use anyway needs none; one that died while
// it rested fails its statement, which the queue repeats on its next
// poll, and the pool drops it.
const PingAfterIdle = time.Minute

// ShouldPing is the job queue's pool's ping rule; each ping is observed
// (as the statement pgx sends, "-- ping"), so idle counts include them.
func ShouldPing(observe func(string)) func(context.Context, pgxpool.ShouldPingParams) bool {
	return func(_ context.Context, p pgxpool.ShouldPingParams) bool {
		ping := p.IdleDuration > PingAfterIdle
		if ping && observe != nil {
			observe("-- ping")
		}
		return ping
	}
}
