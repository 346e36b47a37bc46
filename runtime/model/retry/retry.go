// Package retry is how model providers survive rate limits and server
// trouble: it retries 429, 5xx and dropped connections with doubling waits,
// honours Retry-After, and turns every other HTTP error answer into one clear
// error, whatever the SDK made of the body.
//
// The SDKs' own retries are switched off so that one schedule, with an
// injectable sleep, governs every provider.
package retry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"syscall"
	"time"
)

// The default schedule: 4 attempts, waits of 500 ms, 1 s, 2 s, never above 8 s.
const (
	DefaultAttempts = 4
	DefaultBase     = 500 * time.Millisecond
	DefaultMax      = 8 * time.Second
)

// SleepFunc waits for d or until ctx ends, and then returns ctx's error.
type SleepFunc func(ctx context.Context, d time.Duration) error

// Policy is a retry schedule. Zero fields take the defaults, so the zero
// Policy is the default policy.
type Policy struct {
	// Attempts is the total number of tries, the first included; 1 means no retry.
	Attempts int
	// Base is the first wait; each later wait doubles the one before.
	Base time.Duration
	// Max caps every wait, Retry-After included.
	Max time.Duration
	// Sleep waits between attempts; tests inject one that records and returns.
	Sleep SleepFunc
}

// Default returns the default policy with every field filled in.
func Default() Policy {
	return Policy{Attempts: DefaultAttempts, Base: DefaultBase, Max: DefaultMax, Sleep: Wait}
}

// withDefaults fills the zero fields.
func (p Policy) withDefaults() Policy {
	d := Default()
	if p.Attempts <= 0 {
		p.Attempts = d.Attempts
	}
	if p.Base <= 0 {
		p.Base = d.Base
	}
	if p.Max <= 0 {
		p.Max = d.Max
	}
	if p.Sleep == nil {
		p.Sleep = d.Sleep
	}
	return p
}

// Delay is the wait before retry number n (0 for the first retry): Base
// doubled n times, raised to what the server asked for in Retry-After (the
// server knows when it will take us back), and capped at Max.
func (p Policy) Delay(n int, retryAfter time.Duration) time.Duration {
	p = p.withDefaults()
	d := p.Base
	for i := 0; i < n && d < p.Max; i++ {
		d *= 2
	}
	d = max(d, retryAfter)
	return min(d, p.Max)
}

// Wait sleeps for d, returning early with ctx's error when ctx ends.
func Wait(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// ExhaustedError reports a call whose every attempt failed with a
// retryable error. It unwraps to the last attempt's error.
type ExhaustedError struct {
	Attempts int
	Err      error
}

// Error names the last failure and how many attempts were made.
func (e *ExhaustedError) Error() string {
	return fmt.Sprintf("%v (gave up after %d attempts)", e.Err, e.Attempts)
}

// Unwrap returns the last attempt's error.
func (e *ExhaustedError) Unwrap() error { return e.Err }

// Do runs call until it succeeds, fails with an error not worth retrying,
// runs out of attempts, or ctx ends. Provider names the provider in errors
// ("openai: 401 Unauthorized: …"). Each attempt's context carries a recorder
// that [Middleware] fills, so the SDK clients given to call must be built with
// that middleware.
func Do[T any](ctx context.Context, p Policy, provider string, call func(ctx context.Context) (T, error)) (T, error) {
	p = p.withDefaults()
	var zero T
	for attempt := 1; ; attempt++ {
		rec := &record{}
		v, err := call(context.WithValue(ctx, recordKey{}, rec))
		if err == nil {
			return v, nil
		}
		if ctx.Err() != nil {
			return zero, fmt.Errorf("%s: %w", provider, ctx.Err())
		}
		temporary, after, err := classify(provider, rec, err)
		if !temporary {
			return zero, err
		}
		if attempt >= p.Attempts {
			if attempt == 1 {
				// A policy of one attempt retries nothing; nothing was given up.
				return zero, err
			}
			return zero, &ExhaustedError{Attempts: attempt, Err: err}
		}
		if serr := p.Sleep(ctx, p.Delay(attempt-1, after)); serr != nil {
			return zero, fmt.Errorf("%s: wait to retry: %w", provider, serr)
		}
	}
}

// classify turns an attempt's error into the error the caller sees, and says
// whether it is worth another try and how long the server asked us to wait.
func classify(provider string, rec *record, err error) (bool, time.Duration, error) {
	if rec.status >= 400 {
		serr := &StatusError{
			Provider:   provider,
			StatusCode: rec.status,
			Message:    messageOf(rec.body),
			RetryAfter: retryAfter(rec.header),
		}
		return Temporary(rec.status), serr.RetryAfter, serr
	}
	var serr *StatusError
	if errors.As(err, &serr) {
		return Temporary(serr.StatusCode), serr.RetryAfter, err
	}
	wrapped := fmt.Errorf("%s: %w", provider, err)
	return connectionError(err), 0, wrapped
}

// Temporary reports whether an HTTP status is worth retrying: rate limits,
// and server trouble that tends to pass (529 is Anthropic's "overloaded").
func Temporary(status int) bool {
	switch status {
	case 429, 500, 502, 503, 504, 529:
		return true
	}
	return false
}

// connectionError reports whether err is the network failing rather than
// the server answering: worth a retry, since nothing was answered.
func connectionError(err error) bool {
	var uerr *url.Error
	var oerr *net.OpError
	return errors.As(err, &uerr) || errors.As(err, &oerr) ||
		errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, ErrTruncated)
}

// ErrTruncated is what providers report when a streamed answer ends before
// its end marker: the connection dropped, so the call is retried.
var ErrTruncated = errors.New("stream ended before the answer was complete")
