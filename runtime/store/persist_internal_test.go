package store

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A finished step is recorded even when the request or the turn that
// asked has run out of time, and a database busy with other writers is
// waited out; any other failure is final at once.
func TestPersistOutlivesItsCallerAndWaitsOutABusyDatabase(t *testing.T) {
	t.Parallel()
	expired, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	tests := []struct {
		name     string
		give     []error
		want     string
		attempts int
	}{
		{name: "written at once", give: []error{nil}, attempts: 1},
		{name: "SQLite busy, then written", give: []error{errors.New("database is locked (5) (SQLITE_BUSY)"), errors.New("database is locked (5) (SQLITE_BUSY)"), nil}, attempts: 3},
		{name: "PostgreSQL serialization failure, then written", give: []error{errors.New("pq: could not serialize access due to concurrent update"), nil}, attempts: 2},
		{name: "another failure is final", give: []error{errors.New("pq: value too long")}, want: "pq: value too long", attempts: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			attempts := 0
			err := Persist(expired, func(ctx context.Context) error {
				require.NoError(t, ctx.Err(), "the write has a context of its own")
				_, has := ctx.Deadline()
				require.True(t, has, "bounded by its own budget")
				attempts++
				return tt.give[attempts-1]
			})
			require.Equal(t, tt.want, errText(err))
			require.Equal(t, tt.attempts, attempts)
		})
	}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
