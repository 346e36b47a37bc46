package loop_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/coder/websocket"
	"github.com/coder/websocket/wsjson"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/db"
	"github.com/toolgate/toolgate/db/dbtest"
	"github.com/toolgate/toolgate/ent/modelcall"
	"github.com/toolgate/toolgate/ent/tenancy"
	"github.com/toolgate/toolgate/ent/turn"
	"github.com/toolgate/toolgate/graph"
	"github.com/toolgate/toolgate/graph/gid"
	"github.com/toolgate/toolgate/runtime/events"
	"github.com/toolgate/toolgate/runtime/loop"
	"github.com/toolgate/toolgate/runtime/model"
	"github.com/toolgate/toolgate/runtime/model/replay"
)

// streamedAnswer is 2,000-odd characters of every width UTF-8 has.
var streamedAnswer = strings.Repeat("Voilà: 1,200 + 850 = 2,050 → with 20% it is 2,460 🎉 (二千四百六十). ", 32)

// streamScript calls the calculator, saying so first, then answers at length.
func streamScript(t testing.TB, pace time.Duration) *replay.Provider {
	t.Helper()
	script, err := json.Marshal(replay.Script{Entries: []replay.Entry{{Steps: []replay.Step{
		{Thinking: "never streamed", Text: "Let me work that out.", ToolCalls: []replay.ToolCall{{Name: "calculator", Arguments: json.RawMessage(`{"expression":"(1200+850)*1.2"}`)}}},
		{Text: streamedAnswer},
	}}}})
	require.NoError(t, err)
	p, err := replay.Parse(script)
	require.NoError(t, err)
	return p.Paced(pace)
}

// gated holds a provider's first call until ready says go: the test's
// clients subscribe first, so they hear the stream live.
type gated struct {
	model.Provider
	ready func() bool
	once  sync.Once
}

func (g *gated) Complete(ctx context.Context, req model.Request) (*model.Response, error) {
	g.once.Do(func() {
		for i := 0; i < 2000 && !g.ready(); i++ {
			time.Sleep(5 * time.Millisecond)
		}
	})
	return g.Provider.Complete(ctx, req)
}

// streamClient is what client.mjs prints.
type streamClient struct {
	Steps         map[string]string `json:"steps"`
	Kinds         []string          `json:"kinds"`
	Seqs          []string          `json:"seqs"`
	Resets        int               `json:"resets"`
	Writings      []string          `json:"writings"`
	Errors        []string          `json:"errors"`
	Subscriptions int               `json:"subscriptions"`
	Status        string            `json:"status"`
}

// nodeClient installs testdata/streamclient's packages (graphql-ws,
// graphql-sse, ws) with npm ci into a cache folder, once per lock file,
// and returns the folder.
func nodeClient(t *testing.T) string {
	t.Helper()
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not found: install Node.js and npm (.ci/run does)", tool)
		}
	}
	src := filepath.Join("testdata", "streamclient")
	lock, err := os.ReadFile(filepath.Join(src, "package-lock.json"))
	require.NoError(t, err)
	sum := sha256.Sum256(lock)
	cache, err := os.UserCacheDir()
	require.NoError(t, err)
	dir := filepath.Join(cache, "toolgate-test", "streamclient-"+hex.EncodeToString(sum[:8]))
	nodeInstall.Lock()
	defer nodeInstall.Unlock()
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "graphql-sse")); err != nil {
		require.NoError(t, os.MkdirAll(dir, 0o755))
		for _, f := range []string{"package.json", "package-lock.json"} {
			b, err := os.ReadFile(filepath.Join(src, f))
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(filepath.Join(dir, f), b, 0o644))
		}
		cmd := exec.Command("npm", "ci", "--ignore-scripts", "--no-audit", "--no-fund")
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "npm ci: %s", out)
	}
	b, err := os.ReadFile(filepath.Join(src, "client.mjs"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "client.mjs"), b, 0o644))
	return dir
}

var nodeInstall sync.Mutex

