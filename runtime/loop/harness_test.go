package loop_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/trace"

	"github.com/toolgate/toolgate/db"
	"github.com/toolgate/toolgate/db/dbtest"
	"github.com/toolgate/toolgate/ent"
	"github.com/toolgate/toolgate/ent/tenancy"
	"github.com/toolgate/toolgate/ent/turn"
	"github.com/toolgate/toolgate/graph"
	"github.com/toolgate/toolgate/graph/auth"
	"github.com/toolgate/toolgate/graph/gid"
	"github.com/toolgate/toolgate/runtime/dispatch"
	"github.com/toolgate/toolgate/runtime/loop"
	"github.com/toolgate/toolgate/runtime/mcp"
	"github.com/toolgate/toolgate/runtime/model"
	"github.com/toolgate/toolgate/runtime/retry"
	"github.com/toolgate/toolgate/runtime/scope"
	"github.com/toolgate/toolgate/tools/code"
	"github.com/toolgate/toolgate/tools/document"
	"github.com/toolgate/toolgate/tools/embed"
	"github.com/toolgate/toolgate/tools/registry"
	"github.com/toolgate/toolgate/tools/web"
)

// harness is the whole server (API and runtime) over a real database, with
// the model provider swapped for the test's.
type harness struct {
	cfg    loop.Config
	signer *scope.Signer
	db     *db.DB
	client *ent.Client
	srv    *httptest.Server
	runner *loop.Runner
	disp   *dispatch.Dispatcher
	grant  *auth.Grant
	now    time.Time
	// page is the URL of a page the web tools read, on loopback; longPage
	// one with more text than read_page's largest window.
	page, longPage string
	// search and site are the web tools' search provider and site: each
	// can be made to answer 503 and counts what it was asked.
	search, site *backend
	// reg holds the API's and the runtime's metrics, served on /metrics.
	reg *prometheus.Registry
}

type option func(*loop.Config)

func withMaxSteps(n int) option { return func(c *loop.Config) { c.MaxSteps = n } }

// withTracer traces the runtime, and the API it calls, with tp.
func withTracer(tp trace.TracerProvider) option {
	return func(c *loop.Config) { c.TracerProvider = tp }
}

func newHarness(t testing.TB, d *db.DB, p model.Provider, opts ...option) *harness {
	t.Helper()
	return newHarnessWith(t, d, p, embed.NewLocal(), opts...)
}

// newHarnessWith is newHarness with the API's embedder e.
func newHarnessWith(t testing.TB, d *db.DB, p model.Provider, e embed.Embedder, opts ...option) *harness {
	t.Helper()
	ctx := tenancy.System(context.Background())
	h := &harness{db: d, client: d.Client(), now: time.Date(2026, 11, 29, 19, 30, 42, 0, time.UTC), reg: prometheus.NewRegistry()}
	var err error
	h.grant, err = auth.Bootstrap(ctx, h.client, "Acme", "Ada Lovelace", "Research")
	require.NoError(t, err)
	secret, err := scope.GenerateSecret()
	require.NoError(t, err)
	signer, err := scope.NewSigner(secret, nil, 10*time.Minute)
	require.NoError(t, err)
	h.signer = signer

	var api http.Handler
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { api.ServeHTTP(w, r) }))
	t.Cleanup(h.srv.Close)
	apps := mcp.NewPool(nil)
	t.Cleanup(apps.Close)
	h.disp = dispatch.New(h.srv.URL+"/graphql", h.srv.Client(), apps)
	h.disp.Retry.Sleep = func(context.Context, time.Duration) error { return nil }
	h.disp.Client = h.client
	webService := h.webService(t)
	pages := reviewBrowser()
	cfg := loop.Config{
		Client: h.client, Provider: p, Signer: signer, Dispatcher: h.disp, Apps: apps,
		Tools: registry.All(), Now: func() time.Time { return h.now }, EncodeID: gid.Encode, Queue: d.Queue(),
		WebProvider: true, Embeddings: true, Registerer: h.reg, AttributionKey: []byte("the harness's attribution key, 32+ bytes"),
		Browser: pages != nil,
	}
	for _, o := range opts {
		o(&cfg)
	}
	h.cfg = cfg
	h.runner, err = loop.New(cfg)
	require.NoError(t, err)
	require.NoError(t, h.runner.Open())
	t.Cleanup(func() { _ = h.runner.Close(context.Background()) })
	sandbox := code.New(os.Args[0])
	t.Cleanup(func() { _ = sandbox.Close() })
	docs, err := document.New(document.Config{DB: d, Embedder: e})
	require.NoError(t, err)
	api = graph.NewServer(graph.Config{DB: d, Signer: signer, Runner: h.runner, Sandbox: sandbox, Web: webService, Documents: docs, Registry: h.reg,
		TracerProvider: cfg.TracerProvider, Browser: pages})
	return h
}

