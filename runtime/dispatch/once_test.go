package dispatch_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/ent/schematype"
	"github.com/toolgate/toolgate/runtime/dispatch"
	"github.com/toolgate/toolgate/runtime/mcp"
)

// failing is an MCP application, built with the SDK and keeping sessions,
// that fails every tools/call the way it is told to and counts how many
// reached it and how many its tools ran.
type failing struct {
	mu   sync.Mutex
	mode string // "", "forget" (404: session unknown), "forget once", "unavailable" (503), "drop" (ran, no answer)
	sent map[string]int
	ran  map[string]int
}

func (f *failing) set(mode string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.mode, f.sent, f.ran = mode, map[string]int{}, map[string]int{}
}

func (f *failing) counts(tool string) (sent, ran int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.sent[tool], f.ran[tool]
}

func serveFailing(t *testing.T) (*failing, string) {
	f := &failing{}
	f.set("")
	server := sdk.NewServer(&sdk.Implementation{Name: "crm", Version: "1"}, nil)
	schema := json.RawMessage(`{"type":"object","properties":{"name":{"type":"string"}}}`)
	tool := func(name string) sdk.ToolHandler {
		return func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			f.mu.Lock()
			f.ran[name]++
			f.mu.Unlock()
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "done"}}}, nil
		}
	}
	server.AddTool(&sdk.Tool{Name: "lookup", InputSchema: schema, Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true}}, tool("lookup"))
	server.AddTool(&sdk.Tool{Name: "send", InputSchema: schema}, tool("send"))
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return server }, nil)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytesReader(body))
		var msg struct {
			Method string `json:"method"`
			Params struct {
				Name string `json:"name"`
			} `json:"params"`
		}
		if r.Method != http.MethodPost || json.Unmarshal(body, &msg) != nil || msg.Method != "tools/call" {
			h.ServeHTTP(w, r)
			return
		}
		f.mu.Lock()
		f.sent[msg.Params.Name]++
		mode := f.mode
		f.mu.Unlock()
		switch mode {
		case "forget", "forget once":
			if mode == "forget once" {
				f.mu.Lock()
				f.mode = ""
				f.mu.Unlock()
			}
			http.Error(w, "session not found", http.StatusNotFound)
		case "unavailable":
			http.Error(w, "unavailable", http.StatusServiceUnavailable)
		case "drop":
			// The tool runs; its answer never leaves.
			h.ServeHTTP(httptest.NewRecorder(), r)
			panic(http.ErrAbortHandler)
		default:
			h.ServeHTTP(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return f, srv.URL + "/mcp"
}

// A call is retried at one level, the dispatcher's: however the server
// keeps failing, a read is sent at most the policy's attempts, and a
// write that may have reached the server is never sent twice. A session
// the server forgot is reconnected at once, by the same policy.
func TestApplicationCallRetriedOnce(t *testing.T) {
	t.Parallel()
	f, url := serveFailing(t)
	pool := mcp.NewPool(nil)
	t.Cleanup(pool.Close)
	app := mcp.Application{Name: "crm", URL: url, AllowedTools: []string{"lookup", "send"}}
	defs, err := pool.Tools(t.Context(), app)
	require.NoError(t, err)
	s := scope(defs...)
	s.Apps = map[string]mcp.Application{"crm": app}
	d := dispatch.New("http://unused.invalid", http.DefaultClient, pool)
	rec := &recorder{}
	d.Retry.Sleep = rec.sleep
	attempts := 4 // the dispatcher's default policy
	call := func(tool string) dispatch.Result {
		return d.Do(t.Context(), s, dispatch.Call{ID: tool, Name: "crm__" + tool, Arguments: json.RawMessage(`{"name":"Ada"}`)})
	}

	tests := []struct {
		mode, tool string
		outcome    schematype.Outcome
		sent, ran  int
	}{
		// Turned back before running: sent again, a write too, at once.
		{"forget", "lookup", schematype.OutcomeOutage, attempts, 0},
		{"forget", "send", schematype.OutcomeOutage, attempts, 0},
		// May have reached it: a read again, a write never.
		{"unavailable", "lookup", schematype.OutcomeOutage, attempts, 0},
		{"unavailable", "send", schematype.OutcomeMayHaveRun, 1, 0},
		{"drop", "lookup", schematype.OutcomeOutage, attempts, attempts},
		{"drop", "send", schematype.OutcomeMayHaveRun, 1, 1},
	}
	for _, tt := range tests {
		f.set(tt.mode)
		rec.mu.Lock()
		rec.waits = nil
		rec.mu.Unlock()
		res := call(tt.tool)
		sent, ran := f.counts(tt.tool)
		require.Equal(t, tt.outcome, res.Outcome, "%s %s: %s", tt.mode, tt.tool, res.Message)
		require.Equal(t, tt.sent, sent, "%s %s: requests that reached the server", tt.mode, tt.tool)
		require.Equal(t, tt.sent, res.Attempts, "%s %s: attempts counted", tt.mode, tt.tool)
		require.Equal(t, tt.ran, ran, "%s %s: times the tool ran", tt.mode, tt.tool)
		if tt.mode == "forget" {
			require.Empty(t, rec.waits, "a reconnection waits for nothing")
		}
	}

	// A session forgotten once: the write goes again on a new session and
	// runs once.
	f.set("forget once")
	res := call("send")
	require.Equal(t, schematype.OutcomeHits, res.Outcome, res.Message)
	sent, ran := f.counts("send")
	require.Equal(t, 2, sent)
	require.Equal(t, 1, ran)
}
