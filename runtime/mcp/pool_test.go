package mcp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"syscall"
	"testing"
	"unicode/utf8"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/ent/schematype"
	"github.com/toolgate/toolgate/runtime/mcp"
	"github.com/toolgate/toolgate/tools"
)

// protocols are the two kinds of server an application may run: a
// stateless one speaking the newest protocol, and one keeping sessions,
// whose ids it can forget, on the protocol before.
var protocols = []struct {
	name      string
	stateless bool
}{
	{"stateless", true},
	{"sessions", false},
}

const lookupSchema = `{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}`

var longDescription = strings.Repeat("Exports every deal of the pipeline. ", 10)

// app is an MCP server built with the SDK, served over HTTP. It counts the
// methods it receives and can be made to fail the way real servers do.
type app struct {
	stateless bool
	srv       *httptest.Server
	server    *sdk.Server

	mu        sync.Mutex
	counts    map[string]int
	failCall  int             // HTTP status answered to tools/call, when set
	seen      map[string]bool // session ids seen on requests
	forgotten map[string]bool // session ids answered 404 with a JSON-RPC body
	onBlock   func()          // run by the "block" tool before it waits
	release   chan struct{}   // closed when the test ends, to end "block"
}

// serve starts an application server listening on addr.
func serve(t testing.TB, addr string, stateless bool) *app {
	t.Helper()
	a := &app{
		stateless: stateless,
		counts:    map[string]int{},
		seen:      map[string]bool{},
		forgotten: map[string]bool{},
		release:   make(chan struct{}),
	}
	server := sdk.NewServer(&sdk.Implementation{Name: "crm", Version: "1"}, nil)
	server.AddReceivingMiddleware(func(next sdk.MethodHandler) sdk.MethodHandler {
		return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
			a.mu.Lock()
			a.counts[method]++
			a.mu.Unlock()
			return next(ctx, method, req)
		}
	})
	a.addTools(server)
	a.server = server
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return server }, &sdk.StreamableHTTPOptions{Stateless: stateless})

	l, err := net.Listen("tcp", addr)
	require.NoError(t, err)
	a.srv = httptest.NewUnstartedServer(a.wrap(h))
	require.NoError(t, a.srv.Listener.Close())
	a.srv.Listener = l
	a.srv.Start()
	t.Cleanup(a.shutdown)
	// Runs before the server closes, which waits for running handlers.
	t.Cleanup(func() { close(a.release) })
	return a
}

// shutdown stops the server as a process exit would, ending its sessions.
func (a *app) shutdown() {
	a.srv.Close()
	var sessions []*sdk.ServerSession
	for ss := range a.server.Sessions() {
		sessions = append(sessions, ss)
	}
	for _, ss := range sessions {
		_ = ss.Close()
	}
}

func (a *app) url() string { return a.srv.URL + "/mcp" }

func (a *app) count(method string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.counts[method]
}

// connects counts the sessions the server saw opened. A server keeping
// sessions first turns down the newest protocol's handshake.
func (a *app) connects() int {
	if a.stateless {
		return a.count("server/discover")
	}
	return a.count("notifications/initialized")
}

// forget makes the server answer 404, with a JSON-RPC error as some SDKs
// do, to every session it has seen so far.
func (a *app) forget() {
	a.mu.Lock()
	defer a.mu.Unlock()
	for id := range a.seen {
		a.forgotten[id] = true
	}
}

func (a *app) setFailCall(status int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.failCall = status
}

func (a *app) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		id := r.Header.Get("Mcp-Session-Id")

		a.mu.Lock()
		if id != "" {
			a.seen[id] = true
		}
		forgotten := a.forgotten[id]
		failCall := a.failCall
		a.mu.Unlock()

		switch {
		case forgotten:
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusNotFound)
			_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":"server-error","error":{"code":-32600,"message":"Not Found: Session has been terminated"}}`)
		case failCall != 0 && bytes.Contains(body, []byte(`"tools/call"`)):
			http.Error(w, http.StatusText(failCall), failCall)
		default:
			next.ServeHTTP(w, r)
		}
	})
}

func text(s string) *sdk.CallToolResult {
	return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: s}}}
}

