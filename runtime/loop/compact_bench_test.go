package loop_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/db/dbtest"
	"github.com/toolgate/toolgate/ent/summary"
	"github.com/toolgate/toolgate/ent/tenancy"
	"github.com/toolgate/toolgate/graph/gid"
	"github.com/toolgate/toolgate/runtime/model"
	"github.com/toolgate/toolgate/runtime/prompt"
)

// conversing is a model that, every turn, works something out with the
// calculator and then answers at length; it summarises when asked. It
// keeps the first request of each turn.
type conversing struct {
	mu    sync.Mutex
	first []model.Request
}

func (c *conversing) Name() string { return "scripted" }

func (c *conversing) Complete(_ context.Context, req model.Request) (*model.Response, error) {
	usage := model.Usage{InputUncached: 1000, Output: 200}
	if req.Kind == model.KindSummary {
		return &model.Response{Model: "gpt-4.1", Usage: usage,
			Text: strings.Repeat("The person is planning the spring catalogue; prices and codes settled so far are in the turns named. ", 12)}, nil
	}
	last := req.Messages[len(req.Messages)-1]
	if last.Role == model.RoleUser {
		c.mu.Lock()
		c.first = append(c.first, req)
		n := len(c.first)
		c.mu.Unlock()
		return &model.Response{Model: "gpt-4.1", Usage: usage, Text: "Let me work that out.",
			ToolCalls: []model.ToolCall{call(fmt.Sprintf("t%d", n), "calculator", fmt.Sprintf(`{"expression":"%d*17+4"}`, n))}}, nil
	}
	return &model.Response{Model: "gpt-4.1", Usage: usage,
		Text: "Here is where the catalogue stands after that figure. " + strings.Repeat("Each line is priced, coded and checked against the supplier's sheet. ", 9)}, nil
}

func promptChars(req model.Request) (whole, hist int) {
	whole = len([]rune(req.System))
	for _, s := range req.Tools {
		whole += len(s.Name) + len([]rune(s.Description)) + len(s.Schema)
	}
	hist = prompt.Chars(history(req))
	return whole + prompt.Chars(req.Messages), hist
}

// BenchmarkLongConversationPrompt runs 500 real turns (each a calculator
// call and a long answer) under the default history budget of gpt-4.1,
// compacting as they go, and reports the first request of turn 50 and of
// turn 500 (system prompt, definitions and messages, in characters) and
// their ratio: the goal is within 1.5×. What it times is assembling the
// prompt of turn 501.
func BenchmarkLongConversationPrompt(b *testing.B) {
	p := &conversing{}
	h := newHarness(b, dbtest.Open(b, dbtest.SQLite), p, withHistoryBudget(prompt.DefaultBudget("gpt-4.1")))
	conv := h.conversation(b)
	convID, err := gid.Decode(conv)
	require.NoError(b, err)
	ctx := tenancy.System(context.Background())
	run := func(n int) int {
		tu := h.client.Turn.Create().SetConversationID(convID).SetNumber(n).
			SetUserText(fmt.Sprintf("Turn %d: add the next product line to the catalogue and price it for spring.", n)).
			SetStartedAt(h.now).SaveX(ctx)
		return tu.ID
	}
	for n := 1; n <= 500; n++ {
		id := run(n)
		require.NoError(b, h.runner.RunTurn(ctx, id))
		require.Equal(b, "COMPLETED", string(h.client.Turn.GetX(ctx, id).Status))
	}
	w50, h50 := promptChars(p.first[49])
	w500, h500 := promptChars(p.first[499])
	sums := h.client.Summary.Query().Where(summary.ConversationID(convID)).CountX(ctx)
	next := run(501)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := h.runner.Prompt(ctx, next); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(w50), "turn50-chars")
	b.ReportMetric(float64(w500), "turn500-chars")
	b.ReportMetric(float64(w500)/float64(w50), "ratio")
	b.ReportMetric(float64(h50), "turn50-history-chars")
	b.ReportMetric(float64(h500), "turn500-history-chars")
	b.ReportMetric(float64(sums), "summaries")
}

// BenchmarkPromptAssembly1000 assembles the prompt of turn 1,001 of a
// conversation whose 1,000 earlier turns (stored directly, each with a
// tool call) were compacted by one real turn under the default budget of
// gpt-4.1: the summaries and the turns after them are loaded, the
// summarised turns are not.
func BenchmarkPromptAssembly1000(b *testing.B) {
	p := &conversing{}
	h := newHarness(b, dbtest.Open(b, dbtest.SQLite), p, withHistoryBudget(prompt.DefaultBudget("gpt-4.1")))
	conv := h.conversation(b)
	convID, err := gid.Decode(conv)
	require.NoError(b, err)
	ctx := tenancy.System(context.Background())
	for from := 1; from <= 999; from += 333 {
		seed(b, h, convID, from, from+332, itemCode)
	}
	tu := h.client.Turn.Create().SetConversationID(convID).SetNumber(1000).SetUserText("Where are we?").SetStartedAt(h.now).SaveX(ctx)
	require.NoError(b, h.runner.RunTurn(ctx, tu.ID))
	next := h.client.Turn.Create().SetConversationID(convID).SetNumber(1001).SetUserText("And now?").SetStartedAt(h.now).SaveX(ctx)
	req, err := h.runner.Prompt(ctx, next.ID)
	require.NoError(b, err)
	whole, hist := promptChars(req)
	sums := h.client.Summary.Query().Where(summary.ConversationID(convID)).CountX(ctx)
	require.Positive(b, sums)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := h.runner.Prompt(ctx, next.ID); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(whole), "prompt-chars")
	b.ReportMetric(float64(hist), "history-chars")
	b.ReportMetric(float64(sums), "summaries")
}
