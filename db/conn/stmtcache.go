package conn

import (
	"container/list"
	"context"
	"database/sql/driver"
	"errors"
	"reflect"

	"github.com/lib/pq"
)

// stmtCacheSize is how many prepared statements each connection keeps:
// the runtime and the API send a few dozen distinct statements over and
// over; migrations' one-off statements pass through and are evicted.
const stmtCacheSize = 256

// cachingConnector gives each connection a cache of prepared statements by
// text. SQLite's driver parses every statement it is sent afresh
// otherwise, a fifth of a turn's CPU; a prepared statement is reset and
// bound again instead. PostgreSQL parses and plans every statement lib/pq
// sends with arguments, in two round trips (parse and describe, then bind
// and execute); a prepared one is bound and executed in one, and after a
// few executions PostgreSQL keeps its plan (a generic plan, chosen only
// when it costs no more than planning each time would).
type cachingConnector struct {
	driver.Connector
	// withArgsOnly caches only statements sent with arguments (PostgreSQL):
	// lib/pq sends one without arguments as a simple query, which may hold
	// several statements and cannot be prepared.
	withArgsOnly bool
}

func (c cachingConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	if _, ok := conn.(driver.ConnPrepareContext); !ok {
		return conn, nil
	}
	return &cachingConn{layer: layer{conn}, withArgsOnly: c.withArgsOnly, byQuery: map[string]*list.Element{}, lru: list.New()}, nil
}

// cachingConn runs ExecContext and QueryContext through its cache of
// prepared statements. database/sql uses a connection from one goroutine
// at a time (rows are closed under the connection's lock too), so the
// cache needs no lock of its own.
type cachingConn struct {
	layer
	withArgsOnly bool
	byQuery      map[string]*list.Element
	lru          *list.List
}

type cachedStmt struct {
	query string
	st    driver.Stmt
	// busy: rows of the statement are open; the same text meanwhile gets a
	// statement of its own.
	busy bool
	// evicted: closed once its rows are.
	evicted bool
}

// stmt returns a prepared statement for query, and whether it is the
// cache's (otherwise the caller closes it after use).
func (c *cachingConn) stmt(ctx context.Context, query string) (*cachedStmt, bool, error) {
	if e, ok := c.byQuery[query]; ok {
		cs := e.Value.(*cachedStmt)
		if !cs.busy {
			c.lru.MoveToFront(e)
			return cs, true, nil
		}
		st, err := c.Conn.(driver.ConnPrepareContext).PrepareContext(ctx, query)
		if err != nil {
			return nil, false, err
		}
		return &cachedStmt{query: query, st: st}, false, nil
	}
	st, err := c.Conn.(driver.ConnPrepareContext).PrepareContext(ctx, query)
	if err != nil {
		return nil, false, err
	}
	cs := &cachedStmt{query: query, st: st}
	c.byQuery[query] = c.lru.PushFront(cs)
	for c.lru.Len() > stmtCacheSize {
		old := c.lru.Back()
		c.lru.Remove(old)
		ocs := old.Value.(*cachedStmt)
		delete(c.byQuery, ocs.query)
		ocs.evicted = true
		if !ocs.busy {
			_ = ocs.st.Close()
		}
	}
	return cs, true, nil
}

func (c *cachingConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	if c.withArgsOnly && len(args) == 0 {
		if ex, ok := c.Conn.(driver.ExecerContext); ok {
			return ex.ExecContext(ctx, query, args)
		}
		return nil, driver.ErrSkip
	}
	cs, cached, err := c.stmt(ctx, query)
	if err != nil {
		return nil, err
	}
	ex, ok := cs.st.(driver.StmtExecContext)
	if !ok {
		if !cached {
			_ = cs.st.Close()
		}
		return nil, driver.ErrSkip
	}
	res, err := ex.ExecContext(ctx, args)
	if !cached {
		_ = cs.st.Close()
	}
	return res, c.stale(cs, cached, err)
}

