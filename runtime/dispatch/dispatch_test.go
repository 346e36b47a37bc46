package dispatch_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/ent/schematype"
	"github.com/toolgate/toolgate/runtime/dispatch"
	"github.com/toolgate/toolgate/runtime/mcp"
	"github.com/toolgate/toolgate/tools"
)

// backend is a stand-in for the GraphQL API at the network edge: it answers
// each attempt from a list of canned replies and records what it got.
type backend struct {
	mu      sync.Mutex
	replies []reply
	got     []request
	srv     *httptest.Server
}

type reply struct {
	status     int
	retryAfter string
	body       string
	delay      time.Duration
}

type request struct {
	auth, key string
	vars      map[string]any
}

func newBackend(t *testing.T, replies ...reply) *backend {
	b := &backend{replies: replies}
	b.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		var body struct {
			Variables map[string]any `json:"variables"`
		}
		_ = json.Unmarshal(raw, &body)
		b.mu.Lock()
		b.got = append(b.got, request{auth: r.Header.Get("Authorization"), key: r.Header.Get("Idempotency-Key"), vars: body.Variables})
		rep := b.replies[min(len(b.got), len(b.replies))-1]
		b.mu.Unlock()
		if rep.delay > 0 {
			select {
			case <-time.After(rep.delay):
			case <-r.Context().Done():
				return
			}
		}
		if rep.retryAfter != "" {
			w.Header().Set("Retry-After", rep.retryAfter)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(rep.status)
		fmt.Fprint(w, rep.body)
	}))
	t.Cleanup(b.srv.Close)
	return b
}

func (b *backend) requests() []request {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]request(nil), b.got...)
}

func ok(body string) reply { return reply{status: 200, body: body} }

func status(code int) reply { return reply{status: code, body: `{"errors":[{"message":"busy"}]}`} }

var queriesSchema = json.RawMessage(`{"type":"object","properties":{"queries":{"type":"array","items":{"type":"string"},"maxItems":5}},"required":["queries"],"additionalProperties":false}`)

func def(name string, effect tools.Effect) tools.Definition {
	return tools.Definition{
		Name: name, Family: "test", Schema: queriesSchema, Effect: effect, Preview: tools.PreviewLarge,
		Operation: `query($conversationId: ID, $queries: [String!]!) { find(conversationId: $conversationId, queries: $queries) { hits } }`,
		Field:     "find",
	}
}

type recorder struct {
	mu    sync.Mutex
	waits []time.Duration
}

func (r *recorder) sleep(_ context.Context, d time.Duration) error {
	r.mu.Lock()
	r.waits = append(r.waits, d)
	r.mu.Unlock()
	return nil
}

func setup(t *testing.T, url string) (*dispatch.Dispatcher, *recorder) {
	d := dispatch.New(url, http.DefaultClient, mcp.NewPool(nil))
	rec := &recorder{}
	d.Retry.Sleep = rec.sleep
	d.Timeout = 2 * time.Second
	return d, rec
}

func scope(defs ...tools.Definition) dispatch.Scope {
	s := dispatch.Scope{TurnID: 7, ConversationID: 3, Token: "tgs_token", Offered: map[string]tools.Definition{}}
	for _, d := range defs {
		s.Offered[d.Name] = d
	}
	return s
}

