package queue

import (
	"github.com/riverqueue/river/riverdriver"

	"github.com/toolgate/toolgate/db/queue/queuepgx"
	"github.com/toolgate/toolgate/db/queue/queuesqlite"
)

// DriverExecutor is the executor of the driver q's clients run on
// (River's own, as the queue wraps it), on either database.
func DriverExecutor(q Queue) riverdriver.Executor {
	if q.jobs != nil {
		return queuepgx.New(q.jobs).GetExecutor()
	}
	return queuesqlite.New(q.sql).GetExecutor()
}