// follow runs client.mjs: it follows the turn to its end over transport
// ("ws" or "sse"), on urls in turn, resuming after every reconnectEvery
// events (0: never).
func follow(t *testing.T, dir, transport string, urls []string, token, turnID string, reconnectEvery int) (*streamClient, func() *streamClient) {
	t.Helper()
	opts, err := json.Marshal(map[string]any{"transport": transport, "urls": urls, "token": token, "turnId": turnID, "reconnectEvery": reconnectEvery})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	cmd := exec.CommandContext(ctx, "node", "client.mjs", string(opts))
	cmd.Dir = dir
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Start())
	return nil, func() *streamClient {
		defer cancel()
		require.NoError(t, cmd.Wait(), "node: %s", stderr.String())
		var got streamClient
		require.NoError(t, json.Unmarshal([]byte(stdout.String()), &got), stdout.String())
		return &got
	}
}

// replica is a second server over the same PostgreSQL database: its own
// connections, bus and bridge, and an API whose subscribers hear turns
// that run on the first.
func replica(t *testing.T, h *harness, raw string) (*httptest.Server, *events.Bus) {
	t.Helper()
	ctx := context.Background()
	d, err := db.Open(ctx, raw)
	require.NoError(t, err)
	t.Cleanup(func() { _ = d.Close() })
	bus := events.NewBus()
	br, err := events.NewBridge(raw, d.SQL, bus, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	t.Cleanup(func() { _ = br.Close() })
	cfg := h.cfg
	cfg.Client, cfg.Queue, cfg.Events, cfg.Registerer = d.Client(), d.Queue(), bus, prometheus.NewRegistry()
	r, err := loop.New(cfg) // never opened: it only serves subscriptions
	require.NoError(t, err)
	srv := httptest.NewServer(graph.NewServer(graph.Config{DB: d, Signer: h.signer, Runner: r}))
	t.Cleanup(srv.Close)
	return srv, bus
}

// bridgedHarness is a harness on PostgreSQL whose bus is bridged, and the
// database's address.
func bridgedHarness(t *testing.T, p model.Provider) (*harness, string) {
	t.Helper()
	raw := dbtest.URL(t, dbtest.Postgres)
	ctx := context.Background()
	d, err := db.Open(ctx, raw)
	require.NoError(t, err)
	t.Cleanup(func() { _ = d.Close() })
	require.NoError(t, d.Migrate(ctx))
	bus := events.NewBus()
	br, err := events.NewBridge(raw, d.SQL, bus, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	t.Cleanup(func() { _ = br.Close() })
	return newHarness(t, d, p, func(c *loop.Config) { c.Events = bus }), raw
}

// oldKinds is what a stream without deltas tells of a turn that calls the
// calculator once and answers.
var oldKinds = []string{"STATUS", "MODEL_CALL_STARTED", "MODEL_CALL_FINISHED", "TOOL_CALL_STARTED",
	"TOOL_CALL_FINISHED", "MODEL_CALL_STARTED", "MODEL_CALL_FINISHED", "ANSWER", "STATUS"}

// checkStream: a client followed the whole turn, live, and put together
// exactly the texts stored, each event told once, the answer in more
// than minDeltas pieces (10 on the turn's own replica, fewer on another,
// which hears them joined), the first step's TOOL_CALL_WRITING among them.
func checkStream(t *testing.T, h *harness, turnID string, got *streamClient, minDeltas int) {
	t.Helper()
	require.Empty(t, got.Errors)
	require.Equal(t, "COMPLETED", got.Status)
	tu := h.wait(t, turnID)
	require.Equal(t, streamedAnswer, *tu.Answer)
	mcs := tu.QueryModelCalls().Where(modelcall.KindEQ(modelcall.KindSTEP)).Order(modelcall.ByStep()).AllX(tenancy.System(context.Background()))
	require.Len(t, mcs, 2)
	require.Equal(t, mcs[0].Text, got.Steps["0"], "the text written before the tool call")
	require.Equal(t, *tu.Answer, got.Steps["1"], "the answer, byte for byte")
	var durable []string
	deltas := 0
	for _, k := range got.Kinds {
		switch k {
		case "TEXT_DELTA":
			deltas++
		case "TOOL_CALL_WRITING":
		default:
			durable = append(durable, k)
		}
	}
	require.Equal(t, oldKinds, durable, "each event once, in order")
	require.Greater(t, deltas, minDeltas, "the answer streamed in pieces")
	// The calculator's call is heard as the model begins writing it, on
	// every replica and through every resume.
	require.Contains(t, got.Writings, "0:0:calculator", "%v", got.Kinds)
	require.Zero(t, got.Resets)
	for i := 1; i < len(got.Seqs); i++ {
		require.Less(t, got.Seqs[i-1], got.Seqs[i])
	}
}

// TestStreamRealClients: graphql-ws and graphql-sse clients follow a
// streaming turn to its end and put its texts together byte for byte,
// connected throughout or resuming with after: every 10th event; on one
// replica, and on PostgreSQL across two.
func TestStreamRealClients(t *testing.T) {
	dir := nodeClient(t)
	backends := []string{"sqlite", "postgres"}
	if os.Getenv("TEST_DATABASE_URL") == "" {
		backends = backends[:1]
	}
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			var h *harness
			var other *httptest.Server
			var otherBus *events.Bus
			// The runner's goroutine asks ready while the test learns the turn.
			var turnID atomic.Int64
			g := &gated{Provider: streamScript(t, 3*time.Millisecond)}
			if backend == "sqlite" {
				h = newHarness(t, dbtest.Open(t, dbtest.SQLite), g)
			} else {
				var raw string
				h, raw = bridgedHarness(t, g)
				other, otherBus = replica(t, h, raw)
			}
			type run struct {
				transport string
				every     int
				across    bool
			}
			var runs []run
			for _, tr := range []string{"ws", "sse"} {
				runs = append(runs, run{tr, 0, false}, run{tr, 10, false})
				if other != nil {
					runs = append(runs, run{tr, 0, true}, run{tr, 10, true})
				}
			}
			conv := h.conversation(t, "calculator")
			// The runner listens too (for a cancel from another replica).
			g.ready = func() bool {
				n := h.runner.Events().Subscribers(int(turnID.Load()))
				if otherBus != nil {
					n += otherBus.Subscribers(int(turnID.Load()))
				}
				return n >= len(runs)+1
			}
			id := h.send(t, conv, "What do 1,200 and 850 come to with a 20% markup?", "")
			tid, err := gid.Decode(id)
			require.NoError(t, err)
			turnID.Store(int64(tid))
			waits := make([]func() *streamClient, len(runs))
			for i, r := range runs {
				urls := []string{h.srv.URL + "/graphql"}
				if r.across {
					urls = []string{other.URL + "/graphql", h.srv.URL + "/graphql"}
				}
				_, waits[i] = follow(t, dir, r.transport, urls, h.grant.Token, id, r.every)
			}
			for i, wait := range waits {
				got := wait()
				t.Logf("%+v: %d events, %d subscriptions", runs[i], len(got.Kinds), got.Subscriptions)
				// Another replica hears the pieces joined, one notification
				// every events.PieceEvery: the half second or more the
				// answer takes to stream is several of them.
				minDeltas := 10
				if runs[i].across {
					minDeltas = 2
				}
				checkStream(t, h, id, got, minDeltas)
				if every := runs[i].every; every > 0 {
					// A new subscription after every 10th event.
					require.GreaterOrEqual(t, got.Subscriptions, max(2, (len(got.Kinds)+every-1)/every), "%+v resumed", runs[i])
				}
			}
		})
	}
}

