package loop_test

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

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/db/dbtest"
	"github.com/toolgate/toolgate/ent"
	"github.com/toolgate/toolgate/ent/agent"
	"github.com/toolgate/toolgate/ent/modelcall"
	"github.com/toolgate/toolgate/ent/tenancy"
	"github.com/toolgate/toolgate/graph/gid"
	"github.com/toolgate/toolgate/offer/token"
	"github.com/toolgate/toolgate/runtime/model/openai"
	"github.com/toolgate/toolgate/tools/registry"
)

// cachingServer speaks Chat Completions and reports usage as OpenAI
// documents its prompt cache: the prompt (tools, then messages) counted in
// o200k tokens, of which the longest prefix shared with an earlier request
// of the same prompt_cache_key is read from the cache, in steps of 128
// tokens from 1,024. So its cache figures measure how byte-stable the
// prompts the runtime sends are.
type cachingServer struct {
	mu    sync.Mutex
	steps []string // the answers, in order, as JSON messages
	n     int
	seen  map[string][]string // prompts by cache key
	tools int                 // tools offered on the last request
	// prefixes counts the distinct prefixes (definitions, system prompt)
	// sent: one, when the prefix is byte-stable.
	prefixes map[string]bool
	failed   error
}

func (s *cachingServer) reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.n, s.seen, s.prefixes = 0, map[string][]string{}, map[string]bool{}
}

