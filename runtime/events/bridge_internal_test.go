package events

import (
	"bytes"
	"database/sql"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestFullQueueSaysWhatItDropped: events past maxQueued, waiting for a
// database that does not take them, are dropped oldest first, and the
// log says how many, once a send rather than once an event.
func TestFullQueueSaysWhatItDropped(t *testing.T) {
	var logs bytes.Buffer
	db, err := sql.Open("postgres", "postgres://127.0.0.1:1/none?sslmode=disable&connect_timeout=1")
	require.NoError(t, err)
	require.NoError(t, db.Close()) // a database that takes nothing
	br := &Bridge{db: db, origin: "test", log: slog.New(slog.NewTextHandler(&logs, nil)), wake: make(chan struct{}, 1)}
	br.idle = sync.NewCond(&br.mu)
	for i := range maxQueued + 7 {
		br.enqueue(Event{TurnID: i})
	}
	require.Len(t, br.queued, maxQueued)
	require.Equal(t, 7, br.queued[0].TurnID, "the oldest are dropped")
	br.sendQueued()
	out := logs.String()
	require.Equal(t, 1, strings.Count(out, "dropped turn events"), out)
	require.Contains(t, out, "events=7")
	br.enqueue(Event{TurnID: 1})
	logs.Reset()
	br.sendQueued()
	require.NotContains(t, logs.String(), "dropped turn events", "nothing dropped since")
}
