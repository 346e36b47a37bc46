package loop_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/db"
	"github.com/toolgate/toolgate/ent/memory"
	"github.com/toolgate/toolgate/ent/schematype"
	"github.com/toolgate/toolgate/ent/tenancy"
	"github.com/toolgate/toolgate/ent/turn"
	"github.com/toolgate/toolgate/graph/gid"
	"github.com/toolgate/toolgate/runtime/loop"
	"github.com/toolgate/toolgate/runtime/model"
	"github.com/toolgate/toolgate/tools/embed"
)

// memoryAgent starts a conversation with an agent that has the memory
// switch on and the memory tools listed.
func (h *harness) memoryAgent(t testing.TB) string {
	t.Helper()
	return h.agent(t, map[string]any{"memory": true, "tools": []string{"memory_write", "memory_search", "memory_forget"}})
}

// remember saves a fact through the API, as the person's own, and returns
// its public id.
func (h *harness) remember(t testing.TB, conv, fact string) string {
	t.Helper()
	m := h.gql(t, `mutation($c: ID, $f: String!) { memoryWrite(conversationId: $c, facts: [{text: $f}]) { stored { id } } }`,
		map[string]any{"c": conv, "f": fact})
	return m["memoryWrite"].(map[string]any)["stored"].([]any)[0].(map[string]any)["id"].(string)
}

// TestMemoryNamesPublicIDs: a fact already remembered is named to the model
// by the id the API shows (the one memory_forget takes), never the row's
// number; a repeat within the call names the fact it repeats.
func TestMemoryNamesPublicIDs(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, d *db.DB) {
		p := &scripted{answers: []model.Response{
			{ToolCalls: []model.ToolCall{call("w", "memory_write",
				`{"facts":[{"text":"ada PREFERS  metric units."},{"text":"Ada leads the Oslo office."},{"text":"Ada leads the Oslo office."}]}`)}},
			{Text: "Saved."},
		}}
		h := newHarness(t, d, p)
		conv := h.memoryAgent(t)
		public := h.remember(t, conv, "Ada prefers metric units.")
		row, err := gid.Decode(public)
		require.NoError(t, err)

		require.Equal(t, turn.StatusCOMPLETED, h.wait(t, h.send(t, conv, "Remember these", "")).Status)
		heard := lastTool(p.request(1)).Text
		require.Contains(t, heard, "already remembered (id "+public+"): nothing was saved", heard)
		require.Contains(t, heard, "repeats facts[1] of this call: nothing more was saved", heard)
		require.NotRegexp(t, regexp.MustCompile(`\b`+strconv.Itoa(row)+`\b`), heard, "the row's number never reaches the model")
		require.Equal(t, 2, h.client.Memory.Query().CountX(tenancy.System(context.Background())))
	})
}

// TestOneBadFactKeepsTheOthers: of three facts, an empty one or one over
// 500 characters fails alone, named by its index and reason, and the two
// others are stored; a fault in the call's own shape still refuses it
// whole, and all-or-nothing tools stay so.
func TestOneBadFactKeepsTheOthers(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, d *db.DB) {
		long := strings.Repeat("x", 501)
		p := &scripted{answers: []model.Response{
			{ToolCalls: []model.ToolCall{
				call("e", "memory_write", `{"facts":[{"text":"Ada prefers tea."},{"text":""},{"text":"Ada works in Oslo."}]}`),
				call("l", "memory_write", `{"facts":[{"text":"Ada rides to work."},{"text":"`+long+`"},{"text":"Ada reads Norwegian."}]}`),
				call("s", "memory_write", `{"facts":[{"text":"Ada owns a cat."},{"text":""}],"tags":["x"]}`),
			}},
			{Text: "Saved."},
		}}
		h := newHarness(t, d, p)
		conv := h.memoryAgent(t)
		id := h.send(t, conv, "Remember these", "")
		require.Equal(t, turn.StatusCOMPLETED, h.wait(t, id).Status)

		heard := map[string]string{}
		for _, m := range p.request(1).Messages {
			if m.Role == model.RoleTool {
				heard[m.ToolCallID] = m.Text
			}
		}
		require.Len(t, heard, 3)
		require.Contains(t, heard["e"], `"text":"Ada prefers tea."`)
		require.Contains(t, heard["e"], `"text":"Ada works in Oslo."`)
		require.Contains(t, heard["e"], `- #1 ({"text":""}): refused, nothing ran (argument "facts[1].text": needs at least 1 character, got 0)`)
		require.Contains(t, heard["l"], `"text":"Ada rides to work."`)
		require.Contains(t, heard["l"], `"text":"Ada reads Norwegian."`)
		require.Contains(t, heard["l"], `refused, nothing ran (argument "facts[1].text": takes at most 500 characters, got 501)`)
		require.True(t, strings.HasPrefix(heard["s"], "Refused: nothing ran"), "an unknown argument refuses the call: %s", heard["s"])
		require.Contains(t, heard["s"], `unknown argument "tags"`)

		texts := h.client.Memory.Query().Select(memory.FieldText).StringsX(tenancy.System(context.Background()))
		require.ElementsMatch(t, []string{"Ada prefers tea.", "Ada works in Oslo.", "Ada rides to work.", "Ada reads Norwegian."}, texts,
			"two of each three stored, the third call's none")

		calls := h.calls(t, id)
		require.Len(t, calls, 3)
		for _, c := range calls[:2] {
			require.Equal(t, schematype.OutcomeHits, c.Outcome)
			require.Len(t, c.Failures, 1)
			require.Equal(t, 1, c.Failures[0].Item)
			require.Equal(t, schematype.FailureRefused, c.Failures[0].Kind)
			require.Equal(t, 3, strings.Count(c.Arguments, `"text"`), "recorded with the three facts the model sent")
		}
		require.Equal(t, schematype.OutcomeRefused, calls[2].Outcome)
	})
}

