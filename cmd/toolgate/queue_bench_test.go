package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/db/dbtest"
)

// statements counts what a server sends its database.
type statements struct {
	mu sync.Mutex
	n  map[string]int
}

func (s *statements) observe(q string) {
	s.mu.Lock()
	s.n[strings.Join(strings.Fields(q), " ")]++
	s.mu.Unlock()
}

func (s *statements) reset() {
	s.mu.Lock()
	s.n = map[string]int{}
	s.mu.Unlock()
}

// total returns how many were sent, and the most frequent, for the log.
func (s *statements) total() (int, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	var qs []string
	for q, c := range s.n {
		n += c
		qs = append(qs, q)
	}
	sort.Slice(qs, func(i, j int) bool { return s.n[qs[i]] > s.n[qs[j]] })
	var b strings.Builder
	for _, q := range qs[:min(len(qs), 12)] {
		fmt.Fprintf(&b, "%5d  %.140s\n", s.n[q], q)
	}
	return n, b.String()
}

// benchServer is `toolgate serve` run in the benchmark's process, on the
// OpenAI provider pointed at model, every statement it sends counted.
type benchServer struct {
	base, token string
	stmts       *statements
}

func startServer(b testing.TB, backend dbtest.Backend, modelURL string) *benchServer {
	b.Helper()
	url := dbtest.URL(b, backend)
	s := &benchServer{stmts: &statements{n: map[string]int{}}}
	openOptions.Observe = s.stmts.observe
	b.Cleanup(func() { openOptions.Observe = nil })
	b.Setenv("OPENAI_BASE_URL", modelURL)
	b.Setenv("OPENAI_API_KEY", "test")
	// The fake model speaks chat completions only; embeddings are built in.
	b.Setenv("TOOLGATE_EMBEDDING_PROVIDER", "local")
	var out bytes.Buffer
	require.NoError(b, run(context.Background(), []string{"bootstrap", "--org", "Acme", "--user", "Ada", "--department", "Ops", "--database-url", url}, &out, io.Discard))
	var grant struct{ Token string }
	require.NoError(b, json.Unmarshal(out.Bytes(), &grant))
	s.token = grant.Token
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	var logs syncBuffer
	go func() {
		done <- run(ctx, []string{"serve", "--addr", "127.0.0.1:0", "--database-url", url, "--model-provider", "openai", "--model", "gpt-4.1"}, io.Discard, &logs)
	}()
	re := regexp.MustCompile(`msg=serving addr=(\S+)`)
	require.Eventually(b, func() bool {
		if m := re.FindStringSubmatch(logs.String()); m != nil {
			s.base = "http://" + m[1]
			return true
		}
		return false
	}, 30*time.Second, 10*time.Millisecond, "the server did not start")
	b.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			require.NoError(b, err)
		case <-time.After(30 * time.Second):
			b.Error("the server did not stop")
		}
	})
	return s
}

func (s *benchServer) gql(b testing.TB, query string, vars map[string]any) map[string]any {
	b.Helper()
	body, _ := json.Marshal(map[string]any{"query": query, "variables": vars})
	req, err := http.NewRequest(http.MethodPost, s.base+"/graphql", bytes.NewReader(body))
	require.NoError(b, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+s.token)
	res, err := http.DefaultClient.Do(req)
	require.NoError(b, err)
	defer res.Body.Close()
	var out struct {
		Data   map[string]any
		Errors []any
	}
	require.NoError(b, json.NewDecoder(res.Body).Decode(&out))
	require.Empty(b, out.Errors)
	return out.Data
}

