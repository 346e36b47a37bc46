package loop_test

import (
	"context"
	"database/sql"
	"log/slog"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/db"
	"github.com/toolgate/toolgate/db/dbtest"
	"github.com/toolgate/toolgate/ent/tenancy"
	"github.com/toolgate/toolgate/graph/gid"
	"github.com/toolgate/toolgate/runtime/events"
	"github.com/toolgate/toolgate/runtime/loop"
)

// dialRig is a harness on PostgreSQL that counts every connection its
// database opens: the sessions of both pools, and the connections lib/pq
// opens only to send a cancel.
type dialRig struct {
	*harness
	dials atomic.Int64
	conv  int
}

func newDialRig(t testing.TB) *dialRig {
	t.Helper()
	raw := dbtest.URL(t, dbtest.Postgres)
	rig := &dialRig{}
	ctx := context.Background()
	d, err := db.OpenWith(ctx, raw, db.Options{Dialed: func() { rig.dials.Add(1) }})
	require.NoError(t, err)
	t.Cleanup(func() { _ = d.Close() })
	require.NoError(t, d.Migrate(ctx))
	bus := events.NewBus()
	br, err := events.NewBridge(raw, d.SQL, bus, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	t.Cleanup(func() { _ = br.Close() })
	rig.harness = newHarness(t, d, turnOfCalls(1), func(c *loop.Config) { c.Events = bus })
	rig.conv, err = gid.Decode(rig.conversation(t))
	require.NoError(t, err)
	return rig
}

// warm opens the sessions the database/sql pool keeps idle (10), all at
// once, and gives them back.
func (r *dialRig) warm(t testing.TB) {
	t.Helper()
	ctx := context.Background()
	var conns []*sql.Conn
	for range 10 {
		c, err := r.db.SQL.Conn(ctx)
		require.NoError(t, err)
		conns = append(conns, c)
	}
	for _, c := range conns {
		require.NoError(t, c.Close())
	}
}

// turn runs one turn of one tool call as its job would and returns the
// connections opened meanwhile.
func (r *dialRig) turn(t testing.TB, number int) int64 {
	t.Helper()
	ctx := tenancy.System(context.Background())
	id := r.client.Turn.Create().SetConversationID(r.conv).SetNumber(number).SetUserText("go").SetStartedAt(r.now).SaveX(ctx).ID
	before := r.dials.Load()
	require.NoError(t, r.runner.RunTurn(ctx, id))
	n := r.dials.Load() - before
	got := r.client.Turn.GetX(ctx, id)
	require.Equal(t, "COMPLETED", string(got.Status), got.Error)
	return n
}

// TestTurnsOpenNoSessions: once its pools are warm, a server's turns open
// no connection to PostgreSQL, neither a session nor one to cancel a
// query (lib/pq opens a connection for each cancel).
func TestTurnsOpenNoSessions(t *testing.T) {
	rig := newDialRig(t)
	for i := range 3 { // the pools open what they keep
		rig.turn(t, i+1)
	}
	require.Positive(t, rig.dials.Load(), "the pools' own sessions are counted")
	// The pool keeps as many as it once needed at the same time: on a
	// loaded machine a later turn's statements can overlap one more than
	// the first three's did. Fill it to the sessions it keeps idle, so
	// what is counted is a turn needing more than that, or a cancel.
	rig.warm(t)
	var opened int64
	for i := range 20 {
		opened += rig.turn(t, i+4)
	}
	require.Zero(t, opened, "connections opened by 20 turns after the pools were warm")
}

// BenchmarkTurnSessions reports the connections to PostgreSQL a turn of
// one tool call opens, after the pools are warm.
func BenchmarkTurnSessions(b *testing.B) {
	rig := newDialRig(b)
	n := 0
	for range 3 {
		n++
		rig.turn(b, n)
	}
	var opened int64
	for b.Loop() {
		n++
		opened += rig.turn(b, n)
	}
	b.ReportMetric(float64(opened)/float64(b.N), "sessions/turn")
}
