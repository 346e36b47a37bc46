// Package retry is the one retry loop of the runtime: model providers, the
// tool dispatcher and the MCP pool all retry through Do, with one Policy
// type and one Retry-After parser. What is worth another try is the
// caller's to say, through a Classifier; the rule for tool calls (a call
// may be repeated once it may have reached its backend only if it reads or
// is idempotent) is ByEffect, here too, so it is written once.
package retry

import (
	"context"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
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

// NoWait does not wait: for a retry that is a reconnection rather than a
// wait for the other side to recover.
func NoWait(ctx context.Context, _ time.Duration) error { return ctx.Err() }

// Verdict is what a Classifier says of one failed attempt.
type Verdict struct {
	// Retry says another attempt may succeed and is safe to make.
	Retry bool
	// After is the wait the other side asked for (Retry-After); 0 for none.
	After time.Duration
	// AtOnce says the next attempt goes without waiting: the failure was a
	// connection the other side had dropped, and a new one is ready now.
	AtOnce bool
}

// Classifier judges one attempt's error.
type Classifier func(err error) Verdict

// ExhaustedError reports a call whose every attempt failed with an error
// worth retrying. It unwraps to the last attempt's error.
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

// Do runs try until it succeeds, classify says it is not worth another
// attempt, the attempts run out, or ctx ends. It returns how many attempts
// were made and the last error: an *ExhaustedError when more than one
// attempt failed and the last was still worth retrying, the attempt's own
// error otherwise, ctx's error when ctx ended during a wait.
func Do(ctx context.Context, p Policy, classify Classifier, try func(ctx context.Context) error) (int, error) {
	p = p.withDefaults()
	for attempt := 1; ; attempt++ {
		err := try(ctx)
		if err == nil {
			return attempt, nil
		}
		if ctx.Err() != nil {
			return attempt, err
		}
		v := classify(err)
		if !v.Retry {
			return attempt, err
		}
		if attempt >= p.Attempts {
			if attempt == 1 {
				// A policy of one attempt retries nothing; nothing was given up.
				return attempt, err
			}
			return attempt, &ExhaustedError{Attempts: attempt, Err: err}
		}
		wait := p.Delay(attempt-1, v.After)
		if v.AtOnce {
			wait = 0
		}
		if span := trace.SpanFromContext(ctx); span.IsRecording() {
			// A retry is an event of the call's span: the attempt that failed
			// and the wait before the next, never the error's words.
			span.AddEvent("retry", trace.WithAttributes(attribute.Int("attempt", attempt), attribute.Int64("wait_ms", wait.Milliseconds())))
		}
		if v.AtOnce {
			continue
		}
		if serr := p.Sleep(ctx, wait); serr != nil {
			return attempt, fmt.Errorf("wait to retry: %w (after: %w)", serr, err)
		}
	}
}
