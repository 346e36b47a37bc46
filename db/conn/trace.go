package conn

import (
	"context"
	"database/sql"
	"errors"
	"strings"

	"entgo.io/ent/dialect"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"
)

// tracerName names the instrumentation of the SQL spans.
const tracerName = "github.com/toolgate/toolgate/db"

// traceDriver gives each statement sent through ent a client span, as a
// child of the span in the statement's context and only when that span is
// recorded: a statement outside a trace (the job queue's polling, a
// migration) costs one context lookup and makes no span. A span names the
// statement by its operation and table; the statement's text and its
// arguments, which can hold what people wrote, are never recorded.
type traceDriver struct {
	dialect.Driver
	system string
}

// Traced wraps drv in SQL spans.
func Traced(drv dialect.Driver) dialect.Driver {
	system := "sqlite"
	if drv.Dialect() == dialect.Postgres {
		system = "postgresql"
	}
	return traceDriver{Driver: drv, system: system}
}

// traceStart begins a statement's span when its context is traced.
func traceStart(ctx context.Context, system, query string) (context.Context, trace.Span) {
	parent := trace.SpanFromContext(ctx)
	if !parent.IsRecording() {
		return ctx, nil
	}
	op, table := summary(query)
	name := op
	if table != "" {
		name += " " + table
	}
	attrs := []attribute.KeyValue{
		attribute.String("db.system.name", system),
		semconv.DBOperationName(op),
		semconv.DBQuerySummary(name),
	}
	if table != "" {
		attrs = append(attrs, semconv.DBCollectionName(table))
	}
	return parent.TracerProvider().Tracer(tracerName).Start(ctx, name,
		trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
}

// traceEnd ends a statement's span, recording its error.
func traceEnd(span trace.Span, err error) {
	if span == nil {
		return
	}
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		span.RecordError(err)
		span.SetStatus(codes.Error, "")
	}
	span.End()
}

// summary returns a statement's operation and the table it names first:
// "SELECT" and "turns" for `SELECT ... FROM "turns" WHERE ...`.
func summary(query string) (op, table string) {
	q := strings.TrimSpace(query)
	word, rest, _ := strings.Cut(q, " ")
	op = strings.ToUpper(word)
	var after string
	switch op {
	case "SELECT", "DELETE":
		after = "FROM "
	case "INSERT":
		after = "INTO "
	case "UPDATE":
		return op, tableName(rest)
	default:
		return op, ""
	}
	i := strings.Index(strings.ToUpper(rest), after)
	if i < 0 {
		return op, ""
	}
	return op, tableName(rest[i+len(after):])
}

// tableName reads a table name, quoted or not, at the start of s.
func tableName(s string) string {
	s = strings.TrimSpace(s)
	end := strings.IndexAny(s, " (,\n\t")
	if end >= 0 {
		s = s[:end]
	}
	s = strings.Trim(s, "\"`")
	if strings.ContainsAny(s, "\"`'") || len(s) > 64 {
		return ""
	}
	return s
}

// Exec runs a statement in a span of its own.
func (d traceDriver) Exec(ctx context.Context, query string, args, v any) error {
	ctx, span := traceStart(ctx, d.system, query)
	err := d.Driver.Exec(ctx, query, args, v)
	traceEnd(span, err)
	return err
}

// Query runs a query in a span of its own.
func (d traceDriver) Query(ctx context.Context, query string, args, v any) error {
	ctx, span := traceStart(ctx, d.system, query)
	err := d.Driver.Query(ctx, query, args, v)
	traceEnd(span, err)
	return err
}

// Tx starts a transaction whose statements are traced like the driver's,
// when it begins in a traced context; otherwise the transaction is the
// driver's own, at no cost.
func (d traceDriver) Tx(ctx context.Context) (dialect.Tx, error) {
	tx, err := d.Driver.Tx(ctx)
	if err != nil || !trace.SpanFromContext(ctx).IsRecording() {
		return tx, err
	}
	return traceTx{Tx: tx, system: d.system, ctx: ctx}, nil
}

// BeginTx starts a transaction with options, as ent's Client.BeginTx asks.
func (d traceDriver) BeginTx(ctx context.Context, opts *sql.TxOptions) (dialect.Tx, error) {
	b, ok := d.Driver.(interface {
		BeginTx(context.Context, *sql.TxOptions) (dialect.Tx, error)
	})
	if !ok {
		return d.Tx(ctx)
	}
	tx, err := b.BeginTx(ctx, opts)
	if err != nil || !trace.SpanFromContext(ctx).IsRecording() {
		return tx, err
	}
	return traceTx{Tx: tx, system: d.system, ctx: ctx}, nil
}

// ExecContext runs a raw statement in a span of its own.
func (d traceDriver) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	e, ok := d.Driver.(execer)
	if !ok {
		return nil, errUnsupported
	}
	ctx, span := traceStart(ctx, d.system, query)
	res, err := e.ExecContext(ctx, query, args...)
	traceEnd(span, err)
	return res, err
}

// QueryContext runs a raw query in a span of its own; the span covers
// the query, not the reading of its rows.
func (d traceDriver) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	q, ok := d.Driver.(querier)
	if !ok {
		return nil, errUnsupported
	}
	ctx, span := traceStart(ctx, d.system, query)
	rows, err := q.QueryContext(ctx, query, args...)
	traceEnd(span, err)
	return rows, err
}

// traceTx is a transaction whose statements, and commit, are traced. The
// commit takes no context: its span is a child of the span the
// transaction began in.
type traceTx struct {
	dialect.Tx
	system string
	ctx    context.Context
}

func (t traceTx) Exec(ctx context.Context, query string, args, v any) error {
	ctx, span := traceStart(ctx, t.system, query)
	err := t.Tx.Exec(ctx, query, args, v)
	traceEnd(span, err)
	return err
}

func (t traceTx) Query(ctx context.Context, query string, args, v any) error {
	ctx, span := traceStart(ctx, t.system, query)
	err := t.Tx.Query(ctx, query, args, v)
	traceEnd(span, err)
	return err
}

// Commit commits in a span of its own: on SQLite the commit is where the
// write reaches the disk.
func (t traceTx) Commit() error {
	_, span := traceStart(t.ctx, t.system, "COMMIT")
	err := t.Tx.Commit()
	traceEnd(span, err)
	return err
}

// ExecContext runs a raw statement in the transaction, in a span of its own.
func (t traceTx) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	e, ok := t.Tx.(execer)
	if !ok {
		return nil, errUnsupported
	}
	ctx, span := traceStart(ctx, t.system, query)
	res, err := e.ExecContext(ctx, query, args...)
	traceEnd(span, err)
	return res, err
}

// QueryContext runs a raw query in the transaction, in a span of its own.
func (t traceTx) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	q, ok := t.Tx.(querier)
	if !ok {
		return nil, errUnsupported
	}
	ctx, span := traceStart(ctx, t.system, query)
	rows, err := q.QueryContext(ctx, query, args...)
	traceEnd(span, err)
	return rows, err
}
