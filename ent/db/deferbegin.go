package db

import (
	"context"
	"database/sql/driver"
)

// deferBeginKey marks a context whose transaction begins with its first
// statement (deferBegin).
type deferBeginKey struct{}

// deferBegin marks ctx so that a transaction begun with it on SQLite sends
// its BEGIN just before its first statement, and one that sends no
// statement sends nothing at all: no BEGIN, COMMIT or ROLLBACK. Nothing
// runs on the connection in between, so the transaction is the same; only
// the write lock (BEGIN IMMEDIATE) is taken a moment later. The job
// queue's transactions are begun so (sqliteQueueDriver): its scheduler
// opens one every few seconds and most find nothing to do.
func deferBegin(ctx context.Context) context.Context {
	return context.WithValue(ctx, deferBeginKey{}, true)
}

// deferringConnector gives SQLite connections the deferred BEGIN. It is
// the outermost layer, so an observer sees a BEGIN only when it is sent.
type deferringConnector struct {
	driver.Connector
}

func (c deferringConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &deferringConn{Conn: conn}, nil
}

// deferringConn begins a deferred transaction (pending) before the first
// statement it is sent. database/sql uses a connection from one goroutine
// at a time, so it needs no lock.
type deferringConn struct {
	driver.Conn
	pending *deferredTx
}

// deferredTx is a transaction whose BEGIN may not have been sent yet: tx is
// nil until then.
type deferredTx struct {
	c    *deferringConn
	opts driver.TxOptions
	tx   driver.Tx
}

// begin sends the pending BEGIN, if there is one.
func (c *deferringConn) begin(ctx context.Context) error {
	p := c.pending
	if p == nil {
		return nil
	}
	c.pending = nil
	tx, err := c.beginNow(ctx, p.opts)
	if err != nil {
		return err
	}
	p.tx = tx
	return nil
}

func (c *deferringConn) beginNow(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	if b, ok := c.Conn.(driver.ConnBeginTx); ok {
		return b.BeginTx(ctx, opts)
	}
	return c.Conn.Begin() //nolint:staticcheck // the driver has nothing newer
}

func (c *deferringConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	if deferred, _ := ctx.Value(deferBeginKey{}).(bool); deferred {
		c.pending = &deferredTx{c: c, opts: opts}
		return c.pending, nil
	}
	return c.beginNow(ctx, opts)
}

func (t *deferredTx) Commit() error {
	if t.tx == nil {
		t.c.pending = nil // nothing was sent: nothing to end
		return nil
	}
	return t.tx.Commit()
}

func (t *deferredTx) Rollback() error {
	if t.tx == nil {
		t.c.pending = nil
		return nil
	}
	return t.tx.Rollback()
}

func (c *deferringConn) Prepare(query string) (driver.Stmt, error) {
	return c.PrepareContext(context.Background(), query)
}

func (c *deferringConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	if err := c.begin(ctx); err != nil {
		return nil, err
	}
	if p, ok := c.Conn.(driver.ConnPrepareContext); ok {
		return p.PrepareContext(ctx, query)
	}
	return c.Conn.Prepare(query)
}

func (c *deferringConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	if err := c.begin(ctx); err != nil {
		return nil, err
	}
	e, ok := c.Conn.(driver.ExecerContext)
	if !ok {
		return nil, driver.ErrSkip
	}
	return e.ExecContext(ctx, query, args)
}

func (c *deferringConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	if err := c.begin(ctx); err != nil {
		return nil, err
	}
	q, ok := c.Conn.(driver.QueryerContext)
	if !ok {
		return nil, driver.ErrSkip
	}
	return q.QueryContext(ctx, query, args)
}

func (c *deferringConn) CheckNamedValue(nv *driver.NamedValue) error {
	if ch, ok := c.Conn.(driver.NamedValueChecker); ok {
		return ch.CheckNamedValue(nv)
	}
	return driver.ErrSkip
}

func (c *deferringConn) ResetSession(ctx context.Context) error {
	c.pending = nil
	if r, ok := c.Conn.(driver.SessionResetter); ok {
		return r.ResetSession(ctx)
	}
	return nil
}

func (c *deferringConn) IsValid() bool {
	if v, ok := c.Conn.(driver.Validator); ok {
		return v.IsValid()
	}
	return true
}

func (c *deferringConn) Ping(ctx context.Context) error {
	if p, ok := c.Conn.(driver.Pinger); ok {
		return p.Ping(ctx)
	}
	return nil
}
