package loop_test

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/db/dbtest"
	"github.com/toolgate/toolgate/ent/tenancy"
	"github.com/toolgate/toolgate/ent/turn"
	"github.com/toolgate/toolgate/graph/gid"
	"github.com/toolgate/toolgate/runtime/model"
	"github.com/toolgate/toolgate/runtime/model/anthropic"
	"github.com/toolgate/toolgate/runtime/model/openai"
	"github.com/toolgate/toolgate/runtime/model/replay"
)

// wire is a fake provider endpoint: it answers the first request with a
// calculator call and the second with text, in the provider's own wire
// protocol, and keeps the request bodies.
type wire struct {
	mu     sync.Mutex
	bodies []map[string]any
}

func (w *wire) record(t *testing.T, r *http.Request) int {
	raw, err := io.ReadAll(r.Body)
	require.NoError(t, err)
	var body map[string]any
	require.NoError(t, json.Unmarshal(raw, &body))
	w.mu.Lock()
	defer w.mu.Unlock()
	w.bodies = append(w.bodies, body)
	return len(w.bodies)
}

func (w *wire) body(i int) map[string]any {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.bodies[i]
}

func openAIServer(t *testing.T, w *wire) *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		require.True(t, strings.HasSuffix(r.URL.Path, "/chat/completions"), r.URL.Path)
		n := w.record(t, r)
		rw.Header().Set("Content-Type", "text/event-stream")
		chunk := func(v string) { fmt.Fprintf(rw, "data: %s\n\n", v) }
		if n == 1 {
			chunk(`{"id":"x","object":"chat.completion.chunk","created":1,"model":"gpt-4.1","choices":[{"index":0,"delta":{"role":"assistant","content":"Let me compute.","tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"calculator","arguments":""}}]},"finish_reason":null}]}`)
			chunk(`{"id":"x","object":"chat.completion.chunk","created":1,"model":"gpt-4.1","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"expression\":"}}]},"finish_reason":null}]}`)
			chunk(`{"id":"x","object":"chat.completion.chunk","created":1,"model":"gpt-4.1","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"2/3\"}"}}]},"finish_reason":"tool_calls"}]}`)
		} else {
			chunk(`{"id":"y","object":"chat.completion.chunk","created":1,"model":"gpt-4.1","choices":[{"index":0,"delta":{"role":"assistant","content":"It is 0.666666666667."},"finish_reason":"stop"}]}`)
		}
		chunk(`{"id":"x","object":"chat.completion.chunk","created":1,"model":"gpt-4.1","choices":[],"usage":{"prompt_tokens":1200,"completion_tokens":30,"total_tokens":1230,"prompt_tokens_details":{"cached_tokens":1000}}}`)
		chunk(`[DONE]`)
	}))
}

func anthropicServer(t *testing.T, w *wire) *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		require.Equal(t, "/v1/messages", r.URL.Path)
		n := w.record(t, r)
		rw.Header().Set("Content-Type", "application/json")
		if n == 1 {
			fmt.Fprint(rw, `{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"text","text":"Let me compute."},{"type":"tool_use","id":"toolu_1","name":"calculator","input":{"expression":"2/3"}}],"stop_reason":"tool_use","usage":{"input_tokens":200,"output_tokens":30,"cache_read_input_tokens":0,"cache_creation_input_tokens":1000}}`)
			return
		}
		fmt.Fprint(rw, `{"id":"msg_2","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"text","text":"It is 0.666666666667."}],"stop_reason":"end_turn","usage":{"input_tokens":250,"output_tokens":10,"cache_read_input_tokens":1000,"cache_creation_input_tokens":0}}`)
	}))
}

