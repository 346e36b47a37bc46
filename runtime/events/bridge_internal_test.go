package events

import (
	"bytes"
	"database/sql"
	"encoding/json"
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

// TestOneNotificationKeepsOrder: a step's events with the pieces between
// them go in one notification, and its groups give them back in the
// order they were queued (each group's pieces before its events, as a
// receiver applies them).
func TestOneNotificationKeepsOrder(t *testing.T) {
	br := &Bridge{origin: "test", latest: map[int]int{}, wake: make(chan struct{}, 1)}
	br.idle = sync.NewCond(&br.mu)
	br.enqueue(Event{TurnID: 1, Kind: ModelCallStarted, Step: 0})
	br.enqueuePiece(Piece{TurnID: 1, Step: 0, Text: "The sum "})
	br.enqueue(Event{TurnID: 1, Kind: ToolCallStarted, Step: 0, ToolCallID: 9})
	br.enqueue(Event{TurnID: 1, Kind: ModelCallStarted, Step: 1})
	br.enqueuePiece(Piece{TurnID: 1, Step: 1, Text: "is 2."})
	br.enqueue(Event{TurnID: 1, Kind: Answer, Step: 1})
	payload, n := br.payload(br.queued)
	require.Equal(t, len(br.queued), n, "one notification")
	var w wireEvent
	require.NoError(t, json.Unmarshal(payload, &w))
	var got []string
	for _, g := range append([]wireGroup{w.wireGroup}, w.Rest...) {
		for _, p := range g.Pieces {
			got = append(got, "piece "+p.Text)
		}
		for _, e := range g.Events {
			got = append(got, string(e.Kind))
		}
	}
	require.Equal(t, []string{"MODEL_CALL_STARTED", "piece The sum ", "TOOL_CALL_STARTED", "MODEL_CALL_STARTED", "piece is 2.", "ANSWER"}, got)
}
