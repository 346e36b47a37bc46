package events_test

import (
	"database/sql"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/runtime/events"
)

// A stream whose subscriber never reads costs the writer nothing: it is
// woken once, and the text waits once, in the bus.
func TestStreamNeverWaitsForSubscribers(t *testing.T) {
	t.Parallel()
	bus := events.NewBus()
	sub := bus.Subscribe(1)
	defer sub.Close()
	w := bus.Begin(1, 0)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 100_000 {
			w.Text("ab")
		}
		w.ToolCall(0, "write_file")
		w.End()
	}()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("the writer waited for a subscriber that never reads")
	}
	require.Len(t, sub.Text, 1, "one wake, however much was written")
	require.Empty(t, sub.C, "no event queued per piece")
	tx, ok := bus.Text(1, 0)
	require.True(t, ok)
	require.Equal(t, 200_000, tx.Chars)
	require.True(t, tx.Done)
	require.Equal(t, []events.Writing{{Index: 0, Name: "write_file"}}, tx.Calls)
	// Asked from where a subscriber stands, only what is new.
	tx, _ = bus.Text(1, 199_998)
	require.Equal(t, "ab", tx.Tail)
}

// A character whose bytes arrive in two pieces is told whole.
func TestStreamHoldsBackASplitCharacter(t *testing.T) {
	t.Parallel()
	bus := events.NewBus()
	w := bus.Begin(7, 2)
	w.Text("caf\xc3")
	tx, _ := bus.Text(7, 0)
	require.Equal(t, "caf", tx.Tail)
	w.Text("\xa9 🎉"[:3])
	w.Text("\xa9 🎉"[3:])
	tx, _ = bus.Text(7, 0)
	require.Equal(t, "café 🎉", tx.Tail)
	require.Equal(t, 6, tx.Chars)
	require.Equal(t, 2, tx.Step)
}

// A restart names a new attempt whose text starts afresh.
func TestStreamRestart(t *testing.T) {
	t.Parallel()
	bus := events.NewBus()
	w := bus.Begin(3, 0)
	w.Text("first try")
	first, _ := bus.Text(3, 0)
	w.Restart()
	w.Text("second")
	second, _ := bus.Text(3, 0)
	require.NotEqual(t, first.Attempt, second.Attempt)
	require.Equal(t, "second", second.Tail)
}

// Another replica's copy: pieces that continue it are added, a piece past
// a gap is not (the copy then waits for the stream whole), and a snapshot
// fills the gap.
func TestDeliverPiece(t *testing.T) {
	t.Parallel()
	bus := events.NewBus()
	require.False(t, bus.DeliverPiece(events.Piece{TurnID: 1, Attempt: "a", Offset: 0, Text: "héllo "}))
	require.False(t, bus.DeliverPiece(events.Piece{TurnID: 1, Attempt: "a", Offset: 2, Text: "llo wor"}), "an overlap adds what is past it")
	tx, _ := bus.Text(1, 0)
	require.Equal(t, "héllo wor", tx.Tail)
	require.True(t, bus.DeliverPiece(events.Piece{TurnID: 1, Attempt: "a", Offset: 12, Text: "!"}), "a gap")
	tx, _ = bus.Text(1, 0)
	require.False(t, tx.Synced)
	require.Equal(t, "héllo wor", tx.Tail)
	require.False(t, bus.DeliverPiece(events.Piece{TurnID: 1, Attempt: "a", Offset: 0, Text: "héllo world!", Whole: true}))
	tx, _ = bus.Text(1, 0)
	require.True(t, tx.Synced)
	require.Equal(t, "héllo world!", tx.Tail)
	// A new attempt starts the copy afresh.
	bus.DeliverPiece(events.Piece{TurnID: 1, Attempt: "b"})
	tx, _ = bus.Text(1, 0)
	require.Equal(t, "b", tx.Attempt)
	require.Empty(t, tx.Tail)
}

// The text a replica streams reaches another whole, in a bounded number
// of notifications however many pieces the model wrote; a replica that
// starts mid-answer asks, and is sent the stream whole.
func TestBridgeCarriesStreams(t *testing.T) {
	t.Parallel()
	a, b, ba := bridged(t)
	turn := int(time.Now().UnixNano()%1_000_000_000) + 7
	onB := b.Subscribe(turn)
	defer onB.Close()
	w := a.Begin(turn, 0)
	var want strings.Builder
	before := ba.Notifications()
	start := time.Now()
	for i := range 2000 {
		piece := string(rune('a' + i%26))
		if i%100 == 0 {
			piece = "é🎉"
		}
		want.WriteString(piece)
		w.Text(piece)
		if i%20 == 0 {
			time.Sleep(time.Millisecond)
		}
	}
	elapsed := time.Since(start)
	require.Eventually(t, func() bool {
		tx, ok := b.Text(turn, 0)
		return ok && tx.Synced && tx.Tail == want.String()
	}, 10*time.Second, 10*time.Millisecond)
	sent := ba.Notifications() - before
	// One notification per PieceEvery, and a few more.
	require.LessOrEqual(t, sent, int64(elapsed/events.PieceEvery)+4, "2,000 pieces in %v", elapsed)
	t.Logf("2,000 pieces in %v: %d notifications", elapsed, sent)

	// A text longer than a notification holds, asked for by a replica
	// that heard none of it.
	long := strings.Repeat("Ünïcödé text, ", 2000)
	w2 := a.Begin(turn+1, 3)
	w2.Text(long)
	ba.Flush()
	c := join(t)
	_, heard := c.Text(turn+1, 0)
	require.False(t, heard)
	c.Ask(turn + 1)
	require.Eventually(t, func() bool {
		tx, ok := c.Text(turn+1, 0)
		return ok && tx.Synced && tx.Tail == long && tx.Step == 3
	}, 10*time.Second, 10*time.Millisecond)
}

// join is one more replica's bus, bridged to the same database.
func join(t *testing.T) *events.Bus {
	t.Helper()
	dsn := os.Getenv("TEST_DATABASE_URL")
	db, err := sql.Open("postgres", dsn)
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	bus := events.NewBus()
	br, err := events.NewBridge(dsn, db, bus, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	t.Cleanup(func() { _ = br.Close() })
	return bus
}
