package loop_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/db/dbtest"
	"github.com/toolgate/toolgate/ent/schematype"
	"github.com/toolgate/toolgate/ent/tenancy"
	"github.com/toolgate/toolgate/graph/gid"
	"github.com/toolgate/toolgate/offer/token"
	"github.com/toolgate/toolgate/runtime/dispatch"
	"github.com/toolgate/toolgate/runtime/loop"
	"github.com/toolgate/toolgate/runtime/model"
	"github.com/toolgate/toolgate/tools"
	"github.com/toolgate/toolgate/tools/registry"
)

// BenchmarkPromptAssembly assembles the prompt of a turn whose agent has
// every tool, after 200 earlier turns of 3 tool calls each, all replayed
// (no history budget; BenchmarkPromptAssembly1000 has one).
func BenchmarkPromptAssembly(b *testing.B) {
	d := dbtest.Open(b, dbtest.SQLite)
	h := newHarness(b, d, &scripted{answers: []model.Response{{Text: "ok"}}}, withHistoryBudget(-1))
	var all []string
	for _, def := range registry.All() {
		all = append(all, def.Name)
	}
	conv := h.conversation(b, all...)
	convID, err := gid.Decode(conv)
	require.NoError(b, err)
	ctx := tenancy.System(context.Background())
	c := h.client
	big := strings.Repeat("The quarterly report lists revenue by region and month. ", 200)
	for n := 1; n <= 200; n++ {
		tu := c.Turn.Create().SetConversationID(convID).SetNumber(n).SetUserText(fmt.Sprintf("question %d", n)).
			SetAnswer(fmt.Sprintf("answer %d", n)).SetStatus("COMPLETED").SetStartedAt(h.now).SaveX(ctx)
		c.ModelCall.Create().SetTurnID(tu.ID).SetOrganizationID(h.grant.OrganizationID).SetAgentID(1).SetUserID(h.grant.UserID).
			SetProvider("openai").SetModel("gpt-4.1").SetStep(0).SetText("looking").ExecX(ctx)
		for i := range 3 {
			r := c.StoredResult.Create().SetConversationID(convID).SetRef(fmt.Sprintf("r_%d_%d", n, i)).SetKind(schematype.KindText).
				SetContent([]byte(big)).SetChars(int64(len(big))).SetBytes(int64(len(big))).SetItems(1).SaveX(ctx)
			heard := big[:5000]
			c.ToolCall.Create().SetTurnID(tu.ID).SetPosition(i).SetStep(0).SetName("read_file").
				SetArguments(`{"path":"report.txt"}`).SetOutcome(schematype.OutcomeHits).SetAttempts(1).
				SetRef(r.Ref).SetResultID(r.ID).SetHeard(heard).ExecX(ctx)
		}
	}
	current := c.Turn.Create().SetConversationID(convID).SetNumber(201).SetUserText("and now?").SetStartedAt(h.now).SaveX(ctx)
	req, err := h.runner.Prompt(ctx, current.ID)
	require.NoError(b, err)
	require.Equal(b, 200*6+1, len(req.Messages), "user, assistant with calls, 3 results, answer per turn")
	chars := len(req.System)
	for _, m := range req.Messages {
		chars += len(m.Text)
	}
	// The stable prefix an agent with every tool pays on each call: the
	// system prompt and the definitions, in o200k tokens.
	prefix := token.Count(req.System)
	for _, s := range req.Tools {
		def, _ := registry.ByName(s.Name)
		prefix += token.Count(string(def.Wire()))
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := h.runner.Prompt(ctx, current.ID); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(chars), "prompt-chars")
	b.ReportMetric(float64(prefix), "prefix-tokens")
	b.ReportMetric(float64(len(req.Tools)), "tools")
}

// runTurns runs b.N turns in the benchmark's goroutine (RunTurn, the
// job's own code, without the queue's polling) and checks each completed.
func runTurns(b *testing.B, h *harness, conv string) {
	ctx := tenancy.System(context.Background())
	convID, err := gid.Decode(conv)
	require.NoError(b, err)
	b.ResetTimer()
	for b.Loop() {
		b.StopTimer()
		// Keep history short: each turn is measured alone.
		h.client.ToolCall.Delete().ExecX(ctx)
		h.client.ModelCall.Delete().ExecX(ctx)
		h.client.StoredResult.Delete().ExecX(ctx)
		h.client.Turn.Delete().ExecX(ctx)
		t := h.client.Turn.Create().SetConversationID(convID).SetNumber(1).SetUserText("go").SetStartedAt(h.now).SaveX(ctx)
		b.StartTimer()
		if err := h.runner.RunTurn(ctx, t.ID); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		got := h.client.Turn.GetX(ctx, t.ID)
		if got.Status != "COMPLETED" {
			b.Fatalf("turn %s: %v", got.Status, got.Error)
		}
		b.StartTimer()
	}
}