func (s *cachingServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	raw, err := io.ReadAll(r.Body)
	var body struct {
		Messages json.RawMessage `json:"messages"`
		Tools    json.RawMessage `json:"tools"`
		Key      string          `json:"prompt_cache_key"`
	}
	if err == nil {
		err = json.Unmarshal(raw, &body)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil || s.n >= len(s.steps) {
		s.failed = fmt.Errorf("request %d: %v", s.n, err)
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	var offered, msgs []json.RawMessage
	_ = json.Unmarshal(body.Tools, &offered)
	_ = json.Unmarshal(body.Messages, &msgs)
	s.tools = len(offered)
	if len(msgs) > 0 {
		s.prefixes[string(body.Tools)+string(msgs[0])+body.Key] = true
	}
	prompt := string(body.Tools) + string(body.Messages)
	input := token.Count(prompt)
	cached := 0
	for _, prev := range s.seen[body.Key] {
		n := 0
		for n < len(prev) && n < len(prompt) && prev[n] == prompt[n] {
			n++
		}
		cached = max(cached, token.Count(prompt[:n]))
	}
	if cached < 1024 {
		cached = 0
	}
	cached = min(cached-cached%128, input)
	s.seen[body.Key] = append(s.seen[body.Key], prompt)
	msg := s.steps[s.n]
	s.n++
	finish := "stop"
	if strings.Contains(msg, `"tool_calls"`) {
		finish = "tool_calls"
	}
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"id":"c%d","object":"chat.completion","created":1,"model":"gpt-4.1","choices":[{"index":0,"message":%s,"finish_reason":%q}],`+
		`"usage":{"prompt_tokens":%d,"completion_tokens":60,"total_tokens":%d,"prompt_tokens_details":{"cached_tokens":%d}}}`,
		s.n, msg, finish, input, input+60, cached)
}

// deckSteps is a deck-building turn of 11 model calls: ten steps that call
// a tool (planning, notes, reading them back, a computed table, the deck
// itself, an edit) and the answer. Its sizes follow a real one: a few
// thousand characters of notes and a deck of about ten thousand.
func deckSteps() []string {
	toolCall := func(id, name string, args any) string {
		a, err := json.Marshal(args)
		if err != nil {
			panic(err)
		}
		m, _ := json.Marshal(map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{
			"id": id, "type": "function", "function": map[string]any{"name": name, "arguments": string(a)}}}})
		return string(m)
	}
	var notes strings.Builder
	for i := range 30 {
		fmt.Fprintf(&notes, "- Region %d: revenue %d k€ in Q3, up %d%% on Q2; churn %d.%d%%; two enterprise renewals pending.\n", i+1, 400+37*i, 3+i%7, 1+i%3, i%10)
	}
	var slides strings.Builder
	slides.WriteString("<!doctype html><html><head><style>section{page-break-after:always;font:24px/1.4 system-ui;padding:48px}h1{font-size:44px}</style></head><body>")
	for i := range 12 {
		fmt.Fprintf(&slides, "<section><h1>Q3 review, part %d</h1><ul><li>Revenue by region, with the quarter's change and what drove it</li>"+
			"<li>Churn held under two per cent in %d of 30 regions</li><li>Renewals: the two enterprise accounts and their dates</li>"+
			"<li>Next quarter: hiring, pricing and the partner programme</li></ul><p>Speaker notes: keep to two minutes.</p></section>", i+1, 20+i)
	}
	slides.WriteString("</body></html>")
	tasks := func(status string) []map[string]string {
		return []map[string]string{{"title": "Gather the Q3 figures", "status": status}, {"title": "Compute the regional table", "status": status},
			{"title": "Build the deck", "status": status}, {"title": "Check the deck", "status": status}}
	}
	return []string{
		toolCall("t1", "update_tasks", map[string]any{"tasks": tasks("pending")}),
		toolCall("t2", "write_file", map[string]any{"files": []any{map[string]string{"path": "q3/notes.md", "content": notes.String()}}}),
		toolCall("t3", "list_files", map[string]any{}),
		toolCall("t4", "read_file", map[string]any{"path": "q3/notes.md"}),
		toolCall("t5", "search_files", map[string]any{"strings": []string{"renewals", "churn"}}),
		toolCall("t6", "calculator", map[string]any{"expression": "(400+37*29)*30/2"}),
		toolCall("t7", "run_code", map[string]any{"code": "const rows = workspace.read('q3/notes.md').split('\\n'); console.log(rows.map((r, i) => i + ': ' + r.length).join('\\n'))"}),
		toolCall("t8", "create_artifact", map[string]any{"title": "Q3 review", "kind": "html", "content": slides.String()}),
		toolCall("t9", "edit_file", map[string]any{"path": "q3/notes.md", "edits": []any{map[string]string{"old": "Region 1:", "new": "Region 1 (north):"}}}),
		toolCall("t10", "update_tasks", map[string]any{"tasks": tasks("done")}),
		`{"role":"assistant","content":"The Q3 deck is ready: twelve slides covering revenue by region, churn, renewals and next quarter's plan."}`,
	}
}

// BenchmarkDeckTurnPrefixShare replays an 11-call deck-building turn with
// every tool offered, through the real OpenAI SDK to cachingServer, and
// reports the turn's prefix share (system prompt and definitions over all
// input: the tool rules measured 43%) and the share of input read from the
// cache. Each turn starts with a cold cache; every call of it must send the
// same prefix bytes.
//
// It runs twice: loading=FULL sends every definition whole on every call;
// loading=DEFERRED (Agent.toolLoading) sends the always-on tools and
// get_tool_schema whole and the rest as stubs, so the same turn takes one
// more call first, to read the definitions it uses, and carries them from
// then on in its messages. defs-in-messages-% is that share: what deferral
// moved out of the prefix rather than saved.
func BenchmarkDeckTurnPrefixShare(b *testing.B) {
	for _, loading := range []agent.ToolLoading{agent.ToolLoadingFULL, agent.ToolLoadingDEFERRED} {
		b.Run("loading="+string(loading), func(b *testing.B) { benchmarkDeckTurn(b, loading) })
	}
}

func benchmarkDeckTurn(b *testing.B, loading agent.ToolLoading) {
	steps := deckSteps()
	if loading == agent.ToolLoadingDEFERRED {
		// The model reads the definitions of the tools it means to use (the
		// calculator, always on, is sent whole).
		read, _ := json.Marshal(map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{
			"id": "t0", "type": "function", "function": map[string]any{"name": "get_tool_schema",
				"arguments": `{"names":["update_tasks","write_file","list_files","read_file","search_files","run_code","create_artifact","edit_file"]}`}}}})
		steps = append([]string{string(read)}, steps...)
	}
	srv := &cachingServer{steps: steps}
	api := httptest.NewServer(srv)
	b.Cleanup(api.Close)
	p, err := openai.New(openai.Options{BaseURL: api.URL + "/v1", APIKey: "test", HTTPClient: api.Client(), DisableStreaming: true})
	require.NoError(b, err)
	h := newHarness(b, dbtest.Open(b, dbtest.SQLite), p)
	var all []string
	for _, def := range registry.All() {
		all = append(all, def.Name)
	}
	convID, err := gid.Decode(h.conversation(b, all...))
	require.NoError(b, err)
	ctx := tenancy.System(context.Background())
	// Every switch on and everything bound, so every tool is offered but
	// those of attachments (none here) and of applications.
	conv := h.client.Conversation.GetX(ctx, convID)
	kb := h.client.KnowledgeBase.Create().SetOrganizationID(conv.OrganizationID).SetName("Finance").SaveX(ctx)
	h.client.Skill.Create().SetOrganizationID(conv.OrganizationID).SetName("deck-style").SetDescription("House style for slide decks.").
		SetInstructions("Twelve slides at most; one idea per slide.").SetPublishedBy(conv.UserID).ExecX(ctx)
	h.client.Agent.UpdateOneID(conv.AgentID).SetMemory(true).SetBudgetCheck(true).SetPastConversationSearch(true).
		SetKnowledgeBaseIds([]int{kb.ID}).SetSkills([]string{"deck-style"}).SetToolLoading(loading).ExecX(ctx)
	h.client.Organization.UpdateOneID(conv.OrganizationID).SetWebResearch(true).ExecX(ctx)
	var calls []*ent.ModelCall
	var defsHeard int64
	b.ResetTimer()
	for b.Loop() {
		b.StopTimer()
		h.client.ToolCall.Delete().ExecX(ctx)
		h.client.ModelCall.Delete().ExecX(ctx)
		h.client.StoredResult.Delete().ExecX(ctx)
		h.client.ArtifactVersion.Delete().ExecX(ctx)
		h.client.Artifact.Delete().ExecX(ctx)
		h.client.WorkspaceFile.Delete().ExecX(ctx)
		h.client.Turn.Delete().ExecX(ctx)
		srv.reset()
		t := h.client.Turn.Create().SetConversationID(convID).SetNumber(1).SetUserText("Build a Q3 review deck from the regional figures").
			SetStartedAt(h.now).SaveX(ctx)
		b.StartTimer()
		if err := h.runner.RunTurn(ctx, t.ID); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		got := h.client.Turn.GetX(ctx, t.ID)
		require.Equal(b, "COMPLETED", string(got.Status), "%v %v", got.Error, srv.failed)
		calls = got.QueryModelCalls().Where(modelcall.KindEQ(modelcall.KindSTEP)).AllX(ctx)
		defsHeard = 0
		for _, tc := range got.QueryToolCalls().AllX(ctx) {
			require.Equal(b, "HITS", string(tc.Outcome), "%s: %v", tc.Name, tc.Message)
			if tc.Name == "get_tool_schema" && tc.Heard != nil {
				// Heard by every later call of the turn.
				defsHeard = int64(token.Count(*tc.Heard)) * int64(len(steps)-1-tc.Step)
			}
		}
		b.StartTimer()
	}
	require.Len(b, calls, len(steps))
	require.Len(b, srv.prefixes, 1, "the prefix is byte-stable over the turn")
	var prefix, input, cached int64
	for _, c := range calls {
		prefix += c.PrefixTokens
		input += c.InputTokens + c.CacheReadTokens + c.CacheWriteTokens
		cached += c.CacheReadTokens
	}
	b.ReportMetric(float64(calls[0].PrefixTokens), "prefix-tokens/call")
	b.ReportMetric(float64(len(calls)), "calls")
	b.ReportMetric(float64(input), "input-tokens/turn")
	b.ReportMetric(100*float64(prefix)/float64(input), "prefix-%")
	b.ReportMetric(100*float64(defsHeard)/float64(input), "defs-in-messages-%")
	b.ReportMetric(100*float64(cached)/float64(input), "cached-%")
	b.ReportMetric(float64(srv.tools), "tools")
	// The share is a ratio to what else the turn read, so it is also given
	// for the tool rules' turn: 13,281 prefix tokens were 43% of its 11
	// calls, so it read 193,677 tokens besides the prefix.
	const rulesRest = 13281 * 11 * 57 / 43
	b.ReportMetric(100*float64(prefix)/float64(prefix+rulesRest), "prefix-%-on-rules-turn")
}
