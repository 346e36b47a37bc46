package graph_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/db/dbtest"
	"github.com/toolgate/toolgate/graph"
	"github.com/toolgate/toolgate/graph/gid"
	"github.com/toolgate/toolgate/runtime/events"
	"github.com/toolgate/toolgate/runtime/loop"
)

// sseFollower is one portal following a turn's text over Server-Sent
// Events (graphql-sse, distinct connections), placing each delta at its
// offset.
type sseFollower struct {
	text    []rune
	deltas  int
	started chan struct{}
	err     error
}

func (f *sseFollower) follow(ctx context.Context, api, token, turnID string, want int) {
	body, _ := json.Marshal(map[string]any{
		"query":     `subscription($t: ID!) { turnEvents(turnId: $t, deltas: true) { kind delta { text offset } } }`,
		"variables": map[string]any{"t": turnID},
	})
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, api+"/graphql", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		f.err = err
		close(f.started)
		return
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		f.err = fmt.Errorf("HTTP %d", res.StatusCode)
		close(f.started)
		return
	}
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	first := true
	for sc.Scan() {
		line, ok := bytes.CutPrefix(sc.Bytes(), []byte("data:"))
		if !ok {
			continue
		}
		var e struct {
			Data struct {
				TurnEvents struct {
					Kind  string
					Delta *struct {
						Text   string
						Offset int
					}
				}
			}
			Errors []any
		}
		if err := json.Unmarshal(bytes.TrimSpace(line), &e); err != nil || len(e.Errors) > 0 {
			f.err = fmt.Errorf("event %s: %v", line, err)
			break
		}
		if first {
			first = false
			close(f.started)
		}
		if d := e.Data.TurnEvents.Delta; d != nil {
			f.deltas++
			f.text = append(f.text[:min(d.Offset, len(f.text))], []rune(d.Text)...)
			if len(f.text) >= want {
				return
			}
		}
	}
	if first {
		close(f.started)
	}
	if f.err == nil {
		f.err = fmt.Errorf("stream ended with %d of %d characters", len(f.text), want)
	}
}

// BenchmarkStreamFanoutServer: 100 turns stream at once, each followed by
// 10 portals over Server-Sent Events through the API (1,000 subscriptions
// on one replica), every portal putting its turn's text together exactly.
// Reported: CPU per delta delivered and memory per subscription, both of
// this process, which holds the API and the 1,000 clients (so both are
// upper bounds of the server's share); and the deltas each portal got.
func BenchmarkStreamFanoutServer(b *testing.B) {
	const turns, subs, pieces = 100, 10, 100
	d := dbtest.Open(b, dbtest.SQLite)
	// A runner that is never opened: the turns stay RUNNING and the
	// benchmark writes their streams on its bus, as the runner would.
	runner, err := loop.New(loop.Config{Client: d.Client(), Queue: d.Queue(), EncodeID: gid.Encode})
	require.NoError(b, err)
	bun := setupWith(b, d, func(c *graph.Config) { c.Runner = runner })
	bus := runner.Events()
	agent := bun.createAgent(b, bun.alice.Token, "Streamer")
	piece := "Streamed ✓ "
	want := utf8.RuneCountInString(piece) * pieces
	// Ten portals to a turn: ten people's tokens (one token holds at most
	// 200 subscriptions at once).
	tokens := make([]string, subs)
	for i := range tokens {
		r := bun.do(b, bun.alice.Token, `mutation($n: String!) { createAPIToken(input: {name: $n}) { token } }`, map[string]any{"n": fmt.Sprintf("portal %d", i)}).ok(b)
		tokens[i] = get(r, "createAPIToken", "token").(string)
	}
	http.DefaultTransport.(*http.Transport).MaxIdleConnsPerHost = turns * subs

	var cpu time.Duration
	var delivered, subscribers int64
	var mem uint64
	for b.Loop() {
		b.StopTimer()
		ids := make([]string, turns)
		for i := range ids {
			conv := bun.startConversation(b, bun.alice.Token, agent, fmt.Sprintf("stream %d", i))
			r := bun.do(b, bun.alice.Token, `mutation($c: ID!) { sendMessage(input: {conversationId: $c, text: "go"}) { id } }`, map[string]any{"c": conv}).ok(b)
			ids[i] = get(r, "sendMessage", "id").(string)
		}
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		ctx, cancel := context.WithCancel(context.Background())
		b.Cleanup(cancel) // a failure ends the streams before the server closes
		followers := make([]*sseFollower, 0, turns*subs)
		var wg sync.WaitGroup
		for _, id := range ids {
			for j := range subs {
				f := &sseFollower{started: make(chan struct{})}
				followers = append(followers, f)
				wg.Add(1)
				go func() {
					defer wg.Done()
					f.follow(ctx, bun.srv.URL, tokens[j], id, want)
				}()
			}
		}
		for _, f := range followers {
			select {
			case <-f.started:
			case <-time.After(time.Minute):
				b.Fatal("a subscription was not answered within a minute")
			}
			require.NoError(b, f.err)
		}
		runtime.ReadMemStats(&after)
		mem += (after.HeapInuse + after.StackInuse) - (before.HeapInuse + before.StackInuse)
		subscribers += int64(len(followers))

		start := cpuTime(b)
		b.StartTimer()
		var writers sync.WaitGroup
		for _, id := range ids {
			n, err := gid.Decode(id)
			require.NoError(b, err)
			writers.Add(1)
			go func() {
				defer writers.Done()
				bus.Publish(events.Event{Kind: events.ModelCallStarted, TurnID: n, Step: 0, At: time.Now()})
				w := bus.Begin(n, 0)
				for range pieces {
					w.Text(piece)
					time.Sleep(2 * time.Millisecond)
				}
			}()
		}
		writers.Wait()
		wg.Wait()
		b.StopTimer()
		cpu += cpuTime(b) - start
		cancel()
		var got atomic.Int64
		whole := []rune(strings.Repeat(piece, pieces))
		for _, f := range followers {
			require.NoError(b, f.err)
			require.Equal(b, string(whole), string(f.text), "every portal holds the text exactly")
			got.Add(int64(f.deltas))
		}
		delivered += got.Load()
		b.StartTimer()
	}
	b.ReportMetric(float64(cpu.Microseconds())/float64(delivered), "cpu-us/delta")
	b.ReportMetric(float64(mem)/float64(subscribers), "B/subscription")
	b.ReportMetric(float64(delivered)/float64(subscribers), "deltas/subscription")
}