func (a *app) addTools(s *sdk.Server) {
	schema := json.RawMessage(lookupSchema)
	s.AddTool(&sdk.Tool{
		Name:        "lookup",
		Description: "Find a contact by name.",
		InputSchema: schema,
		Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true},
	}, func(_ context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		var args struct{ Name string }
		if err := json.Unmarshal(req.Params.Arguments, &args); err != nil {
			return nil, err
		}
		return text("found " + args.Name), nil
	})
	s.AddTool(&sdk.Tool{
		Name:        "upsert",
		Description: "Create or update a contact.",
		InputSchema: schema,
		Annotations: &sdk.ToolAnnotations{IdempotentHint: true},
	}, func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		return &sdk.CallToolResult{
			Content:           []sdk.Content{&sdk.TextContent{Text: `{"id":7}`}},
			StructuredContent: map[string]any{"id": 7, "name": "Ada"},
		}, nil
	})
	s.AddTool(&sdk.Tool{
		Name:        "send",
		Description: "Send a message.",
		InputSchema: schema,
	}, func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "queued"}, &sdk.TextContent{Text: "id 42"}}}, nil
	})
	destructive := true
	s.AddTool(&sdk.Tool{
		Name:        "purge",
		Title:       "Purge old contacts",
		InputSchema: schema,
		Annotations: &sdk.ToolAnnotations{DestructiveHint: &destructive},
	}, func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		return text("purged"), nil
	})
	s.AddTool(&sdk.Tool{
		Name:        "fail",
		Description: "Always fails.",
		InputSchema: schema,
		Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true},
	}, func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		res := text("no contact named Bob")
		res.IsError = true
		return res, nil
	})
	s.AddTool(&sdk.Tool{
		Name:        "chart",
		Description: "Draw a chart.",
		InputSchema: schema,
	}, func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		return &sdk.CallToolResult{Content: []sdk.Content{
			&sdk.TextContent{Text: "pipeline"},
			&sdk.ImageContent{Data: []byte{0x89, 'P', 'N', 'G'}, MIMEType: "image/png"},
		}}, nil
	})
	s.AddTool(&sdk.Tool{
		Name:        "export",
		Description: longDescription,
		InputSchema: schema,
	}, func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		return text("exported"), nil
	})
	s.AddTool(&sdk.Tool{
		Name:        "block",
		Description: "Waits until cancelled.",
		InputSchema: schema,
	}, func(ctx context.Context, _ *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		a.mu.Lock()
		onBlock := a.onBlock
		a.mu.Unlock()
		onBlock()
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-a.release:
			return text("released"), nil
		}
	})
	s.AddTool(&sdk.Tool{Name: "hidden", Description: "Not allowed.", InputSchema: schema},
		func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return text("hidden"), nil
		})
}

type testBundle struct {
	pool      *mcp.Pool
	transport *http.Transport
	app       *app
	crm       mcp.Application
}

func setup(t *testing.T, stateless bool) *testBundle {
	t.Helper()
	a := serve(t, "127.0.0.1:0", stateless)
	transport := &http.Transport{}
	pool := mcp.NewPool(&http.Client{Transport: transport})
	t.Cleanup(pool.Close)
	return &testBundle{
		pool:      pool,
		transport: transport,
		app:       a,
		crm: mcp.Application{
			Name:         "crm",
			URL:          a.url(),
			AllowedTools: []string{"lookup", "upsert", "send", "purge", "ghost", "fail", "chart", "export", "block"},
		},
	}
}

// stop closes the server and returns its address.
func (b *testBundle) stop() string {
	addr := b.app.srv.Listener.Addr().String()
	b.app.shutdown()
	// The client notices a server's closed connections a moment later; a
	// request sent on one in that moment may have reached the server, and
	// these tests are about what happens after.
	b.transport.CloseIdleConnections()
	return addr
}

// restart starts a new server, with no memory of the old one's sessions,
// at the same address.
func (b *testBundle) restart(t *testing.T) {
	t.Helper()
	b.app = serve(t, b.stop(), b.app.stateless)
}

