package db

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"unicode/utf8"

	"entgo.io/ent/dialect"
	entsql "entgo.io/ent/dialect/sql"
)

// PostgreSQL's text cannot hold a NUL character or bytes that are not
// UTF-8, which tools and users may send; SQLite keeps them. textDriver
// lets PostgreSQL keep them too: every string written through ent is
// escaped, every string read is unescaped, so what is read back is what was
// written, on both databases. The escape is a private-use character,
// itself escaped where it occurs:
//
//	NUL        → esc '0'
//	esc        → esc esc
//	a bad byte → esc 'x' and two hex digits
//
// Bytes fields ([]byte) pass untouched: bytea keeps any byte.
const esc = '\uE000'

type textDriver struct{ dialect.Driver }

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
		if !ok || !needsEscape(s) {
			continue
		}
		if out == nil {
			out = append([]any(nil), list...)
		}
		out[i] = escapeText(s)
	}
	if out == nil {
		return args
	}
	return out
}

func needsEscape(s string) bool {
	return strings.IndexByte(s, 0) >= 0 || strings.ContainsRune(s, esc) || !utf8.ValidString(s)
}

const hexDigits = "0123456789abcdef"

func escapeText(s string) string {
	var b strings.Builder
	b.Grow(len(s) + 8)
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b.WriteRune(esc)
			b.WriteByte('x')
			b.WriteByte(hexDigits[s[i]>>4])
			b.WriteByte(hexDigits[s[i]&0xf])
		case r == 0:
			b.WriteRune(esc)
			b.WriteByte('0')
		case r == esc:
			b.WriteRune(esc)
			b.WriteRune(esc)
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

func unescapeText(s string) string {
	if !strings.ContainsRune(s, esc) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for {
		i := strings.IndexRune(s, esc)
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		b.WriteString(s[:i])
		s = s[i+utf8.RuneLen(esc):]
		switch {
		case strings.HasPrefix(s, "0"):
			b.WriteByte(0)
			s = s[1:]
		case strings.HasPrefix(s, string(esc)):
			b.WriteRune(esc)
			s = s[utf8.RuneLen(esc):]
		case len(s) >= 3 && s[0] == 'x' && isHex(s[1]) && isHex(s[2]):
			b.WriteByte(unhex(s[1])<<4 | unhex(s[2]))
			s = s[3:]
		default:
			// Not one of ours (written before escaping began): as it is.
			b.WriteRune(esc)
		}
	}
}

func isHex(c byte) bool { return strings.IndexByte(hexDigits, c) >= 0 }

func unhex(c byte) byte { return byte(strings.IndexByte(hexDigits, c)) }

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
			p.String = unescapeText(p.String)
		case *string:
			*p = unescapeText(*p)
		case *any:
			if s, ok := (*p).(string); ok {
				*p = unescapeText(s)
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

// escapeSequences matches, in PostgreSQL's regular expressions, what
// escapeText writes for a NUL, a byte that is not UTF-8 and the escape
// itself.
const escapeSequences = string(esc) + `(0|x[0-9a-f]{2}|` + string(esc) + `)`

// WordsSQL returns an SQL expression of the text column expr as full-text
// search should read it. On PostgreSQL each escape (a NUL, a byte that is
// not UTF-8, the escape character) reads as a space, as a NUL does on
// SQLite: "Ada\x00Lovelace" holds the words Ada and Lovelace on both,
// not a word "0Lovelace".
func WordsSQL(dialectName, expr string) string {
	if dialectName != dialect.Postgres {
		return expr
	}
	return "regexp_replace(" + expr + ", '" + escapeSequences + "', ' ', 'g')"
}

// ReadText is what a string read through a raw query (QueryContext) was
// written as: on PostgreSQL, the driver's escapes undone, as ent's own
// reads undo them.
func ReadText(dialectName, s string) string {
	if dialectName != dialect.Postgres {
		return s
	}
	return unescapeText(s)
}
