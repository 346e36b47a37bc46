package db

import "github.com/riverqueue/river/riverdriver"

// QueueExecutor is the executor of the driver the queue's clients run on
// (River's own, as toolgate wraps it), on either database.
func QueueExecutor(d *DB) riverdriver.Executor {
	if d.jobs != nil {
		return newPGQueueDriver(d.jobs).GetExecutor()
	}
	return newSQLiteQueueDriver(d.SQL).GetExecutor()
}
