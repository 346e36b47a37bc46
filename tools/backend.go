package tools

import (
	"context"
	"fmt"
	"net/http"
	"sync/atomic"
)

// Retry is the server's one retry loop as a family receives it for the
// requests it makes to its own backends (a search provider, a web page,
// an embedding endpoint): it calls try until try succeeds, fails in a way
// not worth repeating, or the attempts run out, and returns the last
// attempt's error. The server wires it; nil sends each request once.
type Retry = func(ctx context.Context, try func(ctx context.Context) error) error

// Transient marks a failed request to a family's backend as worth another
// attempt: the backend answered 429, 502, 503 or 504, or the connection
// failed before an answer. The server's Retry repeats it, honouring the
// wait Header's Retry-After asks for.
type Transient struct {
	Err error
	// Header is the failed answer's header; nil when none came.
	Header http.Header
}

// Error returns the underlying error's message.
func (e *Transient) Error() string { return e.Err.Error() }

// Unwrap returns the underlying error.
func (e *Transient) Unwrap() error { return e.Err }

// Attempts records how many attempts a call's backend requests took: the
// most that any one request needed, since a call's requests run side by
// side. The API records one per operation and tells the runtime, which
// reports it to the model with the call's outcome.
type Attempts struct{ n atomic.Int64 }

type attemptsKey struct{}

// WithAttempts returns ctx carrying a new record of attempts, and the record.
func WithAttempts(ctx context.Context) (context.Context, *Attempts) {
	a := &Attempts{}
	return context.WithValue(ctx, attemptsKey{}, a), a
}

// Attempted records that a request under ctx took n attempts; without a
// record in ctx it does nothing.
func Attempted(ctx context.Context, n int) {
	a, ok := ctx.Value(attemptsKey{}).(*Attempts)
	if !ok {
		return
	}
	for {
		old := a.n.Load()
		if int64(n) <= old || a.n.CompareAndSwap(old, int64(n)) {
			return
		}
	}
}

// N returns the most attempts recorded; 0 when none was.
func (a *Attempts) N() int { return int(a.n.Load()) }

// Try sends one request to a family's backend through retry (nil: once),
// records on ctx the attempts it took, and returns the last attempt's
// error.
func Try(ctx context.Context, retry Retry, try func(ctx context.Context) error) error {
	var n atomic.Int64
	once := func(ctx context.Context) error {
		n.Add(1)
		return try(ctx)
	}
	var err error
	if retry == nil {
		err = once(ctx)
	} else {
		err = retry(ctx, once)
	}
	Attempted(ctx, int(n.Load()))
	return err
}

// Outage is a call that never ran because its backend could not be
// reached or was down, after the retries (a page whose site answers 503):
// the client reads it as an OUTAGE error, the model as an outage.
type Outage struct{ msg string }

// Error returns the message.
func (e *Outage) Error() string { return e.msg }

// Outagef returns an Outage with a formatted message.
func Outagef(format string, args ...any) error {
	return &Outage{msg: fmt.Sprintf(format, args...)}
}

// Absence is a call that ran and found nothing (a page that is not
// there): the client reads it as an ABSENCE error, the model as an
// absence.
type Absence struct{ msg string }

// Error returns the message.
func (e *Absence) Error() string { return e.msg }

// Absentf returns an Absence with a formatted message.
func Absentf(format string, args ...any) error {
	return &Absence{msg: fmt.Sprintf(format, args...)}
}
