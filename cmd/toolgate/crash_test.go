package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/db"
	"github.com/toolgate/toolgate/db/dbtest"
	"github.com/toolgate/toolgate/ent"
	"github.com/toolgate/toolgate/ent/conversation"
	"github.com/toolgate/toolgate/ent/schematype"
	"github.com/toolgate/toolgate/ent/tenancy"
	"github.com/toolgate/toolgate/ent/turn"
	"github.com/toolgate/toolgate/graph"
)

// Crash test sizes: 20 kills per database, over 4 conversations of 8 turns
// of 3 charges each (every third turn asks a question first): enough work
// that the last kill still finds turns running.
const (
	crashKills         = 20
	crashConversations = 4
	crashTurns         = 8
	crashCharges       = 3
)

// TestCrashResume builds the real binary and runs it against each
// database, driving turns through a model provider and an MCP application
// that speak the real protocols (OpenAI's streamed Chat Completions, MCP
// over Streamable HTTP). It kills the process with SIGKILL at random
// points, 20 times (before a turn's first model call, during model calls,
// during tool calls, between steps, after answerClarification), restarts
// it each time, and then checks that every turn finished, that no write
// (a charge) ran twice and that no result was lost: every charge that ran
// is recorded, with its result, or as MAY_HAVE_RUN when the kill came
// between the call and its record.
func TestCrashResume(t *testing.T) {
	t.Parallel()
	bin := buildBinary(t)
	for _, backend := range []dbtest.Backend{dbtest.SQLite, dbtest.Postgres} {
		t.Run(string(backend), func(t *testing.T) {
			t.Parallel()
			crashRun(t, bin, dbtest.URL(t, backend))
		})
	}
}

// built is the binary the crash and drain tests run, built once; TestMain
// removes its folder.
var built struct {
	once sync.Once
	dir  string
	path string
	err  error
}

func buildBinary(t *testing.T) string {
	t.Helper()
	built.once.Do(func() {
		built.dir, built.err = os.MkdirTemp("", "toolgate-bin-")
		if built.err != nil {
			return
		}
		built.path = filepath.Join(built.dir, "toolgate")
		// go test puts its own go first on PATH.
		out, err := exec.Command("go", "build", "-o", built.path, ".").CombinedOutput()
		if err != nil {
			built.err = fmt.Errorf("%w: %s", err, out)
		}
	})
	require.NoError(t, built.err)
	return built.path
}

// billing is an MCP application whose one tool, charge, is a write. It
// counts how often each charge ran.
type billing struct {
	mu     sync.Mutex
	ran    map[string]int
	active atomic.Int32
	// hold, when set, keeps each charge's answer until it is closed.
	hold chan struct{}
}

func (b *billing) serve(t *testing.T) string {
	b.ran = map[string]int{}
	server := sdk.NewServer(&sdk.Implementation{Name: "billing", Version: "1"}, nil)
	schema := json.RawMessage(`{"type":"object","properties":{"name":{"type":"string"}},"required":["name"],"additionalProperties":false}`)
	server.AddTool(&sdk.Tool{Name: "charge", Description: "Charge an account once.", InputSchema: schema},
		func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			var args struct{ Name string }
			if err := json.Unmarshal(req.Params.Arguments, &args); err != nil {
				return nil, err
			}
			b.active.Add(1)
			defer b.active.Add(-1)
			b.mu.Lock()
			b.ran[args.Name]++
			b.mu.Unlock()
			// The charge is made; its answer takes a while to come back.
			if b.hold != nil {
				select {
				case <-b.hold:
				case <-ctx.Done():
				}
			} else {
				sleep(ctx, time.Duration(20+rand.IntN(300))*time.Millisecond)
			}
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "charged " + args.Name}}}, nil
		})
	srv := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return server }, nil))
	t.Cleanup(srv.Close)
	return srv.URL
}

