package anthropic

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/toolgate/toolgate/runtime/model"
	"github.com/toolgate/toolgate/runtime/model/modeltest"
	"github.com/toolgate/toolgate/runtime/retry"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// reply is one scripted answer of the fake Messages server.
type reply struct {
	status int
	header map[string]string
	body   string
	// hangup drops the connection without answering.
	hangup bool
}

// request is what the server received.
type request struct {
	path   string
	header http.Header
	body   []byte
}

type testBundle struct {
	server   *httptest.Server
	provider *Provider
	mu       sync.Mutex
	replies  []reply
	requests []request
	waits    []time.Duration
}

func setup(t *testing.T, opts Options, replies ...reply) *testBundle {
	t.Helper()
	b := &testBundle{replies: replies}
	b.server = httptest.NewServer(http.HandlerFunc(b.serve))
	t.Cleanup(b.server.Close)
	opts.BaseURL = b.server.URL
	opts.APIKey = "test-key"
	opts.HTTPClient = b.server.Client()
	opts.Retry.Sleep = func(_ context.Context, d time.Duration) error {
		b.mu.Lock()
		defer b.mu.Unlock()
		b.waits = append(b.waits, d)
		return nil
	}
	p, err := New(opts)
	require.NoError(t, err)
	b.provider = p
	return b
}

func (b *testBundle) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	b.mu.Lock()
	b.requests = append(b.requests, request{path: r.URL.Path, header: r.Header.Clone(), body: body})
	rep := b.replies[0]
	if len(b.replies) > 1 {
		b.replies = b.replies[1:]
	}
	b.mu.Unlock()
	if rep.hangup {
		conn, _, _ := w.(http.Hijacker).Hijack()
		_ = conn.Close()
		return
	}
	for k, v := range rep.header {
		w.Header().Set(k, v)
	}
	w.Header().Set("Content-Type", "application/json")
	status := rep.status
	if status == 0 {
		status = http.StatusOK
	}
	w.WriteHeader(status)
	_, _ = io.WriteString(w, rep.body)
}

func (b *testBundle) sent(t *testing.T, n int) map[string]any {
	t.Helper()
	var v map[string]any
	require.NoError(t, json.Unmarshal(b.requests[n].body, &v))
	return v
}

const textAnswer = `{
	"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5-20250929",
	"content": [{"type": "text", "text": "Hello"}, {"type": "text", "text": ", world."}],
	"stop_reason": "end_turn", "stop_sequence": null,
	"usage": {"input_tokens": 12, "cache_read_input_tokens": 3000, "cache_creation_input_tokens": 150, "output_tokens": 9}
}`

var helloRequest = model.Request{Messages: []model.Message{{Role: model.RoleUser, Text: "Hello"}}}

func errorBody(kind, message string) string {
	return `{"type":"error","error":{"type":"` + kind + `","message":"` + message + `"}}`
}

func TestText(t *testing.T) {
	t.Parallel()
	b := setup(t, Options{}, reply{body: textAnswer})
	got, err := b.provider.Complete(t.Context(), helloRequest)
	require.NoError(t, err)
	require.Equal(t, &model.Response{
		Model:      "claude-sonnet-4-5-20250929",
		Text:       "Hello, world.",
		StopReason: "end_turn",
		Usage:      model.Usage{InputUncached: 12, CacheRead: 3000, CacheWrite: 150, Output: 9},
	}, got)

	require.Len(t, b.requests, 1)
	require.Equal(t, "/v1/messages", b.requests[0].path)
	require.Equal(t, "Bearer test-key", b.requests[0].header.Get("Authorization"))
	require.NotEmpty(t, b.requests[0].header.Get("Anthropic-Version"))
	sent := b.sent(t, 0)
	require.Equal(t, DefaultModel, sent["model"])
	require.EqualValues(t, DefaultMaxTokens, sent["max_tokens"])
	require.NotContains(t, sent, "system")
	require.NotContains(t, sent, "tools")
	// Streamed; this server answered with one message, read as such.
	require.Equal(t, true, sent["stream"])
}

