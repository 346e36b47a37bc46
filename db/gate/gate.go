// Package gate queues the writers of a SQLite file in this process.
//
// SQLite has one writer at a time. Its own wait for the write lock (the
// busy timeout) polls: a writer that finds the lock taken sleeps, for up
// to 100 ms at a time, and tries again, and whoever tries at the moment
// the lock is free takes it. Under a team's writes most waiters sleep
// while the lock is free, a writer can lose to later ones for seconds,
// and the 10 s timeout passes: SQLITE_BUSY. So this process's writers
// queue in process instead, at a gate, one at a time and first come first
// served, and take SQLite's write lock only when it is theirs: a write
// transaction holds the gate from its BEGIN (IMMEDIATE) to its end, a
// write outside a transaction for the statement (db/conn's SQLite
// connection). Reads take no gate: in WAL mode they never wait for the
// writer. The busy timeout stays, for other processes on the same file (a
// migrate command, another replica on one machine).
package gate

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"time"
)

// writeWait is how long a writer waits at the gate before it gives up,
// as long as SQLite's own busy timeout.
const writeWait = 10 * time.Second

// ErrWriteWait is the error of a write that waited writeWait at the gate
// and gave up: a writer ahead of it held the database that long.
var ErrWriteWait = errors.New("sqlite: waited 10s for the other writers of this process")

// Gate lets one write at a time through. Go queues the goroutines
// blocked on a channel in order, so writers go through as they came.
type Gate chan struct{}

func newGate() Gate { return make(Gate, 1) }

// Enter waits for the gate, until ctx ends or writeWait passes.
func (g Gate) Enter(ctx context.Context) error {
	select {
	case g <- struct{}{}:
		return nil
	default:
	}
	t := time.NewTimer(writeWait)
	defer t.Stop()
	select {
	case g <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return ErrWriteWait
	}
}

// Leave lets the next writer through.
func (g Gate) Leave() { <-g }

// gates are the write gates of the SQLite files this process opened, by
// absolute path: two DBs over one file (replicas in one test process)
// share one.
var gates sync.Map

// For returns the write gate of the file at path.
func For(path string) Gate {
	if path == ":memory:" {
		return newGate() // each connection its own database
	}
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	g, _ := gates.LoadOrStore(filepath.Clean(path), newGate())
	return g.(Gate)
}