// webService is a SearXNG instance and a site on loopback, behind the web
// service the API runs the web tools with (offered once the organisation
// enables them). Its requests go through the runtime's retry loop, as the
// server wires it, without the waits.
func (h *harness) webService(t testing.TB) *web.Service {
	t.Helper()
	h.site, h.search = &backend{}, &backend{}
	pages := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/robots.txt" {
			http.NotFound(w, r)
			return
		}
		if h.site.refuse(w) {
			return
		}
		switch r.URL.Path {
		case "/gone":
			http.NotFound(w, r)
		case "/long":
			_, _ = io.WriteString(w, "<html><head><title>Tide tables</title></head><body><article><h1>Tide tables</h1>")
			for i := range 120 {
				_, _ = fmt.Fprintf(w, "<p>Paragraph %03d: high water at the harbour comes about fifty minutes later each day than the day before.</p>", i)
			}
			_, _ = io.WriteString(w, "</article></body></html>")
		default:
			_, _ = io.WriteString(w, `<html><head><title>Tides</title></head><body><article><h1>Tides</h1><p>Tides are the rise and fall of sea levels, `+
				`caused by the Moon and the Sun; most places see two high tides and two low tides each day.</p></article></body></html>`)
		}
	}))
	t.Cleanup(pages.Close)
	h.page, h.longPage = pages.URL+"/tides", pages.URL+"/long"
	searx := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h.search.refuse(w) {
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"query": r.URL.Query().Get("q"),
			"results": []map[string]any{{"url": h.page, "title": "Tides", "content": "rise and fall", "engine": "brave"}}})
	}))
	t.Cleanup(searx.Close)
	svc, err := web.New(web.Config{Provider: web.SearXNG, URL: searx.URL, AllowPrivate: "127.0.0.1/32", Client: searx.Client(),
		Retry: retry.Backend(retry.Policy{Sleep: retry.NoWait})})
	require.NoError(t, err)
	return svc
}

// backend is a fake backend's state: how many requests it was sent, and
// how many more it answers 503 before it answers again.
type backend struct {
	requests atomic.Int32
	down     atomic.Int32
}

// refuse counts a request and answers it 503 while the backend is down.
func (b *backend) refuse(w http.ResponseWriter) bool {
	b.requests.Add(1)
	for {
		n := b.down.Load()
		if n <= 0 {
			return false
		}
		if b.down.CompareAndSwap(n, n-1) {
			http.Error(w, "temporarily unavailable", http.StatusServiceUnavailable)
			return true
		}
	}
}

func (h *harness) gql(t testing.TB, query string, vars map[string]any) map[string]any {
	t.Helper()
	data, errs := h.try(t, query, vars)
	require.Empty(t, errs)
	return data
}

func (h *harness) try(t testing.TB, query string, vars map[string]any) (map[string]any, []any) {
	t.Helper()
	body, err := json.Marshal(map[string]any{"query": query, "variables": vars})
	require.NoError(t, err)
	req, err := http.NewRequest(http.MethodPost, h.srv.URL+"/graphql", bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+h.grant.Token)
	res, err := h.srv.Client().Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	var out struct {
		Data   map[string]any `json:"data"`
		Errors []any          `json:"errors"`
	}
	require.NoError(t, json.Unmarshal(raw, &out), string(raw))
	return out.Data, out.Errors
}

// conversation creates an agent with the given optional tools and starts a
// conversation with it.
func (h *harness) conversation(t testing.TB, tools ...string) string {
	t.Helper()
	if tools == nil {
		tools = []string{}
	}
	a := h.gql(t, `mutation($t: [String!]) { createAgent(input: {name: "Analyst", instructions: "Be exact.", tools: $t}) { id } }`,
		map[string]any{"t": tools})
	c := h.gql(t, `mutation($a: ID!) { startConversation(input: {agentId: $a, title: "t"}) { id } }`,
		map[string]any{"a": a["createAgent"].(map[string]any)["id"]})
	return c["startConversation"].(map[string]any)["id"].(string)
}