func TestToolUseAndThinking(t *testing.T) {
	t.Parallel()
	b := setup(t, Options{}, reply{body: `{
		"id": "msg_2", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5-20250929",
		"content": [
			{"type": "thinking", "thinking": "The user wants a sum.", "signature": "sig"},
			{"type": "text", "text": "Let me calculate."},
			{"type": "tool_use", "id": "toolu_1", "name": "calculator", "input": {"expression": "2+2"}},
			{"type": "tool_use", "id": "toolu_2", "name": "suggest_next_actions", "input": {"suggestions": ["Add tax", "Round it"]}}
		],
		"stop_reason": "tool_use", "stop_sequence": null,
		"usage": {"input_tokens": 40, "output_tokens": 60}
	}`})
	got, err := b.provider.Complete(t.Context(), helloRequest)
	require.NoError(t, err)
	require.Equal(t, "The user wants a sum.", got.Thinking)
	require.Equal(t, "Let me calculate.", got.Text)
	require.Equal(t, "tool_use", got.StopReason)
	require.Equal(t, model.Usage{InputUncached: 40, Output: 60}, got.Usage)
	require.Len(t, got.ToolCalls, 2)
	require.Equal(t, "toolu_1", got.ToolCalls[0].ID)
	require.Equal(t, "calculator", got.ToolCalls[0].Name)
	require.JSONEq(t, `{"expression":"2+2"}`, string(got.ToolCalls[0].Arguments))
	require.Equal(t, "toolu_2", got.ToolCalls[1].ID)
	var args struct{ Suggestions []string }
	require.NoError(t, json.Unmarshal(got.ToolCalls[1].Arguments, &args))
	require.Equal(t, []string{"Add tax", "Round it"}, args.Suggestions)
}

func TestRequestBody(t *testing.T) {
	t.Parallel()
	b := setup(t, Options{Model: "claude-haiku-4-5", MaxTokens: 1024}, reply{body: textAnswer})
	schema := `{"type":"object","properties":{"expression":{"type":"string"}},"required":["expression"],"additionalProperties":false}`
	req := model.Request{
		System: "You are helpful.",
		Tools: []model.ToolSpec{
			{Name: "calculator", Description: "Evaluates arithmetic.", Schema: json.RawMessage(schema)},
			{Name: "suggest_next_actions", Description: "Offers next steps.", Schema: json.RawMessage(`{"type":"object","properties":{"suggestions":{"type":"array","items":{"type":"string"}}}}`)},
		},
		Messages: []model.Message{
			{Role: model.RoleUser, Text: "What is 2+2 and 3/0?"},
			{Role: model.RoleAssistant, Text: "Calculating.", ToolCalls: []model.ToolCall{
				{ID: "toolu_1", Name: "calculator", Arguments: json.RawMessage(`{"expression":"2+2"}`)},
				{ID: "toolu_2", Name: "calculator", Arguments: json.RawMessage(`{"expression":"3/0"}`)},
			}},
			{Role: model.RoleTool, ToolCallID: "toolu_1", ToolName: "calculator", Text: "4"},
			{Role: model.RoleTool, ToolCallID: "toolu_2", ToolName: "calculator", Text: "division by zero", IsError: true},
			{Role: model.RoleAssistant, ToolCalls: []model.ToolCall{{ID: "toolu_3", Name: "suggest_next_actions", Arguments: json.RawMessage(`"unparsed"`)}}},
			{Role: model.RoleTool, ToolCallID: "toolu_3", ToolName: "suggest_next_actions"},
			{Role: model.RoleUser, Text: "And then?"},
		},
	}
	_, err := b.provider.Complete(t.Context(), req)
	require.NoError(t, err)

	require.Contains(t, string(b.requests[0].body), `"input_schema":`+schema, "the schema goes out byte for byte")
	sent := b.sent(t, 0)
	require.Equal(t, "claude-haiku-4-5", sent["model"])
	require.EqualValues(t, 1024, sent["max_tokens"])
	ephemeral := map[string]any{"type": "ephemeral"}
	require.Equal(t, []any{
		map[string]any{"type": "text", "text": "You are helpful.", "cache_control": ephemeral},
	}, sent["system"])
	tools := sent["tools"].([]any)
	require.Len(t, tools, 2)
	require.NotContains(t, tools[0], "cache_control", "only the last tool carries the breakpoint")
	require.Equal(t, "calculator", tools[0].(map[string]any)["name"])
	require.Equal(t, "Evaluates arithmetic.", tools[0].(map[string]any)["description"])
	require.Equal(t, ephemeral, tools[1].(map[string]any)["cache_control"])
	require.Equal(t, "suggest_next_actions", tools[1].(map[string]any)["name"])

	text := func(s string) map[string]any { return map[string]any{"type": "text", "text": s} }
	require.Equal(t, []any{
		map[string]any{"role": "user", "content": []any{text("What is 2+2 and 3/0?")}},
		map[string]any{"role": "assistant", "content": []any{
			text("Calculating."),
			map[string]any{"type": "tool_use", "id": "toolu_1", "name": "calculator", "input": map[string]any{"expression": "2+2"}},
			map[string]any{"type": "tool_use", "id": "toolu_2", "name": "calculator", "input": map[string]any{"expression": "3/0"}},
		}},
		// Both results of the batch share one user message.
		map[string]any{"role": "user", "content": []any{
			map[string]any{"type": "tool_result", "tool_use_id": "toolu_1", "content": []any{text("4")}},
			map[string]any{"type": "tool_result", "tool_use_id": "toolu_2", "content": []any{text("division by zero")}, "is_error": true},
		}},
		map[string]any{"role": "assistant", "content": []any{
			map[string]any{"type": "tool_use", "id": "toolu_3", "name": "suggest_next_actions", "input": map[string]any{}},
		}},
		// A result with no text has no content, and user text follows the
		// results; the history's last block carries the third breakpoint.
		map[string]any{"role": "user", "content": []any{
			map[string]any{"type": "tool_result", "tool_use_id": "toolu_3"},
			map[string]any{"type": "text", "text": "And then?", "cache_control": ephemeral},
		}},
	}, sent["messages"])
}

