package db

import (
	"context"

	"github.com/riverqueue/river/riverdriver"
)

// QueueExecutor is the executor of the driver the queue's clients run on
// (River's own, as toolgate wraps it), on either database.
func QueueExecutor(d *DB) riverdriver.Executor {
	if d.jobs != nil {
		return newPGQueueDriver(d.jobs).GetExecutor()
	}
	return newSQLiteQueueDriver(d.SQL).GetExecutor()
}

// OpenNoBusyWait opens a SQLite file whose connections never wait for
// SQLite's write lock: a write that finds it taken fails with SQLITE_BUSY
// at once, so any two of this process's writers that met at the lock
// would show.
func OpenNoBusyWait(ctx context.Context, rawURL string) (*DB, error) {
	return OpenWith(ctx, rawURL, Options{noBusyWait: true})
}