func TestTurnOverEachProviderProtocol(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		provider func(t *testing.T, w *wire) model.Provider
		// heard returns the text the provider's second request carried as
		// the calculator's result.
		heard     func(t *testing.T, w *wire) string
		wantCache int64
		// wantInput is the turn's input over both calls: uncached, cache
		// read and cache write.
		wantInput, wantCacheRead float64
		// paid returns who pays as the request carried it; metadata names
		// the request's fields that carry it: every other byte is prompt.
		paid     func(body map[string]any) string
		metadata []string
	}{
		{
			name: "openai",
			provider: func(t *testing.T, w *wire) model.Provider {
				srv := openAIServer(t, w)
				t.Cleanup(srv.Close)
				p, err := openai.New(openai.Options{BaseURL: srv.URL + "/v1", APIKey: "test", HTTPClient: srv.Client()})
				require.NoError(t, err)
				return p
			},
			heard: func(t *testing.T, w *wire) string {
				msgs := w.body(1)["messages"].([]any)
				last := msgs[len(msgs)-1].(map[string]any)
				require.Equal(t, "tool", last["role"])
				require.Equal(t, "call_a", last["tool_call_id"])
				return fmt.Sprint(last["content"])
			},
			wantCache: 1000, wantInput: 2400, wantCacheRead: 2000,
			paid: func(body map[string]any) string {
				return fmt.Sprint(body["user"]) + " " + fmt.Sprint(body["safety_identifier"])
			},
			metadata: []string{"user", "safety_identifier"},
		},
		{
			name: "anthropic",
			provider: func(t *testing.T, w *wire) model.Provider {
				srv := anthropicServer(t, w)
				t.Cleanup(srv.Close)
				p, err := anthropic.New(anthropic.Options{BaseURL: srv.URL, APIKey: "test", HTTPClient: srv.Client()})
				require.NoError(t, err)
				return p
			},
			heard: func(t *testing.T, w *wire) string {
				body := w.body(1)
				// The stable prefix carries the cache breakpoints.
				sys := body["system"].([]any)
				require.NotNil(t, sys[len(sys)-1].(map[string]any)["cache_control"])
				tools := body["tools"].([]any)
				require.NotNil(t, tools[len(tools)-1].(map[string]any)["cache_control"])
				msgs := body["messages"].([]any)
				last := msgs[len(msgs)-1].(map[string]any)
				require.Equal(t, "user", last["role"])
				block := last["content"].([]any)[0].(map[string]any)
				require.Equal(t, "tool_result", block["type"])
				require.Equal(t, "toolu_1", block["tool_use_id"])
				// And the history its end: the next call reads it from the cache.
				require.NotNil(t, block["cache_control"])
				b, _ := json.Marshal(block["content"])
				return string(b)
			},
			wantCache: 0, wantInput: 2450, wantCacheRead: 1000,
			paid: func(body map[string]any) string {
				return fmt.Sprint(body["metadata"].(map[string]any)["user_id"])
			},
			metadata: []string{"metadata"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			w := &wire{}
			h := newHarness(t, dbtest.Open(t, dbtest.SQLite), tt.provider(t, w))
			id := h.send(t, h.conversation(t), "What is 2/3?", "")
			got := h.wait(t, id)
			require.Equal(t, turn.StatusCOMPLETED, got.Status, got.Error)
			require.Equal(t, "It is 0.666666666667.", *got.Answer)
			require.Contains(t, tt.heard(t, w), "0.666666666667")
			mcs := got.QueryModelCalls().AllX(tenancy.System(t.Context()))
			require.Len(t, mcs, 2)
			require.EqualValues(t, tt.wantCache, mcs[0].CacheReadTokens)
			require.Equal(t, tt.name, mcs[0].Provider)
			require.Greater(t, mcs[0].Cost, 0.0)

			// Who pays: every request carries the opaque ids as metadata,
			// each call records them, and no prompt byte holds any.
			// They are keyed hashes, not the ids the API shows.
			conv := got.QueryConversation().OnlyX(tenancy.System(t.Context()))
			who := model.Attribute(h.cfg.AttributionKey, conv.OrganizationID, conv.UserID, conv.AgentID, conv.ID)
			apiIDs := []string{gid.Encode(conv.OrganizationID), gid.Encode(conv.UserID), gid.Encode(conv.AgentID), gid.Encode(conv.ID)}
			for i := range 2 {
				body := w.body(i)
				paid := tt.paid(body)
				require.Contains(t, paid, who.Key())
				for _, id := range apiIDs {
					require.NotContains(t, paid, id)
				}
				rest := maps.Clone(body)
				for _, f := range tt.metadata {
					delete(rest, f)
				}
				prompt, err := json.Marshal(rest)
				require.NoError(t, err)
				for _, id := range append(who.IDs(), apiIDs...) {
					require.NotEmpty(t, id)
					require.NotContains(t, string(prompt), id, "request %d", i)
				}
				require.Equal(t, who.Key(), mcs[i].Attribution)
				require.Positive(t, mcs[i].PrefixTokens)
			}
			// Shown to an admin holding an API token, to nobody else.
			q := `query($id: ID!) { node(id: $id) { ... on Turn { modelCalls { attribution } } } }`
			shown := h.gql(t, q, map[string]any{"id": id})["node"].(map[string]any)["modelCalls"].([]any)
			require.Equal(t, who.Key(), shown[1].(map[string]any)["attribution"])
			h.client.User.UpdateOneID(conv.UserID).SetAdmin(false).ExecX(tenancy.System(t.Context()))
			shown = h.gql(t, q, map[string]any{"id": id})["node"].(map[string]any)["modelCalls"].([]any)
			require.Nil(t, shown[0].(map[string]any)["attribution"])
			require.Nil(t, shown[1].(map[string]any)["attribution"])
			stats := h.gql(t, `query($id: ID!) { node(id: $id) { ... on Turn { promptStats { prefixTokens inputTokens cacheReadTokens modelCalls } } } }`,
				map[string]any{"id": id})["node"].(map[string]any)["promptStats"].(map[string]any)
			require.Equal(t, map[string]any{"prefixTokens": float64(mcs[0].PrefixTokens), "inputTokens": tt.wantInput,
				"cacheReadTokens": tt.wantCacheRead, "modelCalls": float64(2)}, stats)
			if tt.name == "openai" {
				require.Equal(t, who.Key()+" "+who.User, fmt.Sprint(w.body(0)["user"])+" "+fmt.Sprint(w.body(0)["safety_identifier"]))
				// The prefix is byte-stable, so both calls share a cache key.
				require.NotEmpty(t, w.body(0)["prompt_cache_key"])
				require.Equal(t, w.body(0)["prompt_cache_key"], w.body(1)["prompt_cache_key"])
			}
		})
	}
}

func TestReplayTurnIsMarked(t *testing.T) {
	t.Parallel()
	p, err := replay.Demo()
	require.NoError(t, err)
	h := newHarness(t, dbtest.Open(t, dbtest.SQLite), p)
	id := h.send(t, h.conversation(t), "Estimate 1200 and 850 with a 20% markup", "")
	got := h.wait(t, id)
	require.Equal(t, turn.StatusCOMPLETED, got.Status, got.Error)
	require.True(t, got.Replayed)
	require.Equal(t, []string{"Break the total down by month", "Compare it with last quarter", "Draft a short budget note"}, got.Suggestions)
	calls := h.calls(t, id)
	require.Equal(t, "calculator", calls[0].Name)
	require.Contains(t, *calls[0].Heard, "2460")
	require.NotNil(t, got.Thinking, "thinking is kept, never returned")
}