func TestListOffersAllowedToolsWithServerSchemas(t *testing.T) {
	t.Parallel()
	for _, proto := range protocols {
		t.Run(proto.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, proto.stateless)
			got, err := b.pool.List(t.Context(), b.crm)
			require.NoError(t, err)
			require.Equal(t, []string{"ghost"}, got.Missing)

			want := []struct {
				name        string
				description string
				effect      tools.Effect
			}{
				{"crm__lookup", "Find a contact by name.", tools.EffectRead},
				{"crm__upsert", "Create or update a contact.", tools.EffectIdempotent},
				{"crm__send", "Send a message.", tools.EffectWrite},
				{"crm__purge", "Purge old contacts", tools.EffectWrite},
				{"crm__fail", "Always fails.", tools.EffectRead},
				{"crm__chart", "Draw a chart.", tools.EffectWrite},
				{"crm__export", strings.Repeat("Exports every deal of the pipeline. ", 5) + "Exports every deal…", tools.EffectWrite},
				{"crm__block", "Waits until cancelled.", tools.EffectWrite},
			}
			require.Len(t, got.Definitions, len(want))
			for i, w := range want {
				d := got.Definitions[i]
				require.Equal(t, w.name, d.Name)
				require.Equal(t, w.effect, d.Effect, d.Name)
				require.Equal(t, mcp.Family, d.Family)
				require.Equal(t, tools.OfferAllowlisted, d.Offered)
				require.Equal(t, tools.PreviewLarge, d.Preview)
				require.JSONEq(t, lookupSchema, string(d.Schema), d.Name)
				require.Equal(t, w.description, d.Description)
				require.LessOrEqual(t, utf8.RuneCountInString(d.Description), 200)
			}

			defs, err := b.pool.Tools(t.Context(), b.crm)
			require.NoError(t, err)
			require.Equal(t, got.Definitions, defs)
		})
	}
}

func TestListAsksOncePerSession(t *testing.T) {
	t.Parallel()
	for _, proto := range protocols {
		t.Run(proto.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, proto.stateless)
			var wg sync.WaitGroup
			errs := make([]error, 8)
			for i := range errs {
				wg.Go(func() {
					_, errs[i] = b.pool.Tools(t.Context(), b.crm)
				})
			}
			wg.Wait()
			for _, err := range errs {
				require.NoError(t, err)
			}
			// Another application on the same server shares the session.
			other := mcp.Application{Name: "sales", URL: b.crm.URL, AllowedTools: []string{"lookup"}}
			defs, err := b.pool.Tools(t.Context(), other)
			require.NoError(t, err)
			require.Equal(t, "sales__lookup", defs[0].Name)
			_, err = b.pool.Call(t.Context(), b.crm, "lookup", json.RawMessage(`{"name":"Ada"}`))
			require.NoError(t, err)
			require.Equal(t, 1, b.app.count("tools/list"))
			require.Equal(t, 1, b.app.connects())

			// A failure drops the session; the next one lists again, once.
			b.restart(t)
			b.app.setFailCall(http.StatusInternalServerError)
			_, err = b.pool.Call(t.Context(), b.crm, "lookup", json.RawMessage(`{}`))
			require.True(t, mcp.MayHaveReached(err), "%v", err)
			b.app.setFailCall(0)
			for range 3 {
				_, err = b.pool.Tools(t.Context(), b.crm)
				require.NoError(t, err)
			}
			require.Equal(t, 1, b.app.count("tools/list"))
		})
	}
}

func TestListAllowingNothingStaysOffline(t *testing.T) {
	t.Parallel()
	b := setup(t, true)
	b.crm.AllowedTools = nil
	got, err := b.pool.List(t.Context(), b.crm)
	require.NoError(t, err)
	require.Empty(t, got.Definitions)
	require.Empty(t, got.Missing)
	require.Equal(t, 0, b.app.connects())
}

func TestCallResults(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		give string
		want mcp.Result
	}{
		{"text", "lookup", mcp.Result{Content: []byte("found Ada"), Kind: schematype.KindText}},
		{"joined text", "send", mcp.Result{Content: []byte("queued\nid 42"), Kind: schematype.KindText}},
		{"structured", "upsert", mcp.Result{Content: []byte(`{"id":7,"name":"Ada"}`), Kind: schematype.KindJSON}},
		{"tool failure", "fail", mcp.Result{Content: []byte("no contact named Bob"), IsError: true, Kind: schematype.KindText}},
		{"media", "chart", mcp.Result{
			Content: []byte(`[{"type":"text","text":"pipeline"},{"type":"image","mimeType":"image/png","data":"iVBORw=="}]`),
			Kind:    schematype.KindMedia,
		}},
	}
	for _, proto := range protocols {
		t.Run(proto.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, proto.stateless)
			for _, tt := range tests {
				got, err := b.pool.Call(t.Context(), b.crm, tt.give, json.RawMessage(`{"name":"Ada"}`))
				require.NoError(t, err, tt.name)
				require.Equal(t, tt.want.Kind, got.Kind, tt.name)
				require.Equal(t, tt.want.IsError, got.IsError, tt.name)
				require.Equal(t, string(tt.want.Content), string(got.Content), tt.name)
			}
			require.Equal(t, len(tests), b.app.count("tools/call"))
			require.Equal(t, 1, b.app.connects())
		})
	}
}