func TestOutcomes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		reply       reply
		args        string
		effect      tools.Effect
		wantOutcome schematype.Outcome
		wantMessage string
		wantFailed  int
		wantUnsent  bool
	}{
		{name: "hits", reply: ok(`{"data":{"find":{"hits":["a"]}}}`), args: `{"queries":["a"]}`, wantOutcome: schematype.OutcomeHits},
		{name: "absence", reply: ok(`{"data":{"find":{"hits":[]}}}`), args: `{"queries":["a"]}`, wantOutcome: schematype.OutcomeAbsence},
		{name: "error", reply: ok(`{"errors":[{"message":"not found","path":["find"]}],"data":{"find":null}}`), args: `{"queries":["a"]}`, wantOutcome: schematype.OutcomeError, wantMessage: "not found"},
		{name: "refused arguments", reply: ok(`{}`), args: `{"queries":[1]}`, wantOutcome: schematype.OutcomeRefused, wantMessage: `argument "queries[0]": expected a string, got a number`, wantUnsent: true},
		{name: "per-item failures", reply: ok(`{"data":{"find":{"hits":["b"],"failures":[{"item":0,"input":"a","message":"timed out"}]}}}`), args: `{"queries":["a","b"]}`, wantOutcome: schematype.OutcomeHits, wantFailed: 1},
		// A write answered 503 after its body was sent may have run.
		{name: "write may have run", reply: status(503), args: `{"queries":["a"]}`, effect: tools.EffectWrite, wantOutcome: schematype.OutcomeMayHaveRun},
		{name: "read outage", reply: status(503), args: `{"queries":["a"]}`, wantOutcome: schematype.OutcomeOutage},
		// Refusals raised inside resolvers say nothing ran.
		{name: "resolver refusal", reply: ok(`{"errors":[{"message":"maxChars: at most 20000","extensions":{"code":"BAD_USER_INPUT"}}],"data":{"find":null}}`), args: `{"queries":["a"]}`, wantOutcome: schematype.OutcomeRefused, wantMessage: "at most 20000"},
		// Code that ran and failed (run_code's throw or bound) is an error, not a refusal.
		{name: "run failed", reply: ok(`{"errors":[{"message":"run_code hit its time bound: the code ran past the 5s time bound","extensions":{"code":"RUN_FAILED"}}],"data":{"find":null}}`), args: `{"queries":["a"]}`, effect: tools.EffectWrite, wantOutcome: schematype.OutcomeError, wantMessage: "hit its time bound"},
		{name: "every item never ran", reply: ok(`{"data":{"find":{"hits":[],"failures":[{"item":0,"input":"a","kind":"OUTAGE","message":"index down"}]}}}`), args: `{"queries":["a"]}`, wantOutcome: schematype.OutcomeOutage, wantFailed: 1},
		{name: "every item refused", reply: ok(`{"data":{"find":{"hits":[],"failures":[{"item":0,"input":"a","kind":"REFUSED","message":"ref not found"}]}}}`), args: `{"queries":["a"]}`, wantOutcome: schematype.OutcomeRefused, wantFailed: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := newBackend(t, tt.reply)
			d, _ := setup(t, b.srv.URL)
			effect := tt.effect
			if effect == "" {
				effect = tools.EffectRead
			}
			res := d.Do(context.Background(), scope(def("find", effect)), dispatch.Call{ID: "c1", Name: "find", Arguments: json.RawMessage(tt.args)})
			require.Equal(t, tt.wantOutcome, res.Outcome, res.Message)
			if tt.wantMessage != "" {
				require.Contains(t, res.Message, tt.wantMessage)
			}
			require.Len(t, res.Failures, tt.wantFailed)
			if tt.wantUnsent {
				require.Empty(t, b.requests(), "a refused call is never sent")
				require.Zero(t, res.Attempts)
			}
		})
	}
}

func TestNotOfferedIsRefusedByName(t *testing.T) {
	t.Parallel()
	b := newBackend(t, ok(`{}`))
	d, _ := setup(t, b.srv.URL)
	res := d.Do(context.Background(), scope(def("find", tools.EffectRead)), dispatch.Call{ID: "c", Name: "drop", Arguments: json.RawMessage(`{}`)})
	require.Equal(t, schematype.OutcomeRefused, res.Outcome)
	require.Equal(t, `tool "drop" is not available`, res.Message)
	require.Empty(t, b.requests())
}