// haltingProvider streams the start of an answer and then waits for its
// call to be stopped, as a model call does when its replica dies.
type haltingProvider struct {
	text    string
	started chan struct{}
	once    sync.Once
}

func (p *haltingProvider) Name() string { return "halting" }

func (p *haltingProvider) Complete(ctx context.Context, req model.Request) (*model.Response, error) {
	for _, r := range p.text {
		req.Stream.Text(string(r))
	}
	p.once.Do(func() { close(p.started) })
	<-ctx.Done()
	return nil, ctx.Err()
}

// wsText follows a turn's events with deltas over a websocket and puts
// the answer's text together, counting restarts.
type wsText struct {
	mu      sync.Mutex
	text    []rune
	held    int // the most characters held before a restart
	resets  int
	status  string
	done    chan struct{}
	lastSeq string
}

func followWS(t *testing.T, h *harness, url, token, turnID string) *wsText {
	t.Helper()
	at := *h
	at.srv = &httptest.Server{URL: url}
	c, ctx := subscribeQuery(t, &at, token, `subscription($t: ID!) { turnEvents(turnId: $t, replay: true, deltas: true) { kind seq step turn { status } delta { text offset } } }`,
		map[string]any{"t": turnID})
	w := &wsText{done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for {
			var m wsMessage
			if err := wsjson.Read(ctx, c, &m); err != nil || m.Type != "next" {
				return
			}
			var p struct {
				Data struct {
					TurnEvents struct {
						Kind  string `json:"kind"`
						Seq   string `json:"seq"`
						Step  int    `json:"step"`
						Turn  struct{ Status string }
						Delta *struct {
							Text   string `json:"text"`
							Offset int    `json:"offset"`
						} `json:"delta"`
					} `json:"turnEvents"`
				} `json:"data"`
			}
			if json.Unmarshal(m.Payload, &p) != nil {
				return
			}
			e := p.Data.TurnEvents
			w.mu.Lock()
			w.lastSeq = e.Seq
			if d := e.Delta; d != nil {
				if d.Offset < len(w.text) {
					w.held = max(w.held, len(w.text))
					w.resets++
				}
				w.text = append(w.text[:min(d.Offset, len(w.text))], []rune(d.Text)...)
			}
			w.status = e.Turn.Status
			w.mu.Unlock()
		}
	}()
	return w
}