func TestCallRefusesBeforeSending(t *testing.T) {
	t.Parallel()
	b := setup(t, true)
	_, err := b.pool.Call(t.Context(), b.crm, "hidden", nil)
	require.ErrorIs(t, err, mcp.ErrNotAllowed)
	require.ErrorContains(t, err, "crm__hidden")

	_, err = b.pool.Call(t.Context(), b.crm, "lookup", json.RawMessage(`{"name":`))
	require.ErrorContains(t, err, "arguments are not JSON")

	bad := b.crm
	bad.Name = "CRM"
	_, err = b.pool.Call(t.Context(), bad, "lookup", nil)
	require.ErrorContains(t, err, `application name "CRM"`)

	require.Equal(t, 0, b.app.connects())
}

func TestCallServerRefusal(t *testing.T) {
	t.Parallel()
	b := setup(t, false)
	// "ghost" is allowed but the server has no such tool: it answers with a
	// JSON-RPC error, which no retry would change.
	_, err := b.pool.Call(t.Context(), b.crm, "ghost", nil)
	require.ErrorContains(t, err, `unknown tool "ghost"`)
	require.False(t, mcp.NeverReached(err))
	require.False(t, mcp.MayHaveReached(err))

	// The session survived the refusal.
	_, err = b.pool.Call(t.Context(), b.crm, "lookup", json.RawMessage(`{"name":"Ada"}`))
	require.NoError(t, err)
	require.Equal(t, 1, b.app.connects())
}

func TestCallServerDown(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	url := "http://" + l.Addr().String() + "/mcp"
	require.NoError(t, l.Close())

	pool := mcp.NewPool(&http.Client{Transport: &http.Transport{}})
	t.Cleanup(pool.Close)
	crm := mcp.Application{Name: "crm", URL: url, AllowedTools: []string{"lookup"}}

	_, err = pool.Call(t.Context(), crm, "lookup", nil)
	require.True(t, mcp.NeverReached(err), "%v", err)
	require.False(t, mcp.MayHaveReached(err))
	require.ErrorIs(t, err, syscall.ECONNREFUSED)

	_, err = pool.Tools(t.Context(), crm)
	require.True(t, mcp.NeverReached(err), "%v", err)
}

func TestCallHTTPFailuresMayHaveReached(t *testing.T) {
	t.Parallel()
	for _, proto := range protocols {
		for _, status := range []int{http.StatusInternalServerError, http.StatusBadGateway, http.StatusServiceUnavailable} {
			t.Run(proto.name+"/"+http.StatusText(status), func(t *testing.T) {
				t.Parallel()
				b := setup(t, proto.stateless)
				_, err := b.pool.Call(t.Context(), b.crm, "lookup", json.RawMessage(`{"name":"Ada"}`))
				require.NoError(t, err)

				b.app.setFailCall(status)
				_, err = b.pool.Call(t.Context(), b.crm, "lookup", json.RawMessage(`{"name":"Ada"}`))
				require.True(t, mcp.MayHaveReached(err), "%v", err)
				require.False(t, mcp.NeverReached(err))

				b.app.setFailCall(0)
				got, err := b.pool.Call(t.Context(), b.crm, "lookup", json.RawMessage(`{"name":"Ada"}`))
				require.NoError(t, err)
				require.Equal(t, "found Ada", string(got.Content))
			})
		}
	}
}

func TestCallCancelledWhileRunningMayHaveReached(t *testing.T) {
	t.Parallel()
	b := setup(t, false)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	b.app.mu.Lock()
	b.app.onBlock = cancel
	b.app.mu.Unlock()

	_, err := b.pool.Call(ctx, b.crm, "block", json.RawMessage(`{}`))
	require.True(t, mcp.MayHaveReached(err), "%v", err)
	require.ErrorIs(t, err, context.Canceled)
	require.Equal(t, 1, b.app.count("tools/call"))

	// Giving up on one call keeps the session for the next.
	_, err = b.pool.Call(t.Context(), b.crm, "lookup", json.RawMessage(`{"name":"Ada"}`))
	require.NoError(t, err)
	require.Equal(t, 1, b.app.connects())
}

