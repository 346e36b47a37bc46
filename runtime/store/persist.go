package store

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/toolgate/toolgate/db/gate"
	"github.com/toolgate/toolgate/runtime/retry"
)

// persistBudget bounds one final write, retries included: long enough to
// outlast a busy database, short enough that a stop is not held up.
const persistBudget = 30 * time.Second

// persistPolicy is the retry schedule of final writes: the one policy type,
// with more attempts than a call's, as a busy database passes.
var persistPolicy = retry.Policy{Attempts: 8, Base: 50 * time.Millisecond, Max: 2 * time.Second}

// Persist writes what a turn did on a context of its own, never the
// request's or the turn's: a step that happened is recorded even when the
// turn is cancelled or stopping. A database busy with other writers
// (SQLite's one write lock, a PostgreSQL serialization failure) is tried
// again.
func Persist(ctx context.Context, write func(ctx context.Context) error) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), persistBudget)
	defer cancel()
	_, err := retry.Do(ctx, persistPolicy, func(err error) retry.Verdict {
		return retry.Verdict{Retry: busy(err)}
	}, write)
	var exhausted *retry.ExhaustedError
	if errors.As(err, &exhausted) {
		return exhausted.Err
	}
	return err
}

// busy reports whether a write failed only because other writers held the
// database: SQLite's SQLITE_BUSY or SQLITE_LOCKED, or its wait at this
// process's write gate, PostgreSQL's
// serialization failure or deadlock.
func busy(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, gate.ErrWriteWait) {
		return true
	}
	s := err.Error()
	for _, m := range []string{"SQLITE_BUSY", "database is locked", "SQLITE_LOCKED", "database table is locked",
		"could not serialize access", "deadlock detected"} {
		if strings.Contains(s, m) {
			return true
		}
	}
	return false
}
