package conn

import (
	"context"
	"database/sql"
	"errors"

	"entgo.io/ent/dialect"
	entsql "entgo.io/ent/dialect/sql"

	"github.com/toolgate/toolgate/db/pgtext"
)

// textDriver lets PostgreSQL's text keep what SQLite's does (package
// pgtext): every string written through ent is escaped, every string read
// is unescaped. Bytes fields ([]byte) pass untouched: bytea keeps any byte.
type textDriver struct{ dialect.Driver }

// Escaping wraps a PostgreSQL driver in the escaping of its text.
func Escaping(drv dialect.Driver) dialect.Driver { return textDriver{drv} }

// Exec runs a statement with its strings escaped.
func (d textDriver) Exec(ctx context.Context, query string, args, v any) error {
	return d.Driver.Exec(ctx, query, escapeArgs(args), v)
}

// Query runs a query with its strings escaped and unescapes what it reads.
func (d textDriver) Query(ctx context.Context, query string, args, v any) error {
	if err := d.Driver.Query(ctx, query, escapeArgs(args), v); err != nil {
		return err
	}
	unescapeRows(v)
	return nil
}

// Tx starts a transaction that escapes like the driver.
func (d textDriver) Tx(ctx context.Context) (dialect.Tx, error) {
	tx, err := d.Driver.Tx(ctx)
	if err != nil {
		return nil, err
	}
	return textTx{tx}, nil
}

// BeginTx starts a transaction with options, as ent's Client.BeginTx asks.
func (d textDriver) BeginTx(ctx context.Context, opts *sql.TxOptions) (dialect.Tx, error) {
	b, ok := d.Driver.(interface {
		BeginTx(context.Context, *sql.TxOptions) (dialect.Tx, error)
	})
	if !ok {
		return d.Tx(ctx)
	}
	tx, err := b.BeginTx(ctx, opts)
	if err != nil {
		return nil, err
	}
	return textTx{tx}, nil
}

type textTx struct{ dialect.Tx }

func (t textTx) Exec(ctx context.Context, query string, args, v any) error {
	return t.Tx.Exec(ctx, query, escapeArgs(args), v)
}

func (t textTx) Query(ctx context.Context, query string, args, v any) error {
	if err := t.Tx.Query(ctx, query, escapeArgs(args), v); err != nil {
		return err
	}
	unescapeRows(v)
	return nil
}

func escapeArgs(args any) any {
	list, ok := args.([]any)
	if !ok {
		return args
	}
	var out []any
	for i, a := range list {
		s, ok := a.(string)
		if !ok || !pgtext.NeedsEscape(s) {
			continue
		}
		if out == nil {
			out = append([]any(nil), list...)
		}
		out[i] = pgtext.Escape(s)
	}
	if out == nil {
		return args
	}
	return out
}

func unescapeRows(v any) {
	if rows, ok := v.(*entsql.Rows); ok && rows.ColumnScanner != nil {
		rows.ColumnScanner = textRows{rows.ColumnScanner}
	}
}

type textRows struct{ entsql.ColumnScanner }

// Scan scans a row and unescapes its strings.
func (r textRows) Scan(dest ...any) error {
	if err := r.ColumnScanner.Scan(dest...); err != nil {
		return err
	}
	for _, d := range dest {
		switch p := d.(type) {
		case *sql.NullString:
			p.String = pgtext.Unescape(p.String)
		case *string:
			*p = pgtext.Unescape(*p)
		case *any:
			// Set only when changed: a string put back in the interface
			// is allocated again.
			if s, ok := (*p).(string); ok {
				if u := pgtext.Unescape(s); u != s {
					*p = u
				}
			}
		}
	}
	return nil
}

// execer and querier are what ent's generated ExecContext and QueryContext
// ask of a driver or a transaction (the purge of a conversation runs
// through them).
type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

var errUnsupported = errors.New("ExecContext and QueryContext are not supported by the database driver")

func execContext(ctx context.Context, d any, query string, args []any) (sql.Result, error) {
	e, ok := d.(execer)
	if !ok {
		return nil, errUnsupported
	}
	return e.ExecContext(ctx, query, escapeArgs(args).([]any)...)
}

// queryContext escapes the arguments; what it reads comes back as written
// (raw rows are not unescaped: callers of raw queries read counts and ids).
func queryContext(ctx context.Context, d any, query string, args []any) (*sql.Rows, error) {
	q, ok := d.(querier)
	if !ok {
		return nil, errUnsupported
	}
	return q.QueryContext(ctx, query, escapeArgs(args).([]any)...)
}

// ExecContext runs a raw statement with its strings escaped.
func (d textDriver) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	return execContext(ctx, d.Driver, query, args)
}

// QueryContext runs a raw query with its strings escaped.
func (d textDriver) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	return queryContext(ctx, d.Driver, query, args)
}

// ExecContext runs a raw statement in the transaction, its strings escaped.
func (t textTx) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	return execContext(ctx, t.Tx, query, args)
}

// QueryContext runs a raw query in the transaction, its strings escaped.
func (t textTx) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	return queryContext(ctx, t.Tx, query, args)
}