func TestStablePrefix(t *testing.T) {
	t.Parallel()
	b := setup(t, Options{}, reply{body: textAnswer})
	req := model.Request{
		System: "Stable.",
		Tools:  []model.ToolSpec{{Name: "calculator", Schema: json.RawMessage(`{"type":"object","properties":{"b":{},"a":{}}}`)}},
	}
	for _, text := range []string{"first", "second"} {
		req.Messages = append(req.Messages, model.Message{Role: model.RoleUser, Text: text})
		_, err := b.provider.Complete(t.Context(), req)
		require.NoError(t, err)
	}
	prefix := func(n int) string {
		var v struct {
			System json.RawMessage `json:"system"`
			Tools  json.RawMessage `json:"tools"`
		}
		require.NoError(t, json.Unmarshal(b.requests[n].body, &v))
		return string(v.Tools) + string(v.System)
	}
	require.Equal(t, prefix(0), prefix(1))
	require.Contains(t, prefix(0), `{"b":{},"a":{}}`)
}

func TestRetries(t *testing.T) {
	t.Parallel()
	ok := reply{body: textAnswer}
	tests := []struct {
		name      string
		give      []reply
		wantErr   string
		wantCalls int
		wantWaits []time.Duration
	}{
		{
			name: "429 then success, doubling and honouring Retry-After",
			give: []reply{
				{status: 429, body: errorBody("rate_limit_error", "Number of request tokens has exceeded your per-minute rate limit")},
				{status: 529, body: errorBody("overloaded_error", "Overloaded")},
				{status: 429, header: map[string]string{"Retry-After": "5"}, body: errorBody("rate_limit_error", "slow down")},
				ok,
			},
			wantCalls: 4,
			wantWaits: []time.Duration{500 * time.Millisecond, time.Second, 5 * time.Second},
		},
		{
			name:      "dropped connection is tried again",
			give:      []reply{{hangup: true}, {hangup: true}, ok},
			wantCalls: 3,
			wantWaits: []time.Duration{500 * time.Millisecond, time.Second},
		},
		{
			name:      "500 exhausted",
			give:      []reply{{status: 500, body: errorBody("api_error", "Internal server error")}},
			wantErr:   "anthropic: 500 Internal Server Error: Internal server error (gave up after 4 attempts)",
			wantCalls: 4,
			wantWaits: []time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second},
		},
		{
			name:      "401 fails at once",
			give:      []reply{{status: 401, body: errorBody("authentication_error", "invalid x-api-key")}},
			wantErr:   "anthropic: 401 Unauthorized: invalid x-api-key",
			wantCalls: 1,
		},
		{
			name:      "400 fails at once",
			give:      []reply{{status: 400, body: errorBody("invalid_request_error", "messages: roles must alternate")}},
			wantErr:   "anthropic: 400 Bad Request: messages: roles must alternate",
			wantCalls: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, Options{}, tt.give...)
			got, err := b.provider.Complete(t.Context(), helloRequest)
			if tt.wantErr != "" {
				require.EqualError(t, err, tt.wantErr)
			} else {
				require.NoError(t, err)
				require.Equal(t, "Hello, world.", got.Text)
			}
			require.Len(t, b.requests, tt.wantCalls)
			require.Equal(t, tt.wantWaits, b.waits)
		})
	}
}

