package openai

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/openai/openai-go/v3"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/toolgate/toolgate/runtime/model"
	"github.com/toolgate/toolgate/runtime/model/modeltest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// reply is one scripted answer of the fake Chat Completions server.
type reply struct {
	status int
	header map[string]string
	// body is a JSON answer (or error body) when events is nil.
	body string
	// events are SSE data payloads; "[DONE]" follows unless cut is set.
	events []string
	// cut ends the stream early, as a dropped connection would.
	cut bool
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
	opts.BaseURL = b.server.URL + "/v1"
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
	status := rep.status
	if status == 0 {
		status = http.StatusOK
	}
	if rep.events == nil {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, rep.body)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(status)
	for _, e := range rep.events {
		_, _ = fmt.Fprintf(w, "data: %s\n\n", e)
		w.(http.Flusher).Flush()
	}
	if !rep.cut {
		_, _ = io.WriteString(w, "data: [DONE]\n\n")
	}
}

// sent decodes the n-th request body.
func (b *testBundle) sent(t *testing.T, n int) map[string]any {
	t.Helper()
	var v map[string]any
	require.NoError(t, json.Unmarshal(b.requests[n].body, &v))
	return v
}

func chunk(delta string, finish string) string {
	fin := "null"
	if finish != "" {
		fin = fmt.Sprintf("%q", finish)
	}
	return fmt.Sprintf(`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4.1-2025-04-14","choices":[{"index":0,"delta":%s,"finish_reason":%s}]}`, delta, fin)
}

const usageChunk = `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4.1-2025-04-14","choices":[],` +
	`"usage":{"prompt_tokens":1200,"completion_tokens":35,"total_tokens":1235,"prompt_tokens_details":{"cached_tokens":1024}}}`

var helloRequest = model.Request{Messages: []model.Message{{Role: model.RoleUser, Text: "Hello"}}}

func TestStreamedText(t *testing.T) {
	t.Parallel()
	b := setup(t, Options{}, reply{events: []string{
		chunk(`{"role":"assistant","content":""}`, ""),
		chunk(`{"content":"Hello"}`, ""),
		chunk(`{"content":", world."}`, ""),
		chunk(`{}`, "stop"),
		usageChunk,
	}})
	got, err := b.provider.Complete(t.Context(), helloRequest)
	require.NoError(t, err)
	require.Equal(t, &model.Response{
		Model:      "gpt-4.1-2025-04-14",
		Text:       "Hello, world.",
		StopReason: "stop",
		Usage:      model.Usage{InputUncached: 176, CacheRead: 1024, Output: 35},
	}, got)

	require.Len(t, b.requests, 1)
	require.Equal(t, "/v1/chat/completions", b.requests[0].path)
	require.Equal(t, "Bearer test-key", b.requests[0].header.Get("Authorization"))
	sent := b.sent(t, 0)
	require.Equal(t, true, sent["stream"])
	require.Equal(t, map[string]any{"include_usage": true}, sent["stream_options"])
	require.Equal(t, DefaultModel, sent["model"])
}

func TestStreamedToolCalls(t *testing.T) {
	t.Parallel()
	b := setup(t, Options{}, reply{events: []string{
		chunk(`{"role":"assistant","reasoning_content":"The user wants "}`, ""),
		chunk(`{"reasoning_content":"a sum."}`, ""),
		chunk(`{"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"calculator","arguments":""}}]}`, ""),
		chunk(`{"tool_calls":[{"index":0,"function":{"arguments":"{\"expre"}}]}`, ""),
		chunk(`{"tool_calls":[{"index":1,"id":"call_b","type":"function","function":{"name":"suggest_next_actions","arguments":"{\"suggestions\":"}}]}`, ""),
		chunk(`{"tool_calls":[{"index":0,"function":{"arguments":"ssion\":\"2+2\"}"}}]}`, ""),
		chunk(`{"tool_calls":[{"index":1,"function":{"arguments":"[\"again\"]}"}}]}`, ""),
		chunk(`{}`, "tool_calls"),
		usageChunk,
	}})
	got, err := b.provider.Complete(t.Context(), helloRequest)
	require.NoError(t, err)
	require.Equal(t, "The user wants a sum.", got.Thinking)
	require.Equal(t, "tool_calls", got.StopReason)
	require.Equal(t, []model.ToolCall{
		{ID: "call_a", Name: "calculator", Arguments: json.RawMessage(`{"expression":"2+2"}`)},
		{ID: "call_b", Name: "suggest_next_actions", Arguments: json.RawMessage(`{"suggestions":["again"]}`)},
	}, got.ToolCalls)
}