func TestRepairIsRecordedAndSent(t *testing.T) {
	t.Parallel()
	b := newBackend(t, ok(`{"data":{"find":{"hits":["x"]}}}`))
	d, _ := setup(t, b.srv.URL)
	// A one-element list sent as the element itself; conversationId from
	// the model is dropped: the token names the conversation.
	s := scope(def("find", tools.EffectRead))
	s.ConversationRef = "tgconv"
	res := d.Do(context.Background(), s, dispatch.Call{ID: "c", Name: "find", Arguments: json.RawMessage(`{"queries":"x"}`)})
	require.Equal(t, schematype.OutcomeHits, res.Outcome, res.Message)
	require.Len(t, res.Repairs, 1)
	require.JSONEq(t, `{"queries":["x"]}`, string(res.Arguments))
	got := b.requests()
	require.Len(t, got, 1)
	require.Equal(t, []any{"x"}, got[0].vars["queries"])
	require.Equal(t, "tgconv", got[0].vars["conversationId"], "the turn's conversation, never the model's")
	require.Equal(t, "Bearer tgs_token", got[0].auth)
}

func TestRetriesByEffect(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name         string
		effect       tools.Effect
		replies      []reply
		wantAttempts int
		wantOutcome  schematype.Outcome
		wantWaits    []time.Duration
	}{
		{name: "read retries with doubling waits", effect: tools.EffectRead,
			replies:      []reply{status(503), status(502), status(504), ok(`{"data":{"find":{"hits":["a"]}}}`)},
			wantAttempts: 4, wantOutcome: schematype.OutcomeHits,
			wantWaits: []time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second}},
		// One schedule for every caller (runtime/retry): 500 ms doubling to 8 s.
		{name: "retry-after is honoured up to the cap", effect: tools.EffectRead,
			replies:      []reply{{status: 429, retryAfter: "2", body: `{}`}, {status: 429, retryAfter: "60", body: `{}`}, ok(`{"data":{"find":{"hits":["a"]}}}`)},
			wantAttempts: 3, wantOutcome: schematype.OutcomeHits,
			wantWaits: []time.Duration{2 * time.Second, 8 * time.Second}},
		{name: "idempotent retries", effect: tools.EffectIdempotent,
			replies:      []reply{status(503), ok(`{"data":{"find":{"hits":["a"]}}}`)},
			wantAttempts: 2, wantOutcome: schematype.OutcomeHits, wantWaits: []time.Duration{500 * time.Millisecond}},
		{name: "write is never repeated", effect: tools.EffectWrite,
			replies:      []reply{status(503), ok(`{"data":{"find":{"hits":["a"]}}}`)},
			wantAttempts: 1, wantOutcome: schematype.OutcomeMayHaveRun},
		{name: "read gives up after four attempts", effect: tools.EffectRead,
			replies:      []reply{status(503)},
			wantAttempts: 4, wantOutcome: schematype.OutcomeOutage,
			wantWaits: []time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := newBackend(t, tt.replies...)
			d, rec := setup(t, b.srv.URL)
			res := d.Do(context.Background(), scope(def("find", tt.effect)), dispatch.Call{ID: "c9", Name: "find", Arguments: json.RawMessage(`{"queries":["a"]}`)})
			require.Equal(t, tt.wantOutcome, res.Outcome, res.Message)
			require.Equal(t, tt.wantAttempts, res.Attempts)
			require.Len(t, b.requests(), tt.wantAttempts)
			require.Equal(t, tt.wantWaits, rec.waits)
			for _, r := range b.requests() {
				require.Equal(t, dispatch.IdempotencyKey(7, "c9"), r.key, "every attempt carries the same key")
			}
		})
	}
}

