package code_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/db/dbtest"
	"github.com/toolgate/toolgate/ent/tenancy"
	"github.com/toolgate/toolgate/tools/code"
)

// BenchmarkRunEmpty is the overhead of one run as a call meets it: a
// child started ahead is ready (the pool refills between calls, timer
// stopped), fed, heard from and ended (goal: under 20 ms).
func BenchmarkRunEmpty(b *testing.B) {
	tb := setup(b, dbtest.Open(b, dbtest.SQLite))
	tb.sandbox.Prestart()
	for b.Loop() {
		b.StopTimer()
		waitReady(b, tb.sandbox, code.DefaultIdle)
		b.StartTimer()
		_, err := tb.run(b, `void 0`)
		require.NoError(b, err)
	}
}

// BenchmarkRunEmptyBackToBack runs empty runs one after another with no
// pause: past the ready children, each waits for one being started, so
// this is how many runs a second the pool sustains.
func BenchmarkRunEmptyBackToBack(b *testing.B) {
	tb := setup(b, dbtest.Open(b, dbtest.SQLite))
	for b.Loop() {
		_, err := tb.run(b, `void 0`)
		require.NoError(b, err)
	}
}

// BenchmarkRunEmptyCold is an empty run with no child started ahead
// (Idle 0): a process started, readied, fed and ended for the run.
func BenchmarkRunEmptyCold(b *testing.B) {
	tb := setup(b, dbtest.Open(b, dbtest.SQLite))
	tb.sandbox.Idle = 0
	for b.Loop() {
		_, err := tb.run(b, `void 0`)
		require.NoError(b, err)
	}
}

// waitReady waits until n children are ready.
func waitReady(t testing.TB, s *code.Sandbox, n int) {
	t.Helper()
	require.Eventually(t, func() bool { return len(s.ReadyPIDs()) >= n }, 30*time.Second, time.Millisecond)
}

// BenchmarkRunJSONSum parses a 5 MB stored result and sums a field.
func BenchmarkRunJSONSum(b *testing.B) {
	tb := setup(b, dbtest.Open(b, dbtest.SQLite))
	rows := make([]map[string]any, 40000)
	for i := range rows {
		rows[i] = map[string]any{"id": i, "amount": i % 97, "note": fmt.Sprintf("%080d", i)}
	}
	raw, err := json.Marshal(map[string]any{"rows": rows})
	require.NoError(b, err)
	tb.store(b, stored{ref: "big", content: string(raw)})
	// Measured, not bounded: a loaded machine must not fail the benchmark.
	tb.sandbox.Limits.Wall = time.Minute
	b.SetBytes(int64(len(raw)))
	for b.Loop() {
		res, err := tb.run(b, `console.log(JSON.parse(toolResults[0]).rows.reduce((s, r) => s + r.amount, 0))`, "big")
		require.NoError(b, err)
		require.NotEmpty(b, res.Output)
	}
}

// BenchmarkBombPeakMemory stops an allocation bomb and reports the
// server's peak resident memory while it does, beside its resident
// memory before: the bomb's memory is the child's, never the server's.
func BenchmarkBombPeakMemory(b *testing.B) {
	tb := setup(b, dbtest.Open(b, dbtest.SQLite))
	runtime.GC()
	before := rss(b)
	var peak int64
	for b.Loop() {
		done := make(chan struct{})
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			t := time.NewTicker(2 * time.Millisecond)
			defer t.Stop()
			for {
				select {
				case <-done:
					return
				case <-t.C:
					peak = max(peak, rss(b))
				}
			}
		}()
		_, err := tb.sandbox.Run(tenancy.System(context.Background()), tb.client, tb.conv, codeInput(`const s = "x".repeat(2 ** 30); console.log(s.length)`))
		close(done)
		wg.Wait()
		failed(b, err, "memory bound")
	}
	b.ReportMetric(float64(before)/(1<<20), "server-MiB-before")
	b.ReportMetric(float64(peak)/(1<<20), "server-peak-MiB")
}

// rss is this process's resident memory.
func rss(b *testing.B) int64 {
	raw, err := os.ReadFile("/proc/self/status")
	require.NoError(b, err)
	for line := range bytes.Lines(raw) {
		if rest, ok := bytes.CutPrefix(line, []byte("VmRSS:")); ok {
			kb, err := strconv.ParseInt(string(bytes.TrimSpace(bytes.TrimSuffix(bytes.TrimSpace(rest), []byte("kB")))), 10, 64)
			require.NoError(b, err)
			return kb << 10
		}
	}
	b.Fatal("no VmRSS")
	return 0
}