func TestReconnect(t *testing.T) {
	t.Parallel()
	for _, proto := range protocols {
		t.Run(proto.name, func(t *testing.T) {
			t.Parallel()
			tests := []struct {
				name string
				gone bool // a server keeping sessions turns the first call back: session unknown
				give func(*testing.T, *testBundle)
			}{
				{"server restarted", true, func(t *testing.T, b *testBundle) { b.restart(t) }},
				{"server forgot the session", true, func(t *testing.T, b *testBundle) { b.app.forget() }},
				{"server down, then back", false, func(t *testing.T, b *testBundle) {
					addr := b.stop()
					_, err := b.pool.Call(t.Context(), b.crm, "send", json.RawMessage(`{}`))
					require.True(t, mcp.NeverReached(err), "%v", err)
					require.ErrorIs(t, err, syscall.ECONNREFUSED)
					b.app = serve(t, addr, b.app.stateless)
				}},
			}
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					t.Parallel()
					b := setup(t, proto.stateless)
					_, err := b.pool.Tools(t.Context(), b.crm)
					require.NoError(t, err)

					tt.give(t, b)

					// A session the server no longer knows turns the call
					// back unrun; the pool makes one attempt, and the
					// caller's retry sends it again on a new session.
					got, err := b.pool.Call(t.Context(), b.crm, "send", json.RawMessage(`{}`))
					if tt.gone && !proto.stateless {
						require.True(t, mcp.SessionGone(err), "%v", err)
						require.True(t, mcp.NeverReached(err))
						require.Zero(t, b.app.count("tools/call"))
						got, err = b.pool.Call(t.Context(), b.crm, "send", json.RawMessage(`{}`))
					}
					// A write succeeds then: whatever broke, the call
					// itself reached the server only once.
					require.NoError(t, err)
					require.Equal(t, "queued\nid 42", string(got.Content))
					require.Equal(t, 1, b.app.count("tools/call"))
					defs, err := b.pool.Tools(t.Context(), b.crm)
					require.NoError(t, err)
					require.Len(t, defs, 8)
				})
			}
		})
	}
}

func TestClose(t *testing.T) {
	t.Parallel()
	b := setup(t, false)
	_, err := b.pool.Tools(t.Context(), b.crm)
	require.NoError(t, err)
	b.pool.Close()

	_, err = b.pool.Call(t.Context(), b.crm, "lookup", nil)
	require.ErrorIs(t, err, mcp.ErrClosed)
	require.False(t, mcp.NeverReached(err))
	_, err = b.pool.Tools(t.Context(), b.crm)
	require.ErrorIs(t, err, mcp.ErrClosed)
	require.Equal(t, 1, b.app.connects())
}

func TestErrorHelpers(t *testing.T) {
	t.Parallel()
	tests := []struct {
		give      error
		wantNever bool
		wantMay   bool
	}{
		{mcp.ErrNeverReached, true, false},
		{mcp.ErrMayHaveReached, false, true},
		{errors.Join(errors.New("x"), mcp.ErrMayHaveReached), false, true},
		{context.Canceled, false, false},
		{nil, false, false},
	}
	for _, tt := range tests {
		require.Equal(t, tt.wantNever, mcp.NeverReached(tt.give), "%v", tt.give)
		require.Equal(t, tt.wantMay, mcp.MayHaveReached(tt.give), "%v", tt.give)
	}
}

// BenchmarkCall measures a call on an open session; the figures include
// the in-process server's share.
func BenchmarkCall(b *testing.B) {
	for _, proto := range protocols {
		b.Run(proto.name, func(b *testing.B) {
			a := serve(b, "127.0.0.1:0", proto.stateless)
			pool := mcp.NewPool(&http.Client{Transport: &http.Transport{}})
			b.Cleanup(pool.Close)
			crm := mcp.Application{Name: "crm", URL: a.url(), AllowedTools: []string{"lookup"}}
			args := json.RawMessage(`{"name":"Ada"}`)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := pool.Call(b.Context(), crm, "lookup", args); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkToolsCached(b *testing.B) {
	a := serve(b, "127.0.0.1:0", true)
	pool := mcp.NewPool(&http.Client{Transport: &http.Transport{}})
	b.Cleanup(pool.Close)
	crm := mcp.Application{Name: "crm", URL: a.url(), AllowedTools: []string{"lookup", "upsert", "send", "purge"}}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := pool.Tools(b.Context(), crm); err != nil {
			b.Fatal(err)
		}
	}
}