func TestStatusErrorIsInspectable(t *testing.T) {
	t.Parallel()
	b := setup(t, Options{Retry: retry.Policy{Attempts: 1}}, reply{status: 529, body: errorBody("overloaded_error", "Overloaded")})
	_, err := b.provider.Complete(t.Context(), helloRequest)
	var serr *model.StatusError
	require.ErrorAs(t, err, &serr)
	require.Equal(t, 529, serr.StatusCode)
	require.EqualError(t, err, "anthropic: 529 Overloaded: Overloaded")
	require.Empty(t, b.waits)
}

func TestBadRequests(t *testing.T) {
	t.Parallel()
	b := setup(t, Options{}, reply{body: textAnswer})
	tests := []struct {
		name string
		give model.Request
		want string
	}{
		{name: "unknown role", give: model.Request{Messages: []model.Message{{Role: "narrator", Text: "x"}}}, want: `anthropic: message 0: unknown role "narrator"`},
		{name: "tool result without id", give: model.Request{Messages: []model.Message{{Role: model.RoleTool, Text: "x"}}}, want: "anthropic: message 0: tool message without a call id"},
		{name: "bad schema", give: model.Request{Tools: []model.ToolSpec{{Name: "t", Schema: json.RawMessage(`{`)}}}, want: `anthropic: tool "t": schema is not valid JSON`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := b.provider.Complete(t.Context(), tt.give)
			require.EqualError(t, err, tt.want)
		})
	}
	require.Empty(t, b.requests)
}

func TestNew(t *testing.T) {
	t.Parallel()
	p, err := New(Options{APIKey: "k"})
	require.NoError(t, err)
	require.Equal(t, Name, p.Name())
	require.Equal(t, DefaultModel, p.Model())
	_, err = New(Options{BaseURL: "api.example.com"})
	require.ErrorContains(t, err, "not an absolute URL")
	_, err = New(Options{MaxTokens: -5})
	require.ErrorContains(t, err, "negative")
}

func BenchmarkComplete(b *testing.B) {
	tb := &testBundle{replies: []reply{{body: textAnswer}}}
	tb.server = httptest.NewServer(http.HandlerFunc(tb.serve))
	defer tb.server.Close()
	p, err := New(Options{BaseURL: tb.server.URL, APIKey: "k", HTTPClient: tb.server.Client()})
	require.NoError(b, err)
	req := model.Request{
		System:   "You are helpful.",
		Tools:    []model.ToolSpec{{Name: "calculator", Schema: json.RawMessage(`{"type":"object"}`)}},
		Messages: helloRequest.Messages,
	}
	for b.Loop() {
		tb.mu.Lock()
		tb.requests = tb.requests[:0]
		tb.mu.Unlock()
		if _, err := p.Complete(context.Background(), req); err != nil {
			b.Fatal(err)
		}
	}
}

// TestAttribution: who pays goes out as metadata.user_id, and no prompt
// byte holds an id.
func TestAttribution(t *testing.T) {
	t.Parallel()
	b := setup(t, Options{}, reply{body: textAnswer}, reply{body: textAnswer})
	who := model.Attribution{Organization: "tgorg0000000001", User: "tgusr0000000002", Agent: "tgagt0000000003", Conversation: "tgcnv0000000004"}
	req := helloRequest
	req.System = "Be exact."
	req.Tools = []model.ToolSpec{{Name: "calculator", Description: "Arithmetic."}}
	req.Attribution = who
	_, err := b.provider.Complete(t.Context(), req)
	require.NoError(t, err)
	sent := b.sent(t, 0)
	require.Equal(t, map[string]any{"user_id": who.Key()}, sent["metadata"])
	prompt, err := json.Marshal([]any{sent["system"], sent["messages"], sent["tools"]})
	require.NoError(t, err)
	for _, id := range []string{who.Organization, who.User, who.Agent, who.Conversation} {
		require.NotContains(t, string(prompt), id)
	}

	_, err = b.provider.Complete(t.Context(), helloRequest)
	require.NoError(t, err)
	require.NotContains(t, b.sent(t, 1), "metadata", "no attribution, no metadata")
}