func TestStreamedToolCallsWithoutIndex(t *testing.T) {
	t.Parallel()
	// Some compatible servers leave out the index and repeat the name.
	b := setup(t, Options{}, reply{events: []string{
		chunk(`{"tool_calls":[{"id":"call_a","function":{"name":"calculator","arguments":"{\"expression\":"}}]}`, ""),
		chunk(`{"tool_calls":[{"function":{"name":"calculator","arguments":"\"1+1\"}"}}]}`, ""),
		chunk(`{"tool_calls":[{"id":"call_b","function":{"name":"calculator","arguments":"not json"}}]}`, ""),
		chunk(`{}`, "tool_calls"),
	}})
	got, err := b.provider.Complete(t.Context(), helloRequest)
	require.NoError(t, err)
	require.Equal(t, []model.ToolCall{
		{ID: "call_a", Name: "calculator", Arguments: json.RawMessage(`{"expression":"1+1"}`)},
		{ID: "call_b", Name: "calculator", Arguments: json.RawMessage(`"not json"`)},
	}, got.ToolCalls)
	require.Equal(t, model.Usage{}, got.Usage)
}

func TestPlainRequest(t *testing.T) {
	t.Parallel()
	b := setup(t, Options{DisableStreaming: true, Model: "local-model"}, reply{body: `{
		"id": "chatcmpl-2", "object": "chat.completion", "created": 1, "model": "local-model-q4",
		"choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
			"role": "assistant", "content": "Let me check.", "reasoning_content": "Need the calculator.",
			"tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "calculator", "arguments": "{\"expression\":\"6*7\"}"}}]
		}}],
		"usage": {"prompt_tokens": 500, "completion_tokens": 20, "total_tokens": 520,
			"prompt_tokens_details": {"cached_tokens": 128, "cache_write_tokens": 300}}
	}`})
	got, err := b.provider.Complete(t.Context(), helloRequest)
	require.NoError(t, err)
	require.Equal(t, &model.Response{
		Model:      "local-model-q4",
		Text:       "Let me check.",
		Thinking:   "Need the calculator.",
		StopReason: "tool_calls",
		ToolCalls:  []model.ToolCall{{ID: "call_1", Name: "calculator", Arguments: json.RawMessage(`{"expression":"6*7"}`)}},
		Usage:      model.Usage{InputUncached: 72, CacheRead: 128, CacheWrite: 300, Output: 20},
	}, got)
	sent := b.sent(t, 0)
	require.NotContains(t, sent, "stream")
	require.Equal(t, "local-model", sent["model"])
}

