package conn

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"reflect"
	"strings"

	"github.com/toolgate/toolgate/db/gate"
)

// SQLite's connections of the writers' pool send their writes through
// the file's write gate (package gate), and can defer a transaction's
// BEGIN to its first statement.

// deferBeginKey marks a context whose transaction begins with its first
// statement (DeferBegin).
type deferBeginKey struct{}

// DeferBegin marks ctx so that a transaction begun with it on SQLite sends
// its BEGIN just before its first statement, and one that sends no
// statement sends nothing at all: no BEGIN, COMMIT or ROLLBACK, and no
// wait at the write gate. Nothing runs on the connection in between, so
// the transaction is the same; only the write lock (BEGIN IMMEDIATE) is
// taken a moment later. The job queue's transactions are begun so
// (queuesqlite): its scheduler opens one every few seconds and most
// find nothing to do.
func DeferBegin(ctx context.Context) context.Context {
	return context.WithValue(ctx, deferBeginKey{}, true)
}

// sqliteConnector gives SQLite connections the write gate and the
// deferred BEGIN. It is the outermost layer, so an observer sees a BEGIN
// only when it is sent, and a statement only once it may run.
type sqliteConnector struct {
	driver.Connector
	gate gate.Gate
}

func (c sqliteConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &sqliteConn{layer: layer{conn}, gate: c.gate}, nil
}

// sqliteConn runs its writes through the gate and can defer a BEGIN.
// database/sql uses a connection from one goroutine at a time (a
// transaction's rollback on a cancelled context included), so it needs no
// lock.
type sqliteConn struct {
	layer
	gate gate.Gate
	// tx is the transaction open on the connection, nil outside one.
	tx *sqliteTxn
}

// sqliteTxn is a transaction on a sqliteConn. tx is nil while its BEGIN is
// deferred and not sent; gated: it holds the write gate.
type sqliteTxn struct {
	c     *sqliteConn
	opts  driver.TxOptions
	tx    driver.Tx
	gated bool
}

func (c *sqliteConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	if c.tx != nil {
		return nil, errors.New("sqlite: a transaction is already open on the connection")
	}
	t := &sqliteTxn{c: c, opts: opts}
	if deferred, _ := ctx.Value(deferBeginKey{}).(bool); !deferred {
		if err := t.begin(ctx); err != nil {
			return nil, err
		}
	}
	c.tx = t
	return t, nil
}

// begin sends the transaction's BEGIN, first entering the gate unless the
// transaction is read-only (a plain, deferred BEGIN that takes no write
// lock).
func (t *sqliteTxn) begin(ctx context.Context) error {
	if !t.opts.ReadOnly {
		if err := t.c.gate.Enter(ctx); err != nil {
			return fmt.Errorf("begin: %w", err)
		}
		t.gated = true
	}
	var (
		tx  driver.Tx
		err error
	)
	if b, ok := t.c.Conn.(driver.ConnBeginTx); ok {
		tx, err = b.BeginTx(ctx, t.opts)
	} else {
		tx, err = t.c.Conn.Begin() //nolint:staticcheck // the driver has nothing newer
	}
	if err != nil {
		t.end()
		return err
	}
	t.tx = tx
	return nil
}

// sent sends the open transaction's BEGIN if it is deferred; it reports
// whether a transaction is open.
func (c *sqliteConn) sent(ctx context.Context) (bool, error) {
	t := c.tx
	if t == nil {
		return false, nil
	}
	if t.tx == nil {
		if err := t.begin(ctx); err != nil {
			return true, err
		}
	}
	return true, nil
}

// end leaves the gate, if the transaction holds it, and the connection.
func (t *sqliteTxn) end() {
	if t.gated {
		t.gated = false
		t.c.gate.Leave()
	}
	if t.c.tx == t {
		t.c.tx = nil
	}
}

func (t *sqliteTxn) Commit() error {
	defer t.end()
	if t.tx == nil {
		return nil // nothing was sent: nothing to end
	}
	return t.tx.Commit()
}

func (t *sqliteTxn) Rollback() error {
	defer t.end()
	if t.tx == nil {
		return nil
	}
	return t.tx.Rollback()
}

// readOnly reports whether a statement sent outside a transaction only
// reads: a SELECT, or a WITH that names no write. Anything else goes
// through the gate.
func readOnly(query string) bool {
	switch firstWord(query) {
	case "SELECT", "VALUES", "EXPLAIN":
		return true
	case "WITH":
		u := strings.ToUpper(query)
		for _, w := range []string{"INSERT", "UPDATE", "DELETE", "REPLACE"} {
			if strings.Contains(u, w) {
				return false
			}
		}
		return true
	}
	return false
}

// firstWord is the statement's first keyword, in upper case, past spaces,
// comments and parentheses.
func firstWord(q string) string {
	for {
		q = strings.TrimLeft(q, " \t\r\n(")
		switch {
		case strings.HasPrefix(q, "--"):
			_, q, _ = strings.Cut(q, "\n")
		case strings.HasPrefix(q, "/*"):
			_, q, _ = strings.Cut(q, "*/")
		default:
			end := strings.IndexFunc(q, func(r rune) bool {
				return (r < 'a' || r > 'z') && (r < 'A' || r > 'Z')
			})
			if end < 0 {
				end = len(q)
			}
			return strings.ToUpper(q[:end])
		}
	}
}