func (w *wsText) chars() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.text)
}

// TestStreamResetWhenTheCallIsMadeAgain: the replica streaming an answer
// dies mid-answer; the turn resumes on another runner, whose model call
// writes another text. A subscriber is told to drop the partial text (a
// delta at offset 0) and puts together exactly the stored answer, never
// the two texts glued; on one SQLite replica, and on PostgreSQL with the
// subscriber on a third server.
func TestStreamResetWhenTheCallIsMadeAgain(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, d *db.DB) {
		halting := &haltingProvider{text: strings.Repeat("First try, cut off ✂ ", 20), started: make(chan struct{})}
		var h *harness
		url, raw := "", ""
		if d.Dialect == "postgres" {
			h, raw = bridgedHarness(t, halting)
			srv, _ := replica(t, h, raw)
			url = srv.URL
		} else {
			h = newHarness(t, d, halting)
			url = h.srv.URL
		}
		id := h.send(t, h.conversation(t), "Tell me a long story.", "")
		w := followWS(t, h, url, h.grant.Token, id)
		<-halting.started
		want := []rune(halting.text)
		require.Eventually(t, func() bool { return w.chars() == len(want) }, 10*time.Second, 5*time.Millisecond, "the partial text reached the subscriber")

		// The replica dies: its model call is stopped, the turn left RUNNING.
		require.NoError(t, h.runner.Close(context.Background()))
		cfg := h.cfg
		cfg.Registerer = prometheus.NewRegistry()
		second := "The second try's answer, whole — ∎"
		script, err := replay.New(replay.Script{Entries: []replay.Entry{{Steps: []replay.Step{{Text: second}}}}})
		require.NoError(t, err)
		cfg.Provider, cfg.Events = script, h.runner.Events()
		if raw != "" {
			// Another replica: its own connections, bus and bridge.
			d2, err := db.Open(context.Background(), raw)
			require.NoError(t, err)
			t.Cleanup(func() { _ = d2.Close() })
			bus := events.NewBus()
			br, err := events.NewBridge(raw, d2.SQL, bus, slog.New(slog.DiscardHandler))
			require.NoError(t, err)
			t.Cleanup(func() { _ = br.Close() })
			cfg.Client, cfg.Queue, cfg.Events = d2.Client(), d2.Queue(), bus
		}
		other, err := loop.New(cfg)
		require.NoError(t, err)
		require.NoError(t, other.Open())
		t.Cleanup(func() { _ = other.Close(context.Background()) })
		n, err := other.Resume(tenancy.System(context.Background()))
		require.NoError(t, err)
		require.Equal(t, 1, n)
		require.Equal(t, turn.StatusCOMPLETED, h.wait(t, id).Status)
		select {
		case <-w.done:
		case <-time.After(20 * time.Second):
			t.Fatal("the stream did not end")
		}
		require.Equal(t, "COMPLETED", w.status)
		require.Equal(t, second, string(w.text), "the stored answer alone")
		require.Equal(t, 1, w.resets, "told once to drop the partial text")
		require.Equal(t, len(want), w.held)
		require.True(t, utf8.ValidString(string(w.text)))
	})
}