// embeddingEndpoint is an OpenAI-compatible /v1/embeddings server that
// answers 503 while down.
type embeddingEndpoint struct{ down atomic.Bool }

func (f *embeddingEndpoint) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Input []string `json:"input"`
		Model string   `json:"model"`
	}
	if f.down.Load() || json.NewDecoder(r.Body).Decode(&req) != nil {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte(`{"error":{"message":"embedding backend is down"}}`))
		return
	}
	data := make([]map[string]any, len(req.Input))
	for i, in := range req.Input {
		data[i] = map[string]any{"object": "embedding", "index": i, "embedding": embed.Vector(in)}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"object": "list", "model": req.Model, "data": data,
		"usage": map[string]int{"prompt_tokens": 1, "total_tokens": 1}})
}

// withWatchedEmbeddings serves the API's and the runtime's embedding model
// from f, through the official SDK, watched as the server watches it and
// asked again every 20 ms while it does not answer.
func withWatchedEmbeddings(t *testing.T, f *embeddingEndpoint) (option, *embed.Watched) {
	t.Helper()
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	e, err := embed.New(embed.Config{Provider: embed.ProviderOpenAI, BaseURL: srv.URL + "/v1", APIKey: "test", Model: "bge-small"})
	require.NoError(t, err)
	w := embed.Watch(e, 20*time.Millisecond)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return func(c *loop.Config) { c.EmbeddingsDown = w.Down }, w
}

// TestMemoryOfferedWhileEmbeddingsAnswer: with the embedding endpoint
// answering 503 since start, the memory tools are not offered, and the
// catalogue (the admin console's document) says why; once the endpoint
// answers again, they are offered and work.
func TestMemoryOfferedWhileEmbeddingsAnswer(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, d *db.DB) {
		f := &embeddingEndpoint{}
		f.down.Store(true)
		withEmbeddings, watched := withWatchedEmbeddings(t, f)
		p := &scripted{answers: []model.Response{{Text: "Nothing to remember."}}}
		// The API's tools and the runtime's offering read the same model.
		h := newHarnessWith(t, d, p, watched, withEmbeddings)
		require.Eventually(t, func() bool { return watched.Down() != "" }, 10*time.Second, 5*time.Millisecond, "the probe at start tells")

		conv := h.memoryAgent(t)
		require.Equal(t, turn.StatusCOMPLETED, h.wait(t, h.send(t, conv, "Hello", "")).Status)
		got := offered(p.request(0))
		require.NotEmpty(t, got)
		for _, name := range []string{"memory_write", "memory_search", "memory_forget"} {
			require.NotContains(t, got, name, "a tool that cannot work is not offered")
		}

		agentID := h.gql(t, `query($c: ID!) { node(id: $c) { ... on Conversation { agent { id } } } }`,
			map[string]any{"c": conv})["node"].(map[string]any)["agent"].(map[string]any)["id"]
		catalogue := func() map[string]any {
			return h.gql(t, `query($a: ID) { catalogue(agentId: $a) { tools { name offered notOfferedReason } warnings } }`,
				map[string]any{"a": agentID})["catalogue"].(map[string]any)
		}
		c := catalogue()
		why := map[string]any{}
		for _, tool := range c["tools"].([]any) {
			m := tool.(map[string]any)
			why[m["name"].(string)] = m["notOfferedReason"]
			require.Equal(t, m["offered"], m["notOfferedReason"] == nil, m["name"])
		}
		require.Contains(t, why["memory_write"], "the embedding model bge-small does not answer (")
		require.Contains(t, why["memory_write"], "503")
		require.Equal(t, "not in the agent's tools", why["knowledge_search"])
		require.Nil(t, why["calculator"])
		require.Len(t, c["warnings"], 1)
		require.Contains(t, c["warnings"].([]any)[0], "so memory_search, memory_write, memory_forget are not offered until it answers")

		f.down.Store(false)
		require.Eventually(t, func() bool { return watched.Down() == "" }, 10*time.Second, 5*time.Millisecond, "asked again, it answers")
		p.mu.Lock()
		p.answers = []model.Response{
			{ToolCalls: []model.ToolCall{call("w", "memory_write", `{"facts":[{"text":"Ada prefers tea."}]}`)}},
			{Text: "Saved."},
		}
		p.mu.Unlock()
		require.Equal(t, turn.StatusCOMPLETED, h.wait(t, h.send(t, conv, "Remember that I prefer tea", "")).Status)
		require.Contains(t, offered(p.request(1)), "memory_write", "offered again once it answers")
		require.Contains(t, lastTool(p.request(2)).Text, `"text":"Ada prefers tea."`)
		require.Empty(t, catalogue()["warnings"])
	})
}
