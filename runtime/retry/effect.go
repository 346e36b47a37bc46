package retry

import (
	"errors"
	"fmt"
	"time"

	"github.com/toolgate/toolgate/tools"
)

// Failure is a failed attempt of a tool call, described by what matters to
// a retry: whether the request may have reached the backend, and whether
// the backend's trouble tends to pass (429, 502, 503, 504, a timeout, a
// database that was busy).
type Failure struct {
	// Reached says the request may have reached the backend: it may have
	// run, so only a call safe to repeat is sent again.
	Reached bool
	// Transient says the failure tends to pass.
	Transient bool
	// Answered says the backend itself answered that it failed (a resolver's
	// INTERNAL or TIMEOUT): it kept nothing, since every mutation runs in a
	// transaction that such a failure rolls back.
	Answered bool
	// After is the wait the backend asked for.
	After time.Duration
	// AtOnce says the request was turned back on a connection the backend
	// had dropped: the next attempt, on a new one, goes without waiting.
	AtOnce bool
	Err    error
}

// Error returns the underlying error's message.
func (f *Failure) Error() string { return f.Err.Error() }

// Unwrap returns the underlying error.
func (f *Failure) Unwrap() error { return f.Err }

// NeverReached wraps err as a failure before the request left: it ran
// nowhere and may be sent again whatever the call does.
func NeverReached(err error) error { return &Failure{Err: err} }

// Reconnect wraps err as a failure on a connection the backend had
// dropped (an MCP session it no longer knew): it ran nowhere, and the next
// attempt, on a new connection, goes at once.
func Reconnect(err error) error { return &Failure{AtOnce: true, Err: err} }

// Reached wraps err as a failure after the request may have reached the
// backend; transient says the trouble tends to pass.
func Reached(err error, transient bool, after time.Duration) error {
	return &Failure{Reached: true, Transient: transient, After: after, Err: err}
}

// Reachedf is Reached with a formatted error.
func Reachedf(transient bool, format string, args ...any) error {
	return Reached(fmt.Errorf(format, args...), transient, 0)
}

// Repeatable reports whether a call with effect e may be sent again once
// it may have reached its backend: reads, and idempotent calls (which carry
// an idempotency key), never writes.
func Repeatable(e tools.Effect) bool {
	return e == tools.EffectRead || e == tools.EffectIdempotent
}

// ByEffect is the per-effect rule for tool calls, the one place it is
// written: a call that never reached its backend is always sent again; a
// transient failure after it may have reached it only when the call is
// Repeatable. An error that is not a *Failure is final.
func ByEffect(e tools.Effect) Classifier {
	return func(err error) Verdict {
		var f *Failure
		if !errors.As(err, &f) {
			return Verdict{}
		}
		return Verdict{Retry: !f.Reached || f.Transient && Repeatable(e), After: f.After, AtOnce: f.AtOnce && !f.Reached}
	}
}

// MayHaveRun reports whether a failed call's request may have reached its
// backend, so the call may have run although no answer came back.
func MayHaveRun(err error) bool {
	var f *Failure
	return errors.As(err, &f) && f.Reached
}
