package loop_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/db"
	"github.com/toolgate/toolgate/db/dbtest"
	"github.com/toolgate/toolgate/ent/tenancy"
	"github.com/toolgate/toolgate/graph/gid"
	"github.com/toolgate/toolgate/runtime/events"
	"github.com/toolgate/toolgate/runtime/loop"
	"github.com/toolgate/toolgate/runtime/model"
)

// stmtLog records the statements a database is sent, by every pool, but
// the job queue's: its polling runs whatever the turns do, and is counted
// apart (cmd/toolgate's BenchmarkIdleStatements).
type stmtLog struct {
	mu sync.Mutex
	qs []string
}

func (s *stmtLog) observe(q string) {
	// The queue's statements: River's own tables, and the transactions of
	// its pgx pool (pgx writes begin and commit in lower case; ent's
	// lib/pq pool in upper), whose completer commits when it will.
	if strings.Contains(q, "river_") || q == "begin" || q == "commit" || q == "rollback" {
		return
	}
	s.mu.Lock()
	s.qs = append(s.qs, q)
	s.mu.Unlock()
}

func (s *stmtLog) reset() {
	s.mu.Lock()
	s.qs = nil
	s.mu.Unlock()
}

func (s *stmtLog) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.qs)
}

// notifications counts the event notifications among the statements.
func (s *stmtLog) notifications() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, q := range s.qs {
		if strings.Contains(q, "pg_notify(") {
			n++
		}
	}
	return n
}

// String lists the statements by frequency, for failure messages.
func (s *stmtLog) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := map[string]int{}
	for _, q := range s.qs {
		n[strings.Join(strings.Fields(q), " ")]++
	}
	keys := make([]string, 0, len(n))
	for q := range n {
		keys = append(keys, q)
	}
	sort.Slice(keys, func(i, j int) bool { return n[keys[i]] > n[keys[j]] || n[keys[i]] == n[keys[j]] && keys[i] < keys[j] })
	var b strings.Builder
	fmt.Fprintf(&b, "%d statements:\n", len(s.qs))
	for _, q := range keys {
		fmt.Fprintf(&b, "%3d  %.200s\n", n[q], q)
	}
	return b.String()
}

// costRig is a harness over a database whose every statement is counted,
// with the event bridge a replica on PostgreSQL runs: what a turn costs a
// server in statements, and in CPU here and in the database.
type costRig struct {
	*harness
	stmts *stmtLog
	// app names the rig's PostgreSQL sessions, whose server processes'
	// CPU time is the database's part of a turn.
	app string
	// bridge sends the events to other replicas, on PostgreSQL.
	bridge *events.Bridge
}

func newCostRig(t testing.TB, backend dbtest.Backend, p model.Provider, opts ...option) *costRig {
	t.Helper()
	raw := dbtest.URL(t, backend)
	rig := &costRig{stmts: &stmtLog{}}
	if backend == dbtest.Postgres {
		b := make([]byte, 6)
		_, _ = rand.Read(b)
		rig.app = "turncost_" + hex.EncodeToString(b)
		u, err := url.Parse(raw)
		require.NoError(t, err)
		q := u.Query()
		q.Set("application_name", rig.app)
		u.RawQuery = q.Encode()
		raw = u.String()
	}
	ctx := context.Background()
	d, err := db.OpenWith(ctx, raw, db.Options{Observe: rig.stmts.observe})
	require.NoError(t, err)
	t.Cleanup(func() { _ = d.Close() })
	require.NoError(t, d.Migrate(ctx))
	bus := events.NewBus()
	if backend == dbtest.Postgres {
		br, err := events.NewBridge(raw, d.SQL, bus, slog.New(slog.DiscardHandler))
		require.NoError(t, err)
		t.Cleanup(func() { _ = br.Close() })
		rig.bridge = br
	}
	rig.harness = newHarness(t, d, p, append([]option{func(c *loop.Config) { c.Events = bus }}, opts...)...)
	return rig
}

// dbCPU is the CPU time the rig's PostgreSQL server processes have used,
// by process; nil on SQLite, whose work is done in this process.
func (r *costRig) dbCPU(t testing.TB) map[int]time.Duration {
	if r.app == "" {
		return nil
	}
	var pids []int
	rows, err := r.db.SQL.Query(`SELECT pid FROM pg_stat_activity WHERE application_name = $1`, r.app)
	require.NoError(t, err)
	for rows.Next() {
		var pid int
		require.NoError(t, rows.Scan(&pid))
		pids = append(pids, pid)
	}
	require.NoError(t, rows.Err())
	require.NoError(t, rows.Close())
	out := map[int]time.Duration{}
	for _, pid := range pids {
		raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue // a session that ended
		}
		// The fields after the command's closing parenthesis: utime and
		// stime are the 12th and 13th, in clock ticks of 1/100 s.
		f := strings.Fields(string(raw[strings.LastIndexByte(string(raw), ')')+1:]))
		ut, _ := strconv.Atoi(f[11])
		st, _ := strconv.Atoi(f[12])
		out[pid] = time.Duration(ut+st) * 10 * time.Millisecond
	}
	return out
}

// since sums the CPU time each process used after before was taken.
func since(before, after map[int]time.Duration) time.Duration {
	var d time.Duration
	for pid, a := range after {
		d += a - before[pid]
	}
	return d
}