func TestTimeoutRetriedOnlyWhenSafe(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		effect       tools.Effect
		wantAttempts int
		wantOutcome  schematype.Outcome
	}{
		{effect: tools.EffectRead, wantAttempts: 2, wantOutcome: schematype.OutcomeHits},
		{effect: tools.EffectWrite, wantAttempts: 1, wantOutcome: schematype.OutcomeMayHaveRun},
	} {
		b := newBackend(t, reply{status: 200, delay: 2 * time.Second, body: `{}`}, ok(`{"data":{"find":{"hits":["a"]}}}`))
		d, _ := setup(t, b.srv.URL)
		d.Timeout = 100 * time.Millisecond
		res := d.Do(context.Background(), scope(def("find", tt.effect)), dispatch.Call{ID: "c", Name: "find", Arguments: json.RawMessage(`{"queries":["a"]}`)})
		require.Equal(t, tt.wantOutcome, res.Outcome, res.Message)
		require.Equal(t, tt.wantAttempts, res.Attempts)
	}
}

func TestNeverSentIsAlwaysRetried(t *testing.T) {
	t.Parallel()
	// A port nothing listens on: the request is never sent, so even a
	// write is tried again.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	d, rec := setup(t, "http://"+addr+"/graphql")
	res := d.Do(context.Background(), scope(def("find", tools.EffectWrite)), dispatch.Call{ID: "c", Name: "find", Arguments: json.RawMessage(`{"queries":["a"]}`)})
	require.Equal(t, schematype.OutcomeOutage, res.Outcome)
	require.Equal(t, 4, res.Attempts)
	require.Len(t, rec.waits, 3)
	h, err := dispatch.Render(res, def("find", tools.EffectWrite), "", false)
	require.NoError(t, err)
	require.Contains(t, h.Text, "Outage: the tool never ran")
	require.Contains(t, h.Text, "after 4 attempts")
}

func TestRenderSaysEachOutcomeDifferently(t *testing.T) {
	t.Parallel()
	d := def("find", tools.EffectRead)
	seen := map[string]schematype.Outcome{}
	for _, res := range []dispatch.Result{
		{Outcome: schematype.OutcomeHits, Kind: schematype.KindJSON, Content: []byte(`{"hits":["a"]}`)},
		{Outcome: schematype.OutcomeAbsence, Kind: schematype.KindJSON, Content: []byte(`{"hits":[]}`)},
		{Outcome: schematype.OutcomeOutage, Attempts: 4, Message: "503"},
		{Outcome: schematype.OutcomeRefused, Message: "bad"},
		{Outcome: schematype.OutcomeError, Message: "bad"},
	} {
		h, err := dispatch.Render(res, d, "r_1", false)
		require.NoError(t, err)
		prefix := h.Text[:8]
		_, dup := seen[prefix]
		require.False(t, dup, "%s says the same as %s", res.Outcome, seen[prefix])
		seen[prefix] = res.Outcome
	}
}

// mcpServer serves an MCP application built with the SDK's server side.
func mcpServer(t *testing.T, failHTTP *atomic.Int32) string {
	server := sdk.NewServer(&sdk.Implementation{Name: "crm", Version: "1"}, nil)
	schema := json.RawMessage(`{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}`)
	server.AddTool(&sdk.Tool{Name: "lookup", InputSchema: schema, Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true}},
		func(_ context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "found Ada"}}}, nil
		})
	server.AddTool(&sdk.Tool{Name: "explode", InputSchema: schema},
		func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: "the CRM is read-only today"}}}, nil
		})
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return server }, &sdk.StreamableHTTPOptions{Stateless: true})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fail := int(failHTTP.Load())
		if fail != 0 && r.Method == http.MethodPost {
			body, _ := io.ReadAll(r.Body)
			if json.Valid(body) && contains(body, `"tools/call"`) {
				w.WriteHeader(fail)
				return
			}
			r.Body = io.NopCloser(bytesReader(body))
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/mcp"
}