// BenchmarkWideTurn is one model call of a turn offered every built-in
// tool, with a few turns of history, answered with a sentence and a tool
// call: the provider's own cost of a call.
func BenchmarkWideTurn(b *testing.B) {
	tb := &testBundle{replies: []reply{{body: `{
		"id": "msg_3", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5-20250929",
		"content": [
			{"type": "text", "text": "Let me read the south's figures before I compare them."},
			{"type": "tool_use", "id": "toolu_s", "name": "read_tool_result", "input": {"ref": "r2"}}
		],
		"stop_reason": "tool_use", "stop_sequence": null,
		"usage": {"input_tokens": 420, "cache_read_input_tokens": 9000, "cache_creation_input_tokens": 700, "output_tokens": 40}
	}`}}}
	tb.server = httptest.NewServer(http.HandlerFunc(tb.serve))
	defer tb.server.Close()
	p, err := New(Options{BaseURL: tb.server.URL, APIKey: "k", HTTPClient: tb.server.Client()})
	require.NoError(b, err)
	req := modeltest.WideTurn()
	modeltest.ReportCPU(b, func() {
		tb.mu.Lock()
		tb.requests = tb.requests[:0]
		tb.mu.Unlock()
		if _, err := p.Complete(context.Background(), req); err != nil {
			b.Fatal(err)
		}
	})
}

// TestDeckWireBytes: the deck is encoded once and handed to the SDK as raw
// JSON, and the request is byte for byte the one the SDK sends when given
// each definition as a parameter struct (the prefix is cached, so one byte
// changed is a cache miss); a turn's calls send the same deck and system
// bytes.
func TestDeckWireBytes(t *testing.T) {
	t.Parallel()
	b := setup(t, Options{}, reply{body: textAnswer})
	req := modeltest.WideTurn()
	req.Tools = append(req.Tools, modeltest.Awkward...)
	_, err := b.provider.Complete(t.Context(), req)
	require.NoError(t, err)
	req.Messages = append(req.Messages, model.Message{Role: model.RoleAssistant, Text: "Here."}, model.Message{Role: model.RoleUser, Text: "Thanks"})
	_, err = b.provider.Complete(t.Context(), req)
	require.NoError(t, err)

	// The same call with every definition a parameter struct, as the SDK
	// encodes it itself.
	params, err := b.provider.params(req)
	require.NoError(t, err)
	params.Tools = nil
	for i, s := range req.Tools {
		tool, err := toolParam(s)
		require.NoError(t, err)
		if i == len(req.Tools)-1 {
			tool.CacheControl = sdk.NewCacheControlEphemeralParam()
		}
		params.Tools = append(params.Tools, sdk.ToolUnionParam{OfTool: &tool})
	}
	_, err = b.provider.client.Messages.New(t.Context(), params, option.WithJSONSet("stream", true))
	require.NoError(t, err)

	require.Len(t, b.requests, 3)
	require.Equal(t, string(b.requests[2].body), string(b.requests[1].body))
	prefix := func(n int) string {
		var v struct {
			System json.RawMessage `json:"system"`
			Tools  json.RawMessage `json:"tools"`
		}
		require.NoError(t, json.Unmarshal(b.requests[n].body, &v))
		return string(v.Tools) + string(v.System)
	}
	require.Equal(t, prefix(0), prefix(1))
	require.Contains(t, prefix(0), `"description":"Wraps text in \u003cb\u003e \u0026 \u003ci\u003e tags\u2028."`)
	require.Contains(t, prefix(0), `{"input_schema":{"type":"object","properties":{}},"name":"bare","cache_control":{"type":"ephemeral"}}]`)
}