func TestRequestBody(t *testing.T) {
	t.Parallel()
	b := setup(t, Options{MaxTokens: 1000}, reply{events: []string{chunk(`{"content":"ok"}`, "stop")}})
	schema := `{"type":"object","properties":{"expression":{"type":"string"}},"required":["expression"]}`
	req := model.Request{
		Model:  "gpt-4o",
		System: "You are helpful.",
		Tools: []model.ToolSpec{
			{Name: "calculator", Description: "Evaluates arithmetic.", Schema: json.RawMessage(schema)},
			{Name: "no_args"},
		},
		MaxTokens: 256,
		Messages: []model.Message{
			{Role: model.RoleUser, Text: "What is 2+2 and 3+3?"},
			{Role: model.RoleAssistant, Text: "Calculating.", ToolCalls: []model.ToolCall{
				{ID: "call_1", Name: "calculator", Arguments: json.RawMessage(`{"expression":"2+2"}`)},
				{ID: "call_2", Name: "calculator", Arguments: json.RawMessage(`{"expression":"3+3"}`)},
			}},
			{Role: model.RoleTool, ToolCallID: "call_1", ToolName: "calculator", Text: "4"},
			{Role: model.RoleTool, ToolCallID: "call_2", ToolName: "calculator", Text: "division by zero", IsError: true},
			{Role: model.RoleAssistant, ToolCalls: []model.ToolCall{{ID: "call_3", Name: "no_args"}}},
			{Role: model.RoleTool, ToolCallID: "call_3", ToolName: "no_args", Text: "done"},
			{Role: model.RoleAssistant, Text: "4 and 6."},
			{Role: model.RoleUser, Text: "Thanks"},
		},
	}
	_, err := b.provider.Complete(t.Context(), req)
	require.NoError(t, err)

	// The schema goes out byte for byte, keys in the author's order.
	require.Contains(t, string(b.requests[0].body), `"parameters":`+schema)
	sent := b.sent(t, 0)
	require.Equal(t, "gpt-4o", sent["model"])
	require.EqualValues(t, 256, sent["max_completion_tokens"])
	require.Equal(t, []any{
		map[string]any{"type": "function", "function": map[string]any{
			"name": "calculator", "description": "Evaluates arithmetic.",
			"parameters": map[string]any{"type": "object", "properties": map[string]any{"expression": map[string]any{"type": "string"}}, "required": []any{"expression"}},
		}},
		map[string]any{"type": "function", "function": map[string]any{
			"name": "no_args", "parameters": map[string]any{"type": "object", "properties": map[string]any{}},
		}},
	}, sent["tools"])
	require.Equal(t, []any{
		map[string]any{"role": "system", "content": "You are helpful."},
		map[string]any{"role": "user", "content": "What is 2+2 and 3+3?"},
		map[string]any{"role": "assistant", "content": "Calculating.", "tool_calls": []any{
			map[string]any{"id": "call_1", "type": "function", "function": map[string]any{"name": "calculator", "arguments": `{"expression":"2+2"}`}},
			map[string]any{"id": "call_2", "type": "function", "function": map[string]any{"name": "calculator", "arguments": `{"expression":"3+3"}`}},
		}},
		map[string]any{"role": "tool", "tool_call_id": "call_1", "content": "4"},
		map[string]any{"role": "tool", "tool_call_id": "call_2", "content": "division by zero"},
		map[string]any{"role": "assistant", "tool_calls": []any{
			map[string]any{"id": "call_3", "type": "function", "function": map[string]any{"name": "no_args", "arguments": "{}"}},
		}},
		map[string]any{"role": "tool", "tool_call_id": "call_3", "content": "done"},
		map[string]any{"role": "assistant", "content": "4 and 6."},
		map[string]any{"role": "user", "content": "Thanks"},
	}, sent["messages"])
}

func TestMaxTokensFromOptions(t *testing.T) {
	t.Parallel()
	b := setup(t, Options{MaxTokens: 1000}, reply{events: []string{chunk(`{"content":"ok"}`, "stop")}})
	_, err := b.provider.Complete(t.Context(), helloRequest)
	require.NoError(t, err)
	require.EqualValues(t, 1000, b.sent(t, 0)["max_completion_tokens"])
}

func TestRetries(t *testing.T) {
	t.Parallel()
	ok := reply{events: []string{chunk(`{"content":"ok"}`, "stop")}}
	rateLimited := reply{status: 429, body: `{"error":{"message":"Rate limit reached","type":"requests"}}`}
	tests := []struct {
		name      string
		give      []reply
		wantErr   string
		wantCalls int
		wantWaits []time.Duration
	}{
		{
			name:      "429 then success, doubling and honouring Retry-After",
			give:      []reply{rateLimited, {status: 503, body: "busy"}, {status: 429, header: map[string]string{"Retry-After": "3"}, body: "{}"}, ok},
			wantCalls: 4,
			wantWaits: []time.Duration{500 * time.Millisecond, time.Second, 3 * time.Second},
		},
		{
			name:      "Retry-After above the cap",
			give:      []reply{{status: 429, header: map[string]string{"Retry-After": "120"}, body: "{}"}, ok},
			wantCalls: 2,
			wantWaits: []time.Duration{8 * time.Second},
		},
		{
			name:      "dropped stream is tried again",
			give:      []reply{{events: []string{chunk(`{"content":"Hel"}`, "")}, cut: true}, ok},
			wantCalls: 2,
			wantWaits: []time.Duration{500 * time.Millisecond},
		},
		{
			name:      "dropped connection is tried again",
			give:      []reply{{hangup: true}, ok},
			wantCalls: 2,
			wantWaits: []time.Duration{500 * time.Millisecond},
		},
		{
			name:      "500 exhausted",
			give:      []reply{{status: 500, body: `{"error":{"message":"The server had an error","type":"server_error"}}`}},
			wantErr:   "openai: 500 Internal Server Error: The server had an error (gave up after 4 attempts)",
			wantCalls: 4,
			wantWaits: []time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second},
		},
		{
			name:      "401 fails at once",
			give:      []reply{{status: 401, body: `{"error":{"message":"Incorrect API key provided: sk-***","type":"invalid_request_error","code":"invalid_api_key"}}`}},
			wantErr:   "openai: 401 Unauthorized: Incorrect API key provided: sk-***",
			wantCalls: 1,
		},
		{
			name:      "error text in a compatible server's shape",
			give:      []reply{{status: 404, body: `{"error":"model \"llama9\" not found"}`}},
			wantErr:   `openai: 404 Not Found: model "llama9" not found`,
			wantCalls: 1,
		},
		{
			name:      "server that does not stream",
			give:      []reply{{body: `{"id":"x","choices":[]}`}},
			wantErr:   "openai: " + errNoChunks.Error(),
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
				require.Equal(t, "ok", got.Text)
			}
			require.Len(t, b.requests, tt.wantCalls)
			require.Equal(t, tt.wantWaits, b.waits)
		})
	}
}