func (c *sqliteConn) Prepare(query string) (driver.Stmt, error) {
	return c.PrepareContext(context.Background(), query)
}

func (c *sqliteConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	if _, err := c.sent(ctx); err != nil {
		return nil, err
	}
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
	return &sqliteStmt{Stmt: st, c: c, write: !readOnly(query)}, nil
}

// enter enters the gate for a write sent outside a transaction, and
// reports whether it did (the caller then leaves it).
func (c *sqliteConn) enter(ctx context.Context, write bool) (bool, error) {
	inTx, err := c.sent(ctx)
	if err != nil || inTx || !write {
		return false, err
	}
	if err := c.gate.Enter(ctx); err != nil {
		return false, err
	}
	return true, nil
}

// gated runs a statement's rows past the gate: a write's lock is held
// until its statement is reset, when its rows are closed.
func (c *sqliteConn) gated(rows driver.Rows, err error, entered bool) (driver.Rows, error) {
	switch {
	case !entered:
		return rows, err
	case err != nil:
		c.gate.Leave()
		return nil, err
	}
	return &gatedRows{Rows: rows, leave: c.gate.Leave}, nil
}

func (c *sqliteConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	e, ok := c.Conn.(driver.ExecerContext)
	if !ok {
		return nil, driver.ErrSkip
	}
	entered, err := c.enter(ctx, true)
	if err != nil {
		return nil, err
	}
	if entered {
		defer c.gate.Leave()
	}
	return e.ExecContext(ctx, query, args)
}

func (c *sqliteConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	q, ok := c.Conn.(driver.QueryerContext)
	if !ok {
		return nil, driver.ErrSkip
	}
	entered, err := c.enter(ctx, !readOnly(query))
	if err != nil {
		return nil, err
	}
	rows, err := q.QueryContext(ctx, query, args)
	return c.gated(rows, err, entered)
}

func (c *sqliteConn) CheckNamedValue(nv *driver.NamedValue) error {
	if ch, ok := c.Conn.(driver.NamedValueChecker); ok {
		return ch.CheckNamedValue(nv)
	}
	return driver.ErrSkip
}

func (c *sqliteConn) ResetSession(ctx context.Context) error {
	if c.tx != nil {
		c.tx.end()
	}
	return c.layer.ResetSession(ctx)
}

// Close leaves the gate if a transaction still held it.
func (c *sqliteConn) Close() error {
	if c.tx != nil {
		c.tx.end()
	}
	return c.Conn.Close()
}

// sqliteStmt is a prepared statement of a sqliteConn: outside a
// transaction, a write goes through the gate.
type sqliteStmt struct {
	driver.Stmt
	c     *sqliteConn
	write bool
}

func (s *sqliteStmt) ExecContext(ctx context.Context, args []driver.NamedValue) (driver.Result, error) {
	e, ok := s.Stmt.(driver.StmtExecContext)
	if !ok {
		return nil, driver.ErrSkip
	}
	entered, err := s.c.enter(ctx, true)
	if err != nil {
		return nil, err
	}
	if entered {
		defer s.c.gate.Leave()
	}
	return e.ExecContext(ctx, args)
}

func (s *sqliteStmt) QueryContext(ctx context.Context, args []driver.NamedValue) (driver.Rows, error) {
	q, ok := s.Stmt.(driver.StmtQueryContext)
	if !ok {
		return nil, driver.ErrSkip
	}
	entered, err := s.c.enter(ctx, s.write)
	if err != nil {
		return nil, err
	}
	rows, err := q.QueryContext(ctx, args)
	return s.c.gated(rows, err, entered)
}

func (s *sqliteStmt) CheckNamedValue(nv *driver.NamedValue) error {
	if ch, ok := s.Stmt.(driver.NamedValueChecker); ok {
		return ch.CheckNamedValue(nv)
	}
	if ch, ok := s.c.Conn.(driver.NamedValueChecker); ok {
		return ch.CheckNamedValue(nv)
	}
	return driver.ErrSkip
}

// gatedRows leave the gate when closed. They pass on the column types the
// driver reports.
type gatedRows struct {
	driver.Rows
	leave func()
}

func (r *gatedRows) Close() error {
	err := r.Rows.Close()
	if r.leave != nil {
		r.leave()
		r.leave = nil
	}
	return err
}

func (r *gatedRows) ColumnTypeDatabaseTypeName(i int) string {
	return (&cachedRows{Rows: r.Rows}).ColumnTypeDatabaseTypeName(i)
}

func (r *gatedRows) ColumnTypeLength(i int) (int64, bool) {
	return (&cachedRows{Rows: r.Rows}).ColumnTypeLength(i)
}

func (r *gatedRows) ColumnTypeNullable(i int) (bool, bool) {
	return (&cachedRows{Rows: r.Rows}).ColumnTypeNullable(i)
}

func (r *gatedRows) ColumnTypePrecisionScale(i int) (int64, int64, bool) {
	return (&cachedRows{Rows: r.Rows}).ColumnTypePrecisionScale(i)
}

func (r *gatedRows) ColumnTypeScanType(i int) reflect.Type {
	return (&cachedRows{Rows: r.Rows}).ColumnTypeScanType(i)
}