// send sends a message and returns the turn's id.
func (h *harness) send(t testing.TB, conv, text, zone string) string {
	t.Helper()
	vars := map[string]any{"c": conv, "x": text}
	if zone != "" {
		vars["z"] = zone
	}
	d := h.gql(t, `mutation($c: ID!, $x: String!, $z: String) { sendMessage(input: {conversationId: $c, text: $x, timeZone: $z}) { id status } }`, vars)
	m := d["sendMessage"].(map[string]any)
	require.Equal(t, "RUNNING", m["status"])
	return m["id"].(string)
}

// wait waits until the turn leaves RUNNING and returns it.
func (h *harness) wait(t testing.TB, turnID string) *ent.Turn {
	t.Helper()
	id, err := gid.Decode(turnID)
	require.NoError(t, err)
	var got *ent.Turn
	require.Eventually(t, func() bool {
		got = h.client.Turn.GetX(tenancy.System(context.Background()), id)
		return got.Status != turn.StatusRUNNING && !h.runner.Running(id)
	}, 20*time.Second, 5*time.Millisecond)
	return got
}

func (h *harness) calls(t testing.TB, turnID string) []*ent.ToolCall {
	t.Helper()
	id, err := gid.Decode(turnID)
	require.NoError(t, err)
	return h.client.Turn.GetX(tenancy.System(context.Background()), id).QueryToolCalls().Order(ent.Asc("position")).AllX(tenancy.System(context.Background()))
}

// scripted is a model provider that plays answers in order and records the
// requests. It is the in-process stand-in for a provider; the wire
// protocols are driven through the real SDKs in the provider tests below.
// A compaction call (a long conversation) is answered apart, with a
// summary of its own, and kept in summaries: it plays no answer and is not
// among the requests.
type scripted struct {
	mu        sync.Mutex
	answers   []model.Response
	requests  []model.Request
	summaries []model.Request
	block     chan struct{} // when set, Complete waits for it or the context
	// blockCall, when set, makes only that call (1 for the first) wait.
	blockCall int
}

func (s *scripted) Name() string { return "scripted" }

func (s *scripted) Complete(ctx context.Context, req model.Request) (*model.Response, error) {
	s.mu.Lock()
	if req.Kind == model.KindSummary {
		defer s.mu.Unlock()
		s.summaries = append(s.summaries, req)
		return &model.Response{Model: "gpt-4.1", Text: "The person and the assistant worked through the turns named."}, nil
	}
	s.requests = append(s.requests, req)
	n := len(s.requests)
	block := s.block
	if s.blockCall != 0 && n != s.blockCall {
		block = nil
	}
	s.mu.Unlock()
	if block != nil {
		select {
		case <-block:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.answers) == 0 {
		return nil, fmt.Errorf("script exhausted at call %d", n)
	}
	a := s.answers[0]
	if len(s.answers) > 1 {
		s.answers = s.answers[1:]
	}
	a.Model = "gpt-4.1"
	return &a, nil
}

func (s *scripted) request(i int) model.Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests[i]
}

func (s *scripted) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.requests)
}

func call(id, name, args string) model.ToolCall {
	return model.ToolCall{ID: id, Name: name, Arguments: json.RawMessage(args)}
}

func lastTool(req model.Request) model.Message {
	for i := len(req.Messages) - 1; i >= 0; i-- {
		if req.Messages[i].Role == model.RoleTool {
			return req.Messages[i]
		}
	}
	return model.Message{}
}

func each(t *testing.T, f func(t *testing.T, d *db.DB)) { dbtest.Each(t, f) }

// mint returns a scope token for a turn, as the runtime mints it.
func (h *harness) mint(t testing.TB, turnID, convID int, tools []string) string {
	t.Helper()
	conv := h.client.Conversation.GetX(tenancy.System(context.Background()), convID)
	tok, err := h.signer.Mint(scope.Claims{OrganizationID: conv.OrganizationID, UserID: conv.UserID, AgentID: conv.AgentID,
		ConversationID: convID, TurnID: turnID, Tools: tools})
	require.NoError(t, err)
	return tok
}