func TestApplicationTools(t *testing.T) {
	t.Parallel()
	var fail atomic.Int32
	url := mcpServer(t, &fail)
	pool := mcp.NewPool(nil)
	t.Cleanup(pool.Close)
	app := mcp.Application{Name: "crm", URL: url, AllowedTools: []string{"lookup", "explode"}}
	defs, err := pool.Tools(context.Background(), app)
	require.NoError(t, err)
	require.Len(t, defs, 2)
	s := scope(defs...)
	s.Apps = map[string]mcp.Application{"crm": app}
	d := dispatch.New("http://unused.invalid", http.DefaultClient, pool)
	rec := &recorder{}
	d.Retry.Sleep = rec.sleep

	res := d.Do(context.Background(), s, dispatch.Call{ID: "a", Name: "crm__lookup", Arguments: json.RawMessage(`{"name":"Ada"}`)})
	require.Equal(t, schematype.OutcomeHits, res.Outcome, res.Message)
	require.Equal(t, "found Ada", string(res.Content))

	// A tool that fails on purpose: it ran, and says why.
	res = d.Do(context.Background(), s, dispatch.Call{ID: "b", Name: "crm__explode", Arguments: json.RawMessage(`{"name":"Ada"}`)})
	require.Equal(t, schematype.OutcomeError, res.Outcome)
	require.Equal(t, "the CRM is read-only today", res.Message)

	// A server answering 503: the read-only tool is retried, the one without
	// annotations (a write) is not.
	fail.Store(http.StatusServiceUnavailable)
	res = d.Do(context.Background(), s, dispatch.Call{ID: "c", Name: "crm__lookup", Arguments: json.RawMessage(`{"name":"Ada"}`)})
	require.Equal(t, schematype.OutcomeOutage, res.Outcome, res.Message)
	require.Equal(t, 4, res.Attempts)
	res = d.Do(context.Background(), s, dispatch.Call{ID: "d", Name: "crm__explode", Arguments: json.RawMessage(`{"name":"Ada"}`)})
	require.Equal(t, schematype.OutcomeMayHaveRun, res.Outcome, res.Message)
	require.Equal(t, 1, res.Attempts)
}

func TestRenderPreviewsOnlyWhatItShould(t *testing.T) {
	t.Parallel()
	big := []byte(`{"rows":[` + strings.Repeat(`{"name":"Ada Lovelace","note":"first programmer"},`, 400) + `{"name":"end"}]}`)
	large := def("find", tools.EffectRead)
	exempt := large
	exempt.Preview = tools.PreviewExempt

	h, err := dispatch.Render(dispatch.Result{Outcome: schematype.OutcomeHits, Kind: schematype.KindJSON, Content: big}, large, "r_1", false)
	require.NoError(t, err)
	require.LessOrEqual(t, utf8.RuneCountInString(h.Text), 6000)
	require.True(t, json.Valid([]byte(h.Text)))
	require.Contains(t, h.Text, `"_toolResultContext"`)
	require.NotEmpty(t, h.Visible)

	// A result that fits passes whole.
	small := []byte(`{"rows":[{"name":"Ada"}]}`)
	h, err = dispatch.Render(dispatch.Result{Outcome: schematype.OutcomeHits, Kind: schematype.KindJSON, Content: small}, large, "r_2", false)
	require.NoError(t, err)
	require.Equal(t, string(small), h.Text)

	// Exempt: catalogue results, acknowledgements, control flow pass whole.
	h, err = dispatch.Render(dispatch.Result{Outcome: schematype.OutcomeHits, Kind: schematype.KindJSON, Content: big}, exempt, "r_3", false)
	require.NoError(t, err)
	require.Equal(t, string(big), h.Text)

	// Errors are never previewed; media never.
	long := strings.Repeat("why ", 2000)
	h, err = dispatch.Render(dispatch.Result{Outcome: schematype.OutcomeError, Message: long}, large, "", false)
	require.NoError(t, err)
	require.Contains(t, h.Text, long)
	h, err = dispatch.Render(dispatch.Result{Outcome: schematype.OutcomeHits, Kind: schematype.KindMedia, Content: make([]byte, 70000)}, large, "r_4", false)
	require.NoError(t, err)
	require.Equal(t, "[media result of 70000 bytes, stored as ref r_4]", h.Text)
	require.Empty(t, h.Visible)
}