func TestStatusErrorIsInspectable(t *testing.T) {
	t.Parallel()
	b := setup(t, Options{}, reply{status: 403, body: `{"error":{"message":"Project does not have access"}}`})
	_, err := b.provider.Complete(t.Context(), helloRequest)
	var serr *model.StatusError
	require.ErrorAs(t, err, &serr)
	require.Equal(t, 403, serr.StatusCode)
	require.Equal(t, "Project does not have access", serr.Message)
}

func TestBadRequests(t *testing.T) {
	t.Parallel()
	b := setup(t, Options{}, reply{events: []string{chunk(`{"content":"ok"}`, "stop")}})
	tests := []struct {
		name string
		give model.Request
		want string
	}{
		{name: "unknown role", give: model.Request{Messages: []model.Message{{Role: "narrator", Text: "x"}}}, want: `openai: message 0: unknown role "narrator"`},
		{name: "tool result without id", give: model.Request{Messages: []model.Message{{Role: model.RoleTool, Text: "x"}}}, want: "openai: message 0: tool message without a call id"},
		{name: "bad schema", give: model.Request{Tools: []model.ToolSpec{{Name: "t", Schema: json.RawMessage(`{`)}}}, want: `openai: tool "t": schema is not valid JSON`},
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
	p, err := New(Options{BaseURL: "http://localhost:11434/v1"})
	require.NoError(t, err)
	require.Equal(t, Name, p.Name())
	require.Equal(t, DefaultModel, p.Model())

	_, err = New(Options{BaseURL: "localhost:11434"})
	require.ErrorContains(t, err, "not an absolute URL")
	_, err = New(Options{MaxTokens: -1})
	require.ErrorContains(t, err, "negative")
}

func TestCancelled(t *testing.T) {
	t.Parallel()
	b := setup(t, Options{}, reply{events: []string{chunk(`{"content":"ok"}`, "stop")}})
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := b.provider.Complete(ctx, helloRequest)
	require.ErrorIs(t, err, context.Canceled)
	require.Empty(t, b.waits)
}

func BenchmarkStreamedToolCall(b *testing.B) {
	events := []string{chunk(`{"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"calculator","arguments":""}}]}`, "")}
	for range 50 {
		events = append(events, chunk(`{"tool_calls":[{"index":0,"function":{"arguments":"    "}}]}`, ""))
	}
	events = append(events, chunk(`{"tool_calls":[{"index":0,"function":{"arguments":"{}"}}]}`, ""), chunk(`{}`, "tool_calls"), usageChunk)
	tb := &testBundle{replies: []reply{{events: events}}}
	tb.server = httptest.NewServer(http.HandlerFunc(tb.serve))
	defer tb.server.Close()
	p, err := New(Options{BaseURL: tb.server.URL, APIKey: "k", HTTPClient: tb.server.Client()})
	require.NoError(b, err)
	for b.Loop() {
		tb.mu.Lock()
		tb.requests = tb.requests[:0]
		tb.mu.Unlock()
		if _, err := p.Complete(context.Background(), helloRequest); err != nil {
			b.Fatal(err)
		}
	}
}

// TestAttribution: who pays goes out as request metadata (user takes every
// id, safety_identifier the end user's), and no prompt byte holds an id.
func TestAttribution(t *testing.T) {
	t.Parallel()
	b := setup(t, Options{DisableStreaming: true}, reply{body: `{"id":"c","object":"chat.completion","created":1,"model":"gpt-4.1",` +
		`"choices":[{"index":0,"message":{"role":"assistant","content":"Hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":1}}`})
	who := model.Attribution{Organization: "tgorg0000000001", User: "tgusr0000000002", Agent: "tgagt0000000003", Conversation: "tgcnv0000000004"}
	req := helloRequest
	req.System = "Be exact."
	req.Tools = []model.ToolSpec{{Name: "calculator", Description: "Arithmetic."}}
	req.Attribution = who
	_, err := b.provider.Complete(t.Context(), req)
	require.NoError(t, err)
	sent := b.sent(t, 0)
	require.Equal(t, who.Key(), sent["user"])
	require.Equal(t, who.User, sent["safety_identifier"])
	// The cache key names the prefix, not who pays: another user's call
	// with the same prefix shares it.
	require.Equal(t, req.PrefixKey(), sent["prompt_cache_key"])
	other := req
	other.Attribution = model.Attribution{User: "someone else"}
	require.Equal(t, req.PrefixKey(), other.PrefixKey())
	other.System = "Be brief."
	require.NotEqual(t, req.PrefixKey(), other.PrefixKey())
	prompt, err := json.Marshal([]any{sent["messages"], sent["tools"]})
	require.NoError(t, err)
	for _, id := range []string{who.Organization, who.User, who.Agent, who.Conversation} {
		require.NotContains(t, string(prompt), id)
	}

	// No attribution: neither field is sent.
	b = setup(t, Options{DisableStreaming: true}, reply{body: `{"id":"c","object":"chat.completion","created":1,"model":"gpt-4.1",` +
		`"choices":[{"index":0,"message":{"role":"assistant","content":"Hi"},"finish_reason":"stop"}]}`})
	_, err = b.provider.Complete(t.Context(), helloRequest)
	require.NoError(t, err)
	require.NotContains(t, b.sent(t, 0), "user")
	require.NotContains(t, b.sent(t, 0), "safety_identifier")
}

// BenchmarkWideTurn is one model call of a turn offered every built-in
// tool, with a few turns of history, streamed as by default, answered
// with a sentence and a tool call: the provider's own cost of a call.
func BenchmarkWideTurn(b *testing.B) {
	events := []string{chunk(`{"role":"assistant","content":""}`, "")}
	for _, w := range strings.Fields("Let me read the south's figures before I compare them.") {
		events = append(events, chunk(fmt.Sprintf(`{"content":%q}`, w+" "), ""))
	}
	events = append(events,
		chunk(`{"tool_calls":[{"index":0,"id":"call_s","type":"function","function":{"name":"read_tool_result","arguments":""}}]}`, ""),
		chunk(`{"tool_calls":[{"index":0,"function":{"arguments":"{\"ref\":"}}]}`, ""),
		chunk(`{"tool_calls":[{"index":0,"function":{"arguments":"\"r2\"}"}}]}`, ""),
		chunk(`{}`, "tool_calls"), usageChunk)
	tb := &testBundle{replies: []reply{{events: events}}}
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

// TestDeckWireBytes: the deck is encoded once and spliced into each
// request, and the request is byte for byte the one the SDK sends when
// given each definition as a parameter struct (the provider caches the
// prefix, so one byte changed is a cache miss), streamed or not; a turn's
// calls send the same deck and system bytes.
func TestDeckWireBytes(t *testing.T) {
	t.Parallel()
	for _, streaming := range []bool{true, false} {
		t.Run(fmt.Sprint("streaming=", streaming), func(t *testing.T) {
			t.Parallel()
			answer := reply{events: []string{chunk(`{"content":"ok"}`, "stop")}}
			if !streaming {
				answer = reply{body: `{"id":"c","object":"chat.completion","created":1,"model":"gpt-4.1",` +
					`"choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}]}`}
			}
			b := setup(t, Options{DisableStreaming: !streaming}, answer)
			req := modeltest.WideTurn()
			req.Tools = append(req.Tools, modeltest.Awkward...)
			_, err := b.provider.Complete(t.Context(), req)
			require.NoError(t, err)
			req.Messages = append(req.Messages, model.Message{Role: model.RoleAssistant, Text: "Here."}, model.Message{Role: model.RoleUser, Text: "Thanks"})
			_, err = b.provider.Complete(t.Context(), req)
			require.NoError(t, err)

			// The same call with every definition a parameter struct, as
			// the SDK encodes it itself.
			params, _, err := b.provider.params(req)
			require.NoError(t, err)
			for _, s := range req.Tools {
				def, err := functionDefinition(s)
				require.NoError(t, err)
				params.Tools = append(params.Tools, sdk.ChatCompletionToolUnionParam{OfFunction: &sdk.ChatCompletionFunctionToolParam{Function: def}})
			}
			if streaming {
				params.StreamOptions.IncludeUsage = sdk.Bool(true)
				stream := b.provider.client.Chat.Completions.NewStreaming(t.Context(), params)
				for stream.Next() {
				}
				require.NoError(t, stream.Err())
				require.NoError(t, stream.Close())
			} else {
				_, err := b.provider.client.Chat.Completions.New(t.Context(), params)
				require.NoError(t, err)
			}

			require.Len(t, b.requests, 3)
			require.Equal(t, string(b.requests[2].body), string(b.requests[1].body))
			require.Equal(t, b.requests[2].header.Get("Content-Type"), b.requests[1].header.Get("Content-Type"))
			prefix := func(n int) (string, string) {
				var v struct {
					Messages []json.RawMessage `json:"messages"`
					Tools    json.RawMessage   `json:"tools"`
				}
				require.NoError(t, json.Unmarshal(b.requests[n].body, &v))
				return string(v.Messages[0]), string(v.Tools)
			}
			system0, tools0 := prefix(0)
			system1, tools1 := prefix(1)
			require.Equal(t, system0, system1)
			require.Equal(t, tools0, tools1)
			require.Contains(t, tools0, `"description":"Wraps text in \u003cb\u003e \u0026 \u003ci\u003e tags\u2028."`)
		})
	}
}

// TestChunkDecoding: a chunk reads the same into streamChunk as through the
// SDK's chunk type, and one with values of unexpected types, which only
// the SDK's type reads, still gives what it can.
func TestChunkDecoding(t *testing.T) {
	t.Parallel()
	same := []string{
		chunk(`{"role":"assistant","content":""}`, ""),
		chunk(`{"content":"Hello \"world\" \u00e9"}`, ""),
		chunk(`{"reasoning_content":"Think."}`, ""),
		chunk(`{"reasoning":"Think.","reasoning_content":null}`, ""),
		chunk(`{"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"calculator","arguments":""}}]}`, ""),
		chunk(`{"tool_calls":[{"function":{"name":"calculator","arguments":"{\"expre"}}]}`, ""),
		chunk(`{"tool_calls":[{"index":null,"id":null,"function":{"arguments":null}}]}`, ""),
		chunk(`{}`, "tool_calls"),
		usageChunk,
		`{"id":"x","choices":[{"index":1,"delta":{"content":"other"}}],"usage":null}`,
		`{"id":"x","model":null,"choices":null}`,
	}
	for _, s := range same {
		var fast, full streamChunk
		require.NoError(t, json.Unmarshal([]byte(s), &fast))
		require.NoError(t, full.readSDK([]byte(s)))
		for _, c := range []*streamChunk{&fast, &full} {
			if len(c.Choices) == 0 {
				c.Choices = nil // none either way
			}
		}
		require.Equal(t, full, fast, s)
	}

	b := setup(t, Options{}, reply{events: []string{
		chunk(`{"content":5,"reasoning_content":{"x":1},"reasoning":"Sure."}`, ""),
		chunk(`{"tool_calls":[{"index":0,"id":"call_a","function":{"name":"calculator","arguments":{"expression":"1+1"}}}]}`, ""),
		chunk(`{}`, "tool_calls"),
		`{"choices":[],"usage":{"prompt_tokens":"12","completion_tokens":3}}`,
	}})
	got, err := b.provider.Complete(t.Context(), helloRequest)
	require.NoError(t, err)
	require.Equal(t, &model.Response{
		Model:      "gpt-4.1-2025-04-14",
		Text:       "5",
		Thinking:   "Sure.",
		StopReason: "tool_calls",
		ToolCalls:  []model.ToolCall{{ID: "call_a", Name: "calculator", Arguments: json.RawMessage(`{"expression":"1+1"}`)}},
		Usage:      model.Usage{InputUncached: 12, Output: 3},
	}, got)
}
