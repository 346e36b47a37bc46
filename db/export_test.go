package db

import "context"

// OpenNoBusyWait opens a SQLite file whose connections never wait for
// SQLite's write lock: a write that finds it taken fails with SQLITE_BUSY
// at once, so any two of this process's writers that met at the lock
// would show.
func OpenNoBusyWait(ctx context.Context, rawURL string) (*DB, error) {
	return OpenWith(ctx, rawURL, Options{noBusyWait: true})
}