// TestStreamCancel: cancelTurn during a stream stops the provider's
// call, and the stream ends with the turn's final status.
func TestStreamCancel(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, d *db.DB) {
		p, err := replay.New(replay.Script{Entries: []replay.Entry{{Steps: []replay.Step{{Text: streamedAnswer}}}}})
		require.NoError(t, err)
		h := newHarness(t, d, p.Paced(20*time.Millisecond))
		id := h.send(t, h.conversation(t), "Tell me.", "")
		w := followWS(t, h, h.srv.URL, h.grant.Token, id)
		require.Eventually(t, func() bool { return w.chars() > 50 }, 20*time.Second, 5*time.Millisecond)
		h.gql(t, `mutation($t: ID!) { cancelTurn(id: $t) { id } }`, map[string]any{"t": id})
		select {
		case <-w.done:
		case <-time.After(10 * time.Second):
			t.Fatal("the stream did not end")
		}
		require.Equal(t, "CANCELLED", w.status)
		require.Less(t, w.chars(), utf8.RuneCountInString(streamedAnswer), "the provider stopped writing")
		tid, err := gid.Decode(id)
		require.NoError(t, err)
		require.Eventually(t, func() bool { return !h.runner.Running(tid) }, 5*time.Second, 5*time.Millisecond)
		tx, ok := h.runner.Events().Text(tid, 0)
		require.True(t, ok)
		require.True(t, tx.Done, "the stream ended with the call")
		got := tx.Chars
		time.Sleep(100 * time.Millisecond)
		tx, _ = h.runner.Events().Text(tid, 0)
		require.Equal(t, got, tx.Chars, "nothing written after the cancel")
	})
}

// smallBuffers keeps a connection's kernel buffers small, so a client
// that stops reading fills them within a few events.
type smallBuffers struct{ net.Listener }

func (l smallBuffers) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetWriteBuffer(4096)
	}
	return c, err
}

// TestStreamSlowSubscriber: a subscriber that stops reading never slows
// the turn: the runtime publishes at its own pace; once its events no
// longer fit, the subscription is closed with TOO_SLOW and the seq to
// resume after, and a new subscription with it goes on from there.
func TestStreamSlowSubscriber(t *testing.T) {
	t.Parallel()
	gate := make(chan struct{})
	h := newHarness(t, dbtest.Open(t, dbtest.SQLite), &scripted{block: gate, answers: []model.Response{{Text: "done"}}})
	srv := httptest.NewUnstartedServer(h.srv.Config.Handler)
	srv.Listener = smallBuffers{srv.Listener}
	srv.Start()
	t.Cleanup(srv.Close)
	id := h.send(t, h.conversation(t), "go", "")
	tid, err := gid.Decode(id)
	require.NoError(t, err)

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	dialer := &net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		return c.Control(func(fd uintptr) { _ = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
	}}
	client := &http.Client{Transport: &http.Transport{DialContext: dialer.DialContext}}
	c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(srv.URL, "http")+"/graphql",
		&websocket.DialOptions{Subprotocols: []string{"graphql-transport-ws"}, HTTPClient: client})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.CloseNow() })
	c.SetReadLimit(1 << 20)
	require.NoError(t, wsjson.Write(ctx, c, map[string]any{"type": "connection_init", "payload": map[string]any{"Authorization": "Bearer " + h.grant.Token}}))
	var m wsMessage
	require.NoError(t, wsjson.Read(ctx, c, &m))
	query := `subscription($t: ID!, $a: String) { turnEvents(turnId: $t, after: $a, deltas: true) { kind seq turn { status } toolCall { id } } }`
	require.NoError(t, wsjson.Write(ctx, c, map[string]any{"id": "1", "type": "subscribe", "payload": map[string]any{"query": query, "variables": map[string]any{"t": id}}}))
	require.NoError(t, wsjson.Read(ctx, c, &m)) // the current status; then it stops reading
	bus := h.runner.Events()
	require.Eventually(t, func() bool { return bus.Subscribers(tid) >= 2 }, 5*time.Second, 5*time.Millisecond)

	// Far more than fit: the publisher never waits for the subscriber.
	start := time.Now()
	for i := range 3 * events.Buffer {
		bus.Publish(events.Event{Kind: events.ToolCallStarted, TurnID: tid, ToolCallID: 1_000_000 + i, Status: "RUNNING", At: time.Now()})
		if i%64 == 0 {
			time.Sleep(20 * time.Millisecond) // the subscriber's goroutine fills the socket meanwhile
		}
	}
	require.Less(t, time.Since(start), 10*time.Second)

	// Reading again: what fitted, then the reason it was closed.
	var after string
	for {
		m = wsMessage{}
		require.NoError(t, wsjson.Read(ctx, c, &m))
		if m.Type == "complete" {
			break
		}
		var p struct {
			Errors []struct {
				Message    string         `json:"message"`
				Extensions map[string]any `json:"extensions"`
			} `json:"errors"`
		}
		require.NoError(t, json.Unmarshal(m.Payload, &p))
		if len(p.Errors) > 0 {
			require.Equal(t, "TOO_SLOW", p.Errors[0].Extensions["code"], p.Errors[0].Message)
			after, _ = p.Errors[0].Extensions["after"].(string)
		}
	}
	require.NotEmpty(t, after, "closed with the seq to resume after")
	require.Eventually(t, func() bool { return bus.Subscribers(tid) == 1 }, 5*time.Second, 5*time.Millisecond, "nothing of it is kept")

	// Resumed from there, it hears the rest of the turn.
	require.NoError(t, wsjson.Write(ctx, c, map[string]any{"id": "2", "type": "subscribe", "payload": map[string]any{"query": query, "variables": map[string]any{"t": id, "a": after}}}))
	require.Eventually(t, func() bool { return bus.Subscribers(tid) >= 2 }, 5*time.Second, 5*time.Millisecond)
	close(gate)
	var kinds []string
	for {
		m = wsMessage{}
		require.NoError(t, wsjson.Read(ctx, c, &m))
		if m.Type == "complete" {
			break
		}
		var p struct {
			Data struct {
				TurnEvents struct{ Kind string } `json:"turnEvents"`
			} `json:"data"`
		}
		require.NoError(t, json.Unmarshal(m.Payload, &p))
		kinds = append(kinds, p.Data.TurnEvents.Kind)
	}
	require.Equal(t, "STATUS", kinds[len(kinds)-1])
	require.Contains(t, kinds, "ANSWER")
}