func (c *cachingConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	if c.withArgsOnly && len(args) == 0 {
		if q, ok := c.Conn.(driver.QueryerContext); ok {
			return q.QueryContext(ctx, query, args)
		}
		return nil, driver.ErrSkip
	}
	cs, cached, err := c.stmt(ctx, query)
	if err != nil {
		return nil, err
	}
	q, ok := cs.st.(driver.StmtQueryContext)
	if !ok {
		if !cached {
			_ = cs.st.Close()
		}
		return nil, driver.ErrSkip
	}
	rows, err := q.QueryContext(ctx, args)
	if err != nil {
		if !cached {
			_ = cs.st.Close()
		}
		return nil, c.stale(cs, cached, err)
	}
	cs.busy = true
	return &cachedRows{Rows: rows, release: func() {
		cs.busy = false
		if !cached || cs.evicted {
			_ = cs.st.Close()
		}
	}}, nil
}

// stale answers a cached statement's error. PostgreSQL refuses to run a
// prepared statement whose result columns a migration has changed (another
// replica's, say) with "cached plan must not change result type", before
// running anything: the statement is dropped from the cache and the
// connection reported bad, so database/sql runs the statement again on
// another connection, prepared afresh (within a transaction the error
// reaches the caller, as any other would).
func (c *cachingConn) stale(cs *cachedStmt, cached bool, err error) error {
	var pe *pq.Error
	if err == nil || !cached || !errors.As(err, &pe) || pe.Code != "0A000" {
		return err
	}
	if e, ok := c.byQuery[cs.query]; ok && e.Value == cs {
		c.lru.Remove(e)
		delete(c.byQuery, cs.query)
		cs.evicted = true
		if !cs.busy {
			_ = cs.st.Close()
		}
	}
	return driver.ErrBadConn
}

func (c *cachingConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	return c.Conn.(driver.ConnPrepareContext).PrepareContext(ctx, query)
}

func (c *cachingConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	if b, ok := c.Conn.(driver.ConnBeginTx); ok {
		return b.BeginTx(ctx, opts)
	}
	return c.Conn.Begin() //nolint:staticcheck // the driver has nothing newer
}

func (c *cachingConn) CheckNamedValue(nv *driver.NamedValue) error {
	if ch, ok := c.Conn.(driver.NamedValueChecker); ok {
		return ch.CheckNamedValue(nv)
	}
	return driver.ErrSkip
}

// Close finalizes the cached statements, then closes the connection.
func (c *cachingConn) Close() error {
	for e := c.lru.Front(); e != nil; e = e.Next() {
		_ = e.Value.(*cachedStmt).st.Close()
	}
	c.lru.Init()
	clear(c.byQuery)
	return c.Conn.Close()
}

// cachedRows gives a cached statement back when its rows are closed. It
// passes on the column types the driver reports.
type cachedRows struct {
	driver.Rows
	release func()
}

func (r *cachedRows) Close() error {
	err := r.Rows.Close()
	if r.release != nil {
		r.release()
		r.release = nil
	}
	return err
}

func (r *cachedRows) ColumnTypeDatabaseTypeName(i int) string {
	if t, ok := r.Rows.(driver.RowsColumnTypeDatabaseTypeName); ok {
		return t.ColumnTypeDatabaseTypeName(i)
	}
	return ""
}

func (r *cachedRows) ColumnTypeLength(i int) (int64, bool) {
	if t, ok := r.Rows.(driver.RowsColumnTypeLength); ok {
		return t.ColumnTypeLength(i)
	}
	return 0, false
}

func (r *cachedRows) ColumnTypeNullable(i int) (bool, bool) {
	if t, ok := r.Rows.(driver.RowsColumnTypeNullable); ok {
		return t.ColumnTypeNullable(i)
	}
	return false, false
}

func (r *cachedRows) ColumnTypePrecisionScale(i int) (int64, int64, bool) {
	if t, ok := r.Rows.(driver.RowsColumnTypePrecisionScale); ok {
		return t.ColumnTypePrecisionScale(i)
	}
	return 0, 0, false
}

func (r *cachedRows) ColumnTypeScanType(i int) reflect.Type {
	if t, ok := r.Rows.(driver.RowsColumnTypeScanType); ok {
		return t.ColumnTypeScanType(i)
	}
	return reflect.TypeFor[any]()
}
