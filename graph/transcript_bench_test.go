package graph_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/ent/db/dbtest"
	"github.com/toolgate/toolgate/graph"
	"github.com/toolgate/toolgate/graph/console"
)

// BenchmarkPortalTranscript reads a conversation of 100 turns × 5 tool
// calls with their results' metadata through the admin console's own
// transcript query, served in process (no network, nothing decoded, the
// body counted, not kept), so ns/op and B/op are the server's cost of one
// read: resolving, SQL through the driver and encoding the answer;
// cpu-ms/op is the process's CPU time per read.
func BenchmarkPortalTranscript(b *testing.B) {
	for _, backend := range []dbtest.Backend{dbtest.SQLite, dbtest.Postgres} {
		b.Run(string(backend), func(b *testing.B) {
			tb, counter, conv := longConversation(b, backend, 100, 5)
			body, err := json.Marshal(map[string]any{"query": console.Operations()["transcript"], "variables": map[string]any{"id": conv, "first": 100}})
			require.NoError(b, err)
			srv := graph.NewServer(graph.Config{DB: tb.db})
			read := func(w http.ResponseWriter) {
				req := httptest.NewRequest(http.MethodPost, "/graphql", bytes.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Authorization", "Bearer "+tb.alice.Token)
				srv.ServeHTTP(w, req)
			}
			first := httptest.NewRecorder()
			read(first)
			require.Equal(b, http.StatusOK, first.Code, first.Body.String())
			require.NotContains(b, first.Body.String(), `"errors"`)
			counter.Reset()
			b.ReportAllocs()
			cpu := cpuTime(b)
			for b.Loop() {
				read(&countingWriter{header: http.Header{}})
			}
			b.ReportMetric(float64(cpuTime(b)-cpu)/float64(time.Millisecond)/float64(b.N), "cpu-ms/op")
			b.ReportMetric(float64(len(counter.Statements()))/float64(b.N), "stmts/op")
			b.ReportMetric(float64(first.Body.Len()), "answer-bytes")
		})
	}
}

// countingWriter takes a response as a server's connection does, without
// keeping it, so that B/op is the server's allocation alone.
type countingWriter struct {
	header http.Header
	n      int
}

func (w *countingWriter) Header() http.Header         { return w.header }
func (w *countingWriter) WriteHeader(int)             {}
func (w *countingWriter) Write(p []byte) (int, error) { w.n += len(p); return len(p), nil }

// cpuTime is the CPU time this process has used, user and system: unlike
// ns/op it does not count the time a busy machine keeps the benchmark
// waiting, nor PostgreSQL's own work.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	require.NoError(b, syscall.Getrusage(syscall.RUSAGE_SELF, &ru))
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