// unstreamed is a provider whose answers arrive whole: the turn streams
// nothing.
type unstreamed struct {
	model.Provider
	on *atomic.Bool
}

func (u unstreamed) Complete(ctx context.Context, req model.Request) (*model.Response, error) {
	if !u.on.Load() {
		req.Stream = nil
	}
	return u.Provider.Complete(ctx, req)
}

// TestStreamedAnswerStatements: a turn whose 2,000-character answer
// streams, with a subscriber hearing every piece, sends its database the
// statements the same turn sends unstreamed, not one more (nothing is
// written per piece); on PostgreSQL its pieces cost a notification per
// events.PieceEvery at most, beyond the unstreamed turn's.
func TestStreamedAnswerStatements(t *testing.T) {
	for _, backend := range []dbtest.Backend{dbtest.SQLite, dbtest.Postgres} {
		t.Run(string(backend), func(t *testing.T) {
			on := &atomic.Bool{}
			rig := newCostRig(t, backend, unstreamed{streamScript(t, 3*time.Millisecond), on})
			convID, err := gid.Decode(rig.conversation(t))
			require.NoError(t, err)
			rig.runTurn(t, rig.newTurn(t, convID, 1)) // warms the caches
			plain, plainList := rig.runTurn(t, rig.newTurn(t, convID, 2))
			plainNotes := rig.stmts.notifications()

			on.Store(true)
			id := rig.newTurn(t, convID, 3)
			sub := rig.runner.Events().Subscribe(id)
			defer sub.Close()
			var heard atomic.Int64
			done := make(chan struct{})
			go func() {
				defer close(done)
				heard.Store(int64(followText(rig.runner.Events(), sub, id)))
			}()
			start := time.Now()
			streamed, streamedList := rig.runTurn(t, id)
			took := time.Since(start)
			streamedNotes := rig.stmts.notifications()
			<-done
			require.Equal(t, int64(utf8.RuneCountInString(streamedAnswer)), heard.Load(), "the subscriber heard the answer whole")
			t.Logf("%s: unstreamed %d statements (%d notifications), streamed %d (%d) in %s",
				backend, plain, plainNotes, streamed, streamedNotes, took)
			require.Equal(t, plain-plainNotes, streamed-streamedNotes, "unstreamed:\n%s\nstreamed:\n%s", plainList, streamedList)
			if backend == dbtest.Postgres {
				require.Greater(t, streamedNotes, plainNotes, "pieces went to other replicas")
				windows := int(took/events.PieceEvery) + 2
				require.LessOrEqual(t, streamedNotes-plainNotes, windows, streamedList)
			} else {
				require.Zero(t, streamedNotes)
			}
		})
	}
}

