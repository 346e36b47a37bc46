package events_test

import (
	"database/sql"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/runtime/events"
)

// bridged returns the buses of two replicas, bridged through one
// PostgreSQL database, and a's bridge; it skips the test without one.
func bridged(t *testing.T) (a, b *events.Bus, fromA *events.Bridge) { return bridgedB(t) }

// bridgedB is bridged, for tests and benchmarks.
func bridgedB(t testing.TB) (a, b *events.Bus, fromA *events.Bridge) {
	t.Helper()
	dsn := os.Getenv("TEST_DATABASE_URL")
	if dsn == "" {
		t.Skip("TEST_DATABASE_URL not set: PostgreSQL skipped")
	}
	db, err := sql.Open("postgres", dsn)
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	log := slog.New(slog.DiscardHandler)
	a, b = events.NewBus(), events.NewBus()
	for _, bus := range []*events.Bus{b, a} {
		br, err := events.NewBridge(dsn, db, bus, log)
		require.NoError(t, err)
		t.Cleanup(func() { _ = br.Close() })
		fromA = br // a's, the last
	}
	return a, b, fromA
}

func TestBridgeCarriesEventsBetweenReplicas(t *testing.T) {
	t.Parallel()
	a, b, _ := bridged(t)

	turn := int(time.Now().UnixNano() % 1_000_000_000)
	onA, onB := a.Subscribe(turn), b.Subscribe(turn)
	defer onA.Close()
	defer onB.Close()

	a.Publish(events.Event{Kind: events.ToolCallFinished, TurnID: turn, ToolCallID: 42, At: time.Unix(1700000000, 0).UTC()})
	for _, s := range []*events.Subscription{onA, onB} {
		select {
		case e := <-s.C:
			require.Equal(t, events.ToolCallFinished, e.Kind)
			require.Equal(t, 42, e.ToolCallID)
		case <-time.After(5 * time.Second):
			t.Fatal("event did not arrive")
		}
	}
	// Each replica hears it once: its own publication is not echoed back.
	select {
	case e := <-onA.C:
		t.Fatalf("echo: %v", e)
	case <-time.After(200 * time.Millisecond):
	}
}

// Events published in a burst reach the other replica whole and in order,
// several to a notification.
func TestBridgeKeepsOrderOfABurst(t *testing.T) {
	t.Parallel()
	a, b, ba := bridged(t)

	turn := int(time.Now().UnixNano()%1_000_000_000) + 1
	onB := b.Subscribe(turn)
	defer onB.Close()
	const n = 200 // more than one notification holds
	for i := range n {
		a.Publish(events.Event{Kind: events.ToolCallStarted, TurnID: turn, ToolCallID: i + 1, Status: "RUNNING", At: time.Now()})
	}
	ba.Flush()
	for i := range n {
		select {
		case e := <-onB.C:
			require.Equal(t, i+1, e.ToolCallID)
		case <-time.After(5 * time.Second):
			t.Fatalf("event %d did not arrive", i+1)
		}
	}
}