// instantModel answers every Chat Completions request at once, streamed,
// and tells arrived when a request's first byte is in.
func instantModel(b *testing.B, arrived chan<- time.Time) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		at := time.Now()
		_, _ = io.Copy(io.Discard, r.Body)
		select {
		case arrived <- at:
		default:
		}
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, `data: {"id":"y","object":"chat.completion.chunk","created":1,"model":"gpt-4.1","choices":[{"index":0,"finish_reason":"stop","delta":{"role":"assistant","content":"Done."}}]}`+"\n\n")
		fmt.Fprint(w, `data: {"id":"y","object":"chat.completion.chunk","created":1,"model":"gpt-4.1","choices":[],"usage":{"prompt_tokens":100,"completion_tokens":3,"total_tokens":103}}`+"\n\n")
		fmt.Fprint(w, "data: [DONE]\n\n")
	}))
	b.Cleanup(srv.Close)
	return srv.URL + "/v1"
}

// BenchmarkIdleStatements counts the statements an idle server (its turn
// runner, its document queue, its sweep of abandoned turns) sends its
// database, over a window of a minute (River reads some things once a
// minute) after a settling time.
func BenchmarkIdleStatements(b *testing.B) {
	for _, backend := range []dbtest.Backend{dbtest.SQLite, dbtest.Postgres} {
		b.Run(string(backend), func(b *testing.B) {
			s := startServer(b, backend, instantModel(b, nil))
			time.Sleep(3 * time.Second)
			const window = time.Minute
			var n int
			var top string
			for b.Loop() {
				s.stmts.reset()
				time.Sleep(window)
				n, top = s.stmts.total()
			}
			b.Logf("%s: %d statements in %s; most frequent:\n%s", backend, n, window, top)
			b.ReportMetric(float64(n)/window.Seconds(), "stmts/s")
		})
	}
}

// BenchmarkTurnStartLatency measures to the first byte of the turn's model
// call reaching the model (a real HTTP server): from sendMessage's answer
// reaching the client (the queue's part of a turn's start, p50-ms and
// p99-ms), and from the client sending sendMessage (what a person waits
// for, send-p50-ms and send-p99-ms). Each message goes to a new
// conversation, so no turn waits for another; the server is otherwise idle.
func BenchmarkTurnStartLatency(b *testing.B) {
	for _, backend := range []dbtest.Backend{dbtest.SQLite, dbtest.Postgres} {
		b.Run(string(backend), func(b *testing.B) {
			arrived := make(chan time.Time, 1)
			s := startServer(b, backend, instantModel(b, arrived))
			agent := s.gql(b, `mutation { createAgent(input: {name: "Quick", instructions: "Answer.", tools: []}) { id } }`, nil)
			agentID := agent["createAgent"].(map[string]any)["id"]
			var lat, fromSend []time.Duration
			for b.Loop() {
				b.StopTimer()
				c := s.gql(b, `mutation($a: ID!) { startConversation(input: {agentId: $a}) { id } }`, map[string]any{"a": agentID})
				conv := c["startConversation"].(map[string]any)["id"]
				// An idle pause, as between people's messages.
				time.Sleep(20 * time.Millisecond)
				b.StartTimer()
				sent := time.Now()
				s.gql(b, `mutation($c: ID!) { sendMessage(input: {conversationId: $c, text: "hi"}) { id } }`, map[string]any{"c": conv})
				answered := time.Now()
				select {
				case at := <-arrived:
					lat = append(lat, at.Sub(answered))
					fromSend = append(fromSend, at.Sub(sent))
				case <-time.After(10 * time.Second):
					b.Fatal("the turn's model call never came")
				}
			}
			slices.Sort(lat)
			slices.Sort(fromSend)
			q := func(lat []time.Duration, p float64) float64 {
				return float64(lat[min(len(lat)-1, int(p*float64(len(lat))))].Microseconds()) / 1000
			}
			b.ReportMetric(q(lat, 0.5), "p50-ms")
			b.ReportMetric(q(lat, 0.99), "p99-ms")
			b.ReportMetric(q(lat, 1), "max-ms")
			b.ReportMetric(q(fromSend, 0.5), "send-p50-ms")
			b.ReportMetric(q(fromSend, 0.99), "send-p99-ms")
		})
	}
}