// followText follows the turn's stream on bus until the turn's answer's
// step is done, and returns the characters of the last step's text held.
func followText(bus *events.Bus, sub *events.Subscription, turnID int) int {
	deadline := time.After(30 * time.Second)
	for {
		if tx, ok := bus.Text(turnID, 0); ok && tx.Step == 1 && tx.Done {
			return tx.Chars
		}
		select {
		case <-sub.Text:
		case <-time.After(10 * time.Millisecond):
		case <-deadline:
			return -1
		}
	}
}

// rebuiltEvent is one event of a finished turn's stream, as told again.
type rebuiltEvent struct {
	Kind    string `json:"kind"`
	Seq     string `json:"seq"`
	Writing *struct {
		Index int    `json:"index"`
		Name  string `json:"name"`
	} `json:"writing"`
	Delta *struct {
		Text   string `json:"text"`
		Offset int    `json:"offset"`
	} `json:"delta"`
}

// rebuilt follows a finished turn's events with deltas, after seq (all of
// them when it is empty), to their end.
func rebuilt(t *testing.T, h *harness, turnID, after string) []rebuiltEvent {
	t.Helper()
	vars := map[string]any{"t": turnID, "r": after == ""}
	if after != "" {
		vars["a"] = after
	}
	c, ctx := subscribeQuery(t, h, h.grant.Token, `subscription($t: ID!, $a: String, $r: Boolean) {
		turnEvents(turnId: $t, after: $a, replay: $r, deltas: true) { kind seq writing { index name } delta { text offset } } }`, vars)
	defer func() { _ = c.CloseNow() }()
	var out []rebuiltEvent
	for {
		var m wsMessage
		require.NoError(t, wsjson.Read(ctx, c, &m))
		if m.Type == "complete" {
			return out
		}
		require.Equal(t, "next", m.Type, "%s", m.Payload)
		var p struct {
			Data struct {
				TurnEvents rebuiltEvent `json:"turnEvents"`
			} `json:"data"`
			Errors []any `json:"errors"`
		}
		require.NoError(t, json.Unmarshal(m.Payload, &p))
		require.Empty(t, p.Errors)
		out = append(out, p.Data.TurnEvents)
	}
}

// TestStreamRebuiltFromStorage: a client that joins a finished turn, or
// resumes after any of its events, hears what a live one heard: each
// step's text, then the tool calls its model began writing (stored, not
// streamed, by then), then the step's end; and after any event exactly
// the events that followed it, none twice.
func TestStreamRebuiltFromStorage(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, d *db.DB) {
		h := newHarness(t, d, streamScript(t, 0))
		id := h.send(t, h.conversation(t, "calculator"), "What do 1,200 and 850 come to with a 20% markup?", "")
		require.Equal(t, turn.StatusCOMPLETED, h.wait(t, id).Status)

		all := rebuilt(t, h, id, "")
		var kinds []string
		for _, e := range all {
			kinds = append(kinds, e.Kind)
		}
		require.Equal(t, []string{"STATUS", "MODEL_CALL_STARTED", "TEXT_DELTA", "TOOL_CALL_WRITING", "MODEL_CALL_FINISHED",
			"TOOL_CALL_STARTED", "TOOL_CALL_FINISHED", "MODEL_CALL_STARTED", "TEXT_DELTA", "MODEL_CALL_FINISHED", "ANSWER", "STATUS"}, kinds)
		require.Equal(t, "Let me work that out.", all[2].Delta.Text)
		require.NotNil(t, all[3].Writing)
		require.Equal(t, 0, all[3].Writing.Index)
		require.Equal(t, "calculator", all[3].Writing.Name)
		require.Equal(t, streamedAnswer, all[8].Delta.Text)
		for i := 1; i < len(all); i++ {
			require.Less(t, all[i-1].Seq, all[i].Seq)
		}
		for i := range len(all) - 1 {
			rest := rebuilt(t, h, id, all[i].Seq)
			require.Equal(t, all[i+1:], rest, "after event %d (%s)", i, all[i].Kind)
		}
	})
}