func (b *billing) runs() map[string]int {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make(map[string]int, len(b.ran))
	for k, v := range b.ran {
		out[k] = v
	}
	return out
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

var markerRe = regexp.MustCompile(`turn (c\d+-t\d+)( ask)?`)

// fakeModel speaks OpenAI's streamed Chat Completions. Its answers follow
// from the conversation it is sent, so a turn resumed after a kill is
// answered as it would have been: ask first when the user's message says
// "ask" (clarify), then charge "<turn>-1", "<turn>-2", "<turn>-3", one per
// step, then answer.
type fakeModel struct {
	active atomic.Int32
}

func (m *fakeModel) serve(t *testing.T) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m.active.Add(1)
		defer m.active.Add(-1)
		var req struct {
			Messages []json.RawMessage `json:"messages"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		// The turn's own messages start at the last user message naming it.
		marker, ask, start := "", false, 0
		for i, raw := range req.Messages {
			var msg struct{ Role string }
			_ = json.Unmarshal(raw, &msg)
			if msg.Role != "user" {
				continue
			}
			if g := markerRe.FindStringSubmatch(string(raw)); g != nil {
				marker, ask, start = g[1], g[2] != "", i
			}
		}
		asked, charges := false, 0
		for _, raw := range req.Messages[start:] {
			var msg struct {
				Role      string
				ToolCalls []struct {
					Function struct{ Name string }
				} `json:"tool_calls"`
			}
			_ = json.Unmarshal(raw, &msg)
			for _, c := range msg.ToolCalls {
				switch c.Function.Name {
				case "clarify":
					asked = true
				case "billing__charge":
					charges++
				}
			}
		}
		sleep(r.Context(), time.Duration(20+rand.IntN(300))*time.Millisecond)
		if r.Context().Err() != nil {
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		chunk := func(v any) {
			b, _ := json.Marshal(v)
			fmt.Fprintf(w, "data: %s\n\n", b)
		}
		call := func(id, name, args string) {
			chunk(map[string]any{"id": "x", "object": "chat.completion.chunk", "created": 1, "model": "gpt-4.1", "choices": []any{map[string]any{
				"index": 0, "finish_reason": "tool_calls", "delta": map[string]any{"role": "assistant", "tool_calls": []any{map[string]any{
					"index": 0, "id": id, "type": "function", "function": map[string]any{"name": name, "arguments": args}}}}}}})
		}
		switch {
		case marker == "":
			t.Errorf("a model call without the turn's message: %s", req.Messages)
		case ask && !asked:
			call("call_"+marker+"_ask", "clarify", `{"question": "Which account?"}`)
		case charges < crashCharges:
			name := fmt.Sprintf("%s-%d", marker, charges+1)
			call("call_"+name, "billing__charge", `{"name": "`+name+`"}`)
		default:
			chunk(map[string]any{"id": "y", "object": "chat.completion.chunk", "created": 1, "model": "gpt-4.1", "choices": []any{map[string]any{
				"index": 0, "finish_reason": "stop", "delta": map[string]any{"role": "assistant", "content": "Done with " + marker + "."}}}})
		}
		chunk(map[string]any{"id": "x", "object": "chat.completion.chunk", "created": 1, "model": "gpt-4.1", "choices": []any{},
			"usage": map[string]any{"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110}})
		fmt.Fprint(w, "data: [DONE]\n\n")
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/v1"
}

// crashServer runs the binary's serve command.
type crashServer struct {
	t        *testing.T
	bin, url string
	addr     string
	env      []string
	log      *os.File
	cmd      *exec.Cmd
	token    string
	startup  time.Duration // spent starting, in all
}

// newCrashServer bootstraps an organisation on url and returns the binary's
// serve command ready to start, with env and its admin's token; its log
// goes to a file, printed (its last 8 KB) when the test fails.
func newCrashServer(t *testing.T, bin, url string, env ...string) *crashServer {
	t.Helper()
	logFile, err := os.Create(filepath.Join(t.TempDir(), "server.log"))
	require.NoError(t, err)
	t.Cleanup(func() {
		if t.Failed() {
			log, _ := os.ReadFile(logFile.Name())
			t.Logf("server log (last 8 KB):\n%s", tail(string(log), 8<<10))
		}
		_ = logFile.Close()
	})
	out, err := exec.Command(bin, "bootstrap", "--org", "Acme", "--user", "Ada", "--department", "Billing", "--database-url", url).Output()
	require.NoError(t, err)
	var grant struct{ Token string }
	require.NoError(t, json.Unmarshal(out, &grant))
	return &crashServer{t: t, bin: bin, url: url, addr: freeAddr(t), log: logFile, env: env, token: grant.Token}
}

func (s *crashServer) start() {
	s.t.Helper()
	// The fake at OPENAI_BASE_URL speaks chat completions only: the
	// embedding model is the built-in one, which the server asks at start.
	s.cmd = exec.Command(s.bin, "serve", "--addr", s.addr, "--database-url", s.url, "--model-provider", "openai", "--model", "gpt-4.1",
		"--embedding-provider", "local")
	s.cmd.Env = append(os.Environ(), s.env...)
	s.cmd.Stdout, s.cmd.Stderr = s.log, s.log
	require.NoError(s.t, s.cmd.Start())
	begin := time.Now()
	defer func() { s.startup += time.Since(begin) }()
	require.Eventually(s.t, func() bool {
		res, err := http.Get("http://" + s.addr + "/readyz")
		if err != nil {
			return false
		}
		res.Body.Close()
		return res.StatusCode == http.StatusOK
	}, 60*time.Second, 20*time.Millisecond, "the server did not start")
}

func (s *crashServer) kill() {
	_ = s.cmd.Process.Signal(syscall.SIGKILL)
	_ = s.cmd.Wait()
}

func (s *crashServer) stop() {
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- s.cmd.Wait() }()
	select {
	case err := <-done:
		require.NoError(s.t, err, "a graceful stop")
	case <-time.After(60 * time.Second):
		s.kill()
		s.t.Fatal("the server did not stop on SIGTERM")
	}
}

// gql runs an operation; errors (the server being killed) are returned,
// not failed on.
func (s *crashServer) gql(query string, vars map[string]any) (map[string]any, error) {
	body, _ := json.Marshal(map[string]any{"query": query, "variables": vars})
	req, err := http.NewRequest(http.MethodPost, "http://"+s.addr+"/graphql", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+s.token)
	res, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		return nil, err
	}
	var out struct {
		Data   map[string]any `json:"data"`
		Errors []any          `json:"errors"`
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		return nil, fmt.Errorf("%w: %s", err, raw)
	}
	if len(out.Errors) > 0 {
		return nil, fmt.Errorf("%s", raw)
	}
	return out.Data, nil
}

func freeAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}

func crashRun(t *testing.T, bin, url string) {
	ctx := tenancy.System(context.Background())
	bill, model := &billing{}, &fakeModel{}
	billURL, modelURL := bill.serve(t), model.serve(t)
	logFile, err := os.Create(filepath.Join(t.TempDir(), "server.log"))
	require.NoError(t, err)
	defer logFile.Close()
	s := &crashServer{t: t, bin: bin, url: url, addr: freeAddr(t), log: logFile,
		env: []string{"OPENAI_BASE_URL=" + modelURL, "OPENAI_API_KEY=test", "TOOLGATE_TEST_STALE_AFTER=2s", "TOOLGATE_DRAIN_GRACE=5s"}}
	out, err := exec.Command(bin, "bootstrap", "--org", "Acme", "--user", "Ada", "--department", "Billing", "--database-url", url).Output()
	require.NoError(t, err)
	var grant struct{ Token string }
	require.NoError(t, json.Unmarshal(out, &grant))
	s.token = grant.Token
	d, err := db.Open(ctx, url)
	require.NoError(t, err)
	defer d.Close()
	client := d.Client()
	defer func() {
		if t.Failed() {
			log, _ := os.ReadFile(logFile.Name())
			t.Logf("server log (last 8 KB):\n%s", tail(string(log), 8<<10))
		}
	}()

	s.start()
	must := func(data map[string]any, err error) map[string]any {
		t.Helper()
		require.NoError(t, err)
		return data
	}
	must(s.gql(`mutation($u: String!) { registerApplication(input: {name: "billing", url: $u, allowedTools: ["charge"]}) { id } }`, map[string]any{"u": billURL}))
	agent := must(s.gql(`mutation { createAgent(input: {name: "Clerk", instructions: "Charge as asked.", tools: ["billing__charge"]}) { id } }`, nil))
	agentID := agent["createAgent"].(map[string]any)["id"]
	convs := make([]string, crashConversations)
	for i := range convs {
		c := must(s.gql(`mutation($a: ID!, $t: String) { startConversation(input: {agentId: $a, title: $t}) { id } }`,
			map[string]any{"a": agentID, "t": fmt.Sprintf("c%d", i)}))
		convs[i] = c["startConversation"].(map[string]any)["id"].(string)
	}

	// drive sends each conversation its next message once its last turn is
	// done, and answers questions; it reads the state from the database.
	var (
		answeredAt time.Time
		failure    string
	)
	drive := func() (done bool) {
		done = true
		for i, conv := range convs {
			turns := client.Turn.Query().Where(turn.HasConversationWith(conversation.TitleEQ(fmt.Sprintf("c%d", i)))).
				Order(ent.Asc(turn.FieldNumber)).AllX(ctx)
			last := len(turns)
			if last > 0 {
				switch tu := turns[last-1]; tu.Status {
				case turn.StatusCOMPLETED:
				case turn.StatusWAITING_FOR_CLARIFICATION:
					done = false
					if _, err := s.gql(`mutation($t: ID!) { answerClarification(input: {turnId: $t, answer: "The main account."}) { id } }`,
						map[string]any{"t": graph.EncodeID(tu.ID)}); err == nil {
						answeredAt = time.Now()
					}
					continue
				case turn.StatusRUNNING:
					done = false
					continue
				default:
					failure = fmt.Sprintf("turn %d of c%d ended %s: %v", tu.Number, i, tu.Status, tu.Error)
					return true
				}
			}
			if last == crashTurns {
				continue
			}
			done = false
			text := fmt.Sprintf("Please handle turn c%d-t%d", i, last+1)
			if (last+1)%3 == 2 {
				text = fmt.Sprintf("Please handle turn c%d-t%d ask", i, last+1)
			}
			_, _ = s.gql(`mutation($c: ID!, $x: String!) { sendMessage(input: {conversationId: $c, text: $x}) { id } }`,
				map[string]any{"c": conv, "x": text})
		}
		return done
	}

	// Each kill aims at a phase in turn, and is counted by where it landed.
	targets := []string{"early", "model", "tool", "between", "answered"}
	phases := map[string]int{}
	for kill := range crashKills {
		if kill > 0 {
			s.start()
		}
		started := time.Now()
		aim := targets[kill%len(targets)]
		busy := false
		for time.Since(started) < 5*time.Second {
			drive()
			require.Empty(t, failure)
			inModel, inTool := model.active.Load() > 0, bill.active.Load() > 0
			busy = busy || inModel || inTool
			hit := false
			switch aim {
			case "early":
				hit = time.Since(started) > time.Duration(rand.IntN(500))*time.Millisecond
			case "model":
				hit = inModel
			case "tool":
				hit = inTool
			case "between":
				hit = busy && !inModel && !inTool
			case "answered":
				hit = time.Since(answeredAt) < 200*time.Millisecond
			}
			if hit {
				break
			}
			time.Sleep(time.Duration(rand.IntN(30)) * time.Millisecond)
		}
		switch {
		case time.Since(answeredAt) < 300*time.Millisecond:
			phases["just after answerClarification"]++
		case bill.active.Load() > 0:
			phases["during a tool call"]++
		case model.active.Load() > 0:
			phases["during a model call"]++
		case busy:
			phases["between steps"]++
		default:
			phases["before any call (a turn not yet started or resumed)"]++
		}
		s.kill()
	}
	t.Logf("kills: %v; %s spent starting", phases, s.startup)
	final := time.Now()
	defer func() { t.Logf("the last run finished the turns in %s", time.Since(final)) }()
	require.NotZero(t, phases["during a model call"])
	require.NotZero(t, phases["during a tool call"])

	left := runningJobs(t, d)
	s.start()
	restarted := time.Now()
	require.Eventually(t, drive, 3*time.Minute, 100*time.Millisecond, "every turn finishes after the last restart")
	require.Empty(t, failure)
	// The jobs the kills left running are finished within a minute of the
	// restart, and the queue's metric says nothing runs.
	s.requireQueueIdle(t, d, restarted)
	t.Logf("%d jobs the kills left running were finished within %s of the restart", left, time.Since(restarted).Round(time.Millisecond))
	s.stop()

	// Every turn finished.
	turns := client.Turn.Query().WithToolCalls().AllX(ctx)
	require.Len(t, turns, crashConversations*crashTurns)
	ran := bill.runs()
	recorded := map[string]*ent.ToolCall{}
	for _, tu := range turns {
		require.Equal(t, turn.StatusCOMPLETED, tu.Status, "turn %d: %v", tu.ID, tu.Error)
		charges := 0
		for _, c := range tu.Edges.ToolCalls {
			if c.Name != "billing__charge" {
				continue
			}
			charges++
			var args struct{ Name string }
			require.NoError(t, json.Unmarshal([]byte(c.Arguments), &args))
			require.NotContains(t, recorded, args.Name, "charge %s recorded twice", args.Name)
			recorded[args.Name] = c
			switch c.Outcome {
			case schematype.OutcomeHits:
				// Ran once, and its result was kept.
				require.Equal(t, 1, ran[args.Name], "charge %s", args.Name)
				res := c.QueryResult().OnlyX(ctx)
				require.Equal(t, "charged "+args.Name, string(res.Content))
			case schematype.OutcomeMayHaveRun:
				// The kill came between the call and its record: never sent again.
				require.LessOrEqual(t, ran[args.Name], 1, "charge %s", args.Name)
			default:
				t.Errorf("charge %s: %s %v", args.Name, c.Outcome, c.Message)
			}
		}
		require.Equal(t, crashCharges, charges, "turn %d", tu.ID)
	}
	// No write ran twice, and none ran without a record.
	for name, n := range ran {
		require.Equal(t, 1, n, "charge %s ran %d times", name, n)
		require.Contains(t, recorded, name, "charge %s ran but is not recorded", name)
	}
	require.Len(t, recorded, crashConversations*crashTurns*crashCharges)
}

// runningJobs counts the jobs River's table shows running.
func runningJobs(t *testing.T, d *db.DB) int {
	t.Helper()
	counts, err := d.Queue().Executor().JobCountByAllStates(context.Background(), &riverdriver.JobCountByAllStatesParams{})
	require.NoError(t, err)
	return counts[rivertype.JobStateRunning]
}

// requireQueueIdle requires, once every turn has ended, that no job is
// left running, in River's table and in the server's metric, within a
// minute of the restart.
func (s *crashServer) requireQueueIdle(t *testing.T, d *db.DB, restarted time.Time) {
	t.Helper()
	for {
		jobs, metric := runningJobs(t, d), s.metric(t, `toolgate_job_queue_jobs{state="running"}`)
		if jobs == 0 && metric == 0 {
			t.Logf("no job running %s after the restart", time.Since(restarted).Round(time.Millisecond))
			return
		}
		if time.Since(restarted) > time.Minute {
			require.Failf(t, "jobs left running", "a minute after the restart, with every turn ended: %d jobs running in River's table, %v in the metric", jobs, metric)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// metric reads one series of the server's /metrics; -1 when it is absent.
func (s *crashServer) metric(t *testing.T, series string) float64 {
	t.Helper()
	res, err := http.Get("http://" + s.addr + "/metrics")
	require.NoError(t, err)
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	for _, line := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			require.NoError(t, err, line)
			return f
		}
	}
	return -1
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