// BenchmarkQueueLatency measures from enqueueing a turn to its end, for a
// turn of one model call that answers at once: the queue's polling plus
// the loop.
func BenchmarkQueueLatency(b *testing.B) {
	h := newHarness(b, dbtest.Open(b, dbtest.SQLite), &scripted{answers: []model.Response{{Text: "done"}}})
	ctx := tenancy.System(context.Background())
	convID, err := gid.Decode(h.conversation(b))
	require.NoError(b, err)
	n := 0
	for b.Loop() {
		n++
		t := h.client.Turn.Create().SetConversationID(convID).SetNumber(n).SetUserText("go").SetStartedAt(h.now).SaveX(ctx)
		sub := h.runner.Events().Subscribe(t.ID)
		if _, err := h.runner.Start(ctx, t.ID); err != nil {
			b.Fatal(err)
		}
		for e := range sub.C {
			if e.Kind == "STATUS" {
				break
			}
		}
		sub.Close()
	}
}

// BenchmarkLoopOverheadPerModelCall runs turns of one model call that
// answers at once: what remains is the loop's own work (load, prompt,
// record the call, finish, events).
func BenchmarkLoopOverheadPerModelCall(b *testing.B) {
	h := newHarness(b, dbtest.Open(b, dbtest.SQLite), &scripted{answers: []model.Response{{Text: "done"}}})
	b.ReportAllocs()
	runTurns(b, h, h.conversation(b))
}

// BenchmarkResolverToolCall runs turns of two model calls with one
// calculator call between: the difference from the benchmark above is the
// runtime's cost of one resolver-backed call (repair, HTTP, GraphQL, scope
// check, store, record), the calculator's own work being microseconds.
func BenchmarkResolverToolCall(b *testing.B) {
	p := &scriptedCycle{answers: []model.Response{
		{ToolCalls: []model.ToolCall{call("c1", "calculator", `{"expression": "1+1"}`)}},
		{Text: "done"},
	}}
	h := newHarness(b, dbtest.Open(b, dbtest.SQLite), p)
	b.ReportAllocs()
	runTurns(b, h, h.conversation(b))
}

// BenchmarkBatchOfFiveSlowCalls runs turns whose model asks for five calls
// at once, each taking 50 ms: they run concurrently, so the turn takes
// about one call's time.
func BenchmarkBatchOfFiveSlowCalls(b *testing.B) {
	slow := tools.Definition{Name: "slow", Family: "test", Offered: tools.OfferAlways, Effect: tools.EffectRead,
		Preview: tools.PreviewLarge, Schema: json.RawMessage(`{"type":"object","properties":{},"additionalProperties":false}`)}
	var calls []model.ToolCall
	for i := range 5 {
		calls = append(calls, call(fmt.Sprintf("s%d", i), "slow", `{}`))
	}
	p := &scriptedCycle{answers: []model.Response{{ToolCalls: calls}, {Text: "done"}}}
	h := newHarness(b, dbtest.Open(b, dbtest.SQLite), p, func(c *loop.Config) { c.Tools = append(registry.All(), slow) })
	h.disp.Builtins["slow"] = func(ctx context.Context, _ dispatch.Scope, _ json.RawMessage) (json.RawMessage, error) {
		select {
		case <-time.After(50 * time.Millisecond):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return json.RawMessage(`{"ok":true}`), nil
	}
	b.ReportAllocs()
	runTurns(b, h, h.conversation(b))
}

// scriptedCycle plays its answers in a loop, one turn after another.
type scriptedCycle struct {
	answers []model.Response
	n       int
}

func (s *scriptedCycle) Name() string { return "scripted" }

func (s *scriptedCycle) Complete(_ context.Context, req model.Request) (*model.Response, error) {
	// The step within the turn is the number of assistant messages after
	// the last user message.
	step := 0
	for i := len(req.Messages) - 1; i >= 0 && req.Messages[i].Role != model.RoleUser; i-- {
		if req.Messages[i].Role == model.RoleAssistant {
			step++
		}
	}
	a := s.answers[min(step, len(s.answers)-1)]
	a.Model = "gpt-4.1"
	return &a, nil
}

// BenchmarkDispatchResolverCall sends one calculator call through the API,
// as the runtime does: repair and validation, an HTTP POST with the turn's
// scope token, scope check, GraphQL execution, classification. The
// calculator's own work is microseconds; this is the runtime's overhead
// per resolver-backed call, before storing.
func BenchmarkDispatchResolverCall(b *testing.B) {
	h := newHarness(b, dbtest.Open(b, dbtest.SQLite), &scripted{answers: []model.Response{{Text: "ok"}}})
	conv := h.conversation(b)
	convID, err := gid.Decode(conv)
	require.NoError(b, err)
	ctx := tenancy.System(context.Background())
	tu := h.client.Turn.Create().SetConversationID(convID).SetNumber(1).SetUserText("x").SetStartedAt(h.now).SaveX(ctx)
	req, err := h.runner.Prompt(ctx, tu.ID)
	require.NoError(b, err)
	offered := map[string]tools.Definition{}
	var names []string
	for _, s := range req.Tools {
		def, _ := registry.ByName(s.Name)
		offered[s.Name] = def
		names = append(names, s.Name)
	}
	token := h.mint(b, tu.ID, convID, names)
	s := dispatch.Scope{TurnID: tu.ID, ConversationID: convID, ConversationRef: conv, Token: token, Offered: offered}
	c := dispatch.Call{ID: "c1", Name: "calculator", Arguments: json.RawMessage(`{"expression": "(1200 + 850) * 1.2"}`)}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if res := h.disp.Do(ctx, s, c); res.Outcome != schematype.OutcomeHits {
			b.Fatalf("%s: %s", res.Outcome, res.Message)
		}
	}
}