func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// turnOfCalls is a model that asks for n calculator calls at once, then
// answers.
func turnOfCalls(n int) *scriptedCycle {
	calls := make([]model.ToolCall, n)
	for i := range calls {
		calls[i] = call(fmt.Sprintf("c%d", i), "calculator", `{"expression": "1+1"}`)
	}
	return &scriptedCycle{answers: []model.Response{{ToolCalls: calls}, {Text: "done"}}}
}

// newTurn stores a new RUNNING turn in the conversation.
func (r *costRig) newTurn(t testing.TB, convID, number int) int {
	t.Helper()
	ctx := tenancy.System(context.Background())
	return r.client.Turn.Create().SetConversationID(convID).SetNumber(number).SetUserText("go").SetStartedAt(r.now).SaveX(ctx).ID
}

// flush waits until the turn's events have been sent to other replicas:
// their notifications are the turn's statements too.
func (r *costRig) flush() {
	if r.bridge != nil {
		r.bridge.Flush()
	}
}

// runTurn runs a turn as its job would and returns how many statements
// it sent, from its claim to its end, and their list.
func (r *costRig) runTurn(t testing.TB, id int) (int, string) {
	t.Helper()
	ctx := tenancy.System(context.Background())
	r.stmts.reset()
	require.NoError(t, r.runner.RunTurn(ctx, id))
	r.flush()
	n, list := r.stmts.count(), r.stmts.String()
	got := r.client.Turn.GetX(ctx, id)
	require.Equal(t, "COMPLETED", string(got.Status), got.Error)
	return n, list
}

// TestTurnStatementsBounded counts the statements one turn sends its
// database, from its claim to its end and its events: a turn of one tool
// call and one of ten, each of two model calls, in a conversation with an
// earlier turn. The bounds are what the runtime sends today, so that a
// statement more is noticed. PostgreSQL's event notifications are bounded
// apart: several events go in one, and how many depends on how closely the
// events follow each other, so they are held only to no more than one an
// event. So is the number of transactions the ten calls' records take on
// PostgreSQL (calls that finish while another's record is written are
// recorded together); SQLite's records are written before the next call
// finishes, one transaction each.
func TestTurnStatementsBounded(t *testing.T) {
	for _, tc := range []struct {
		calls int
		most  map[dbtest.Backend]int
		// events is how many events the turn publishes: the most
		// notifications it may take.
		events int
	}{
		{1, map[dbtest.Backend]int{dbtest.SQLite: 18, dbtest.Postgres: 16}, 8},
		{10, map[dbtest.Backend]int{dbtest.SQLite: 63, dbtest.Postgres: 50}, 26},
	} {
		t.Run(fmt.Sprintf("calls=%d", tc.calls), func(t *testing.T) {
			for _, backend := range []dbtest.Backend{dbtest.SQLite, dbtest.Postgres} {
				t.Run(string(backend), func(t *testing.T) {
					rig := newCostRig(t, backend, turnOfCalls(tc.calls))
					convID, err := gid.Decode(rig.conversation(t))
					require.NoError(t, err)
					// The first turn warms the process's caches.
					rig.runTurn(t, rig.newTurn(t, convID, 1))
					n, list := rig.runTurn(t, rig.newTurn(t, convID, 2))
					t.Logf("%s, %d calls: %s", backend, tc.calls, list)
					notes := rig.stmts.notifications()
					require.LessOrEqual(t, n-notes, tc.most[backend], list)
					require.LessOrEqual(t, notes, tc.events, list)
				})
			}
		})
	}
}

// BenchmarkTurnCost runs turns of two model calls that answer at once,
// with one or ten calculator calls between, on both databases: the
// runtime's own cost of a turn, in statements, and in CPU time here
// (cpu-ms/turn: the runtime, the API its tools call and the database
// driver; SQLite's work included) and in PostgreSQL's server processes
// (db-cpu-ms/turn).
func BenchmarkTurnCost(b *testing.B) {
	for _, backend := range []dbtest.Backend{dbtest.SQLite, dbtest.Postgres} {
		for _, n := range []int{1, 10} {
			b.Run(fmt.Sprintf("%s/calls=%d", backend, n), func(b *testing.B) {
				rig := newCostRig(b, backend, turnOfCalls(n))
				ctx := tenancy.System(context.Background())
				convID, err := gid.Decode(rig.conversation(b))
				require.NoError(b, err)
				var (
					cpu, dbCPU time.Duration
					stmts      int
				)
				b.ReportAllocs()
				for b.Loop() {
					b.StopTimer()
					// Keep history short: each turn is measured alone.
					rig.client.ToolCall.Delete().ExecX(ctx)
					rig.client.ModelCall.Delete().ExecX(ctx)
					rig.client.StoredResult.Delete().ExecX(ctx)
					rig.client.Turn.Delete().ExecX(ctx)
					id := rig.newTurn(b, convID, 1)
					dbBefore := rig.dbCPU(b)
					rig.stmts.reset()
					before := processCPU()
					b.StartTimer()
					if err := rig.runner.RunTurn(ctx, id); err != nil {
						b.Fatal(err)
					}
					rig.flush()
					b.StopTimer()
					cpu += processCPU() - before
					stmts += rig.stmts.count()
					dbCPU += since(dbBefore, rig.dbCPU(b))
					b.StartTimer()
				}
				b.ReportMetric(float64(stmts)/float64(b.N), "stmts/turn")
				b.ReportMetric(float64(cpu.Microseconds())/1000/float64(b.N), "cpu-ms/turn")
				if backend == dbtest.Postgres {
					b.ReportMetric(float64(dbCPU.Microseconds())/1000/float64(b.N), "db-cpu-ms/turn")
				}
			})
		}
	}
}
