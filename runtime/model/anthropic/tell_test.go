package anthropic

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/runtime/model"
	"github.com/toolgate/toolgate/runtime/model/modeltest"
)

// streamedAnswer is a Messages stream: thinking, text, a tool call.
var streamedAnswer = []string{
	`{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5-20250929","content":[],"stop_reason":null,"usage":{"input_tokens":12,"cache_read_input_tokens":3000,"output_tokens":1}}}`,
	`{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}}`,
	`{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"secret thoughts"}}`,
	`{"type":"content_block_stop","index":0}`,
	`{"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}`,
	`{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"Let me "}}`,
	`{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"check. ✓"}}`,
	`{"type":"content_block_stop","index":1}`,
	`{"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"toolu_1","name":"calculator","input":{}}}`,
	`{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"{\"expression\":"}}`,
	`{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"\"2+2\"}"}}`,
	`{"type":"content_block_stop","index":2}`,
	`{"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":40}}`,
	`{"type":"message_stop"}`,
}

// The Messages stream is read through the SDK: the request's Stream hears
// the text and the tool call as they come (never the thinking), the
// answer is put together whole, and a stream cut before message_stop is
// asked again, its Stream restarted.
func TestStreamedMessages(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		require.Contains(t, string(body), `"stream":true`)
		w.Header().Set("Content-Type", "text/event-stream")
		events := streamedAnswer
		if calls.Add(1) == 1 {
			events = streamedAnswer[:6] // cut mid-answer
		}
		for _, e := range events {
			var kind struct{ Type string }
			_ = jsonUnmarshal(e, &kind)
			_, _ = fmt.Fprintf(w, "event: %s\ndata: %s\n\n", kind.Type, e)
			w.(http.Flusher).Flush()
		}
	}))
	t.Cleanup(srv.Close)
	p, err := New(Options{BaseURL: srv.URL, APIKey: "k", HTTPClient: srv.Client()})
	require.NoError(t, err)
	p.retry.Sleep = func(context.Context, time.Duration) error { return nil }
	rec := &modeltest.Recorder{}
	got, err := p.Complete(t.Context(), model.Request{Messages: []model.Message{{Role: model.RoleUser, Text: "Hello"}}, Stream: rec})
	require.NoError(t, err)
	require.Equal(t, "Let me check. ✓", got.Text)
	require.Equal(t, "secret thoughts", got.Thinking)
	require.Equal(t, "tool_use", got.StopReason)
	require.Len(t, got.ToolCalls, 1)
	require.JSONEq(t, `{"expression":"2+2"}`, string(got.ToolCalls[0].Arguments))
	require.Equal(t, model.Usage{InputUncached: 12, CacheRead: 3000, Output: 40}, got.Usage)
	text, begun, args, restarts := rec.Told()
	require.Equal(t, got.Text, text)
	require.Equal(t, []string{"0:calculator"}, begun)
	require.Equal(t, map[int]int{0: len(`{"expression":"2+2"}`)}, args)
	require.Equal(t, 1, restarts)
	require.EqualValues(t, 2, calls.Load())
}

func jsonUnmarshal(s string, v any) error { return json.Unmarshal([]byte(s), v) }
