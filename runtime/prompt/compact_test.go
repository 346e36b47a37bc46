package prompt_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/ent"
	"github.com/toolgate/toolgate/runtime/model"
	"github.com/toolgate/toolgate/runtime/prompt"
)

func TestDefaultBudget(t *testing.T) {
	t.Parallel()
	tests := []struct {
		give string
		want int
	}{
		{give: "gpt-4o", want: prompt.MaxBudget},
		{give: "gpt-4o-mini", want: prompt.MaxBudget},
		{give: "gpt-4.1", want: prompt.MaxBudget},
		{give: "claude-sonnet-4-5", want: prompt.MaxBudget},
		{give: "llama3.1", want: 16_000},
		{give: "", want: 16_000},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, prompt.DefaultBudget(tt.give), tt.give)
	}
}

func TestChain(t *testing.T) {
	t.Parallel()
	a := prompt.Summary{From: 1, To: 40, Text: "a"}
	b := prompt.Summary{From: 41, To: 80, Text: "b"}
	folded := prompt.Summary{From: 1, To: 120, Text: "f"}
	c := prompt.Summary{From: 121, To: 150, Text: "c"}
	require.Empty(t, prompt.Chain(nil))
	require.Equal(t, []prompt.Summary{a, b}, prompt.Chain([]prompt.Summary{a, b}))
	require.Equal(t, []prompt.Summary{folded}, prompt.Chain([]prompt.Summary{a, b, folded}), "a folded summary stands alone")
	require.Equal(t, []prompt.Summary{folded, c}, prompt.Chain([]prompt.Summary{a, b, folded, c}))
}

func sizedTurns(from, to, chars int) []prompt.Sized {
	var out []prompt.Sized
	for n := from; n <= to; n++ {
		out = append(out, prompt.Sized{Number: n, Chars: chars})
	}
	return out
}

func TestDue(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		chain    []prompt.Summary
		live     []prompt.Sized
		budget   int
		maxInput int
		wantFrom int
		wantTo   int
		wantOK   bool
	}{
		{name: "within budget", live: sizedTurns(1, 10, 100), budget: 1000, maxInput: 4000},
		{name: "over: the newest half stays", live: sizedTurns(1, 20, 100), budget: 1000, maxInput: 4000, wantFrom: 1, wantTo: 15, wantOK: true},
		{name: "input bound", live: sizedTurns(1, 20, 100), budget: 1000, maxInput: 300, wantFrom: 1, wantTo: 3, wantOK: true},
		{name: "after a summary", chain: []prompt.Summary{{From: 1, To: 10, Text: "s"}}, live: sizedTurns(11, 30, 100), budget: 1000, maxInput: 4000,
			wantFrom: 11, wantTo: 25, wantOK: true},
		{name: "summaries fill a quarter: fold", chain: []prompt.Summary{{From: 1, To: 10, Text: strings.Repeat("s", 300)}},
			live: sizedTurns(11, 30, 100), budget: 1000, maxInput: 4000, wantFrom: 1, wantTo: 25, wantOK: true},
		{name: "one huge last turn: nothing to summarise", live: []prompt.Sized{{Number: 1, Chars: 5000}}, budget: 1000, maxInput: 4000},
		{name: "off", live: sizedTurns(1, 20, 100), budget: -1, maxInput: 4000},
	}
	for _, tt := range tests {
		from, to, ok := prompt.Due(tt.chain, tt.live, tt.budget, tt.maxInput)
		require.Equal(t, []any{tt.wantFrom, tt.wantTo, tt.wantOK}, []any{from, to, ok}, tt.name)
	}
}

func TestFit(t *testing.T) {
	t.Parallel()
	require.Zero(t, prompt.Fit(0, sizedTurns(1, 5, 100), 1000))
	n := prompt.Fit(0, sizedTurns(1, 20, 100), 1000)
	line := prompt.Chars([]model.Message{prompt.LeftOutTurns(1, n)})
	require.LessOrEqual(t, (20-n)*100+line, 1000)
	require.Greater(t, (20-n+1)*100+line, 1000, "no more is left out than needed")
	require.Equal(t, 2, prompt.Fit(0, sizedTurns(1, 3, 5000), 1000), "the last turn always stays")
	require.Equal(t, "[Turns 3–9 left out here to keep the prompt within its budget; read_transcript reads them verbatim.]", prompt.LeftOutTurns(3, 9).Text)
	require.Equal(t, "[Turn 3 left out here to keep the prompt within its budget; read_transcript reads them verbatim.]", prompt.LeftOutTurns(3, 3).Text)
}

func TestSummaryRequest(t *testing.T) {
	t.Parallel()
	p := prompt.Person{Name: "Ada"}
	turn := histTurn("What is 2+2?", "4")
	msgs := prompt.TurnMessages(p, prompt.Past{Turn: turn}, false)
	req := prompt.SummaryRequest(p, 1, 9, []prompt.Summary{{From: 1, To: 8, Text: "Earlier: sums."}}, []prompt.NumberedTurn{{Number: 9, Turn: turn, Messages: msgs}})
	require.Equal(t, model.KindSummary, req.Kind)
	require.Empty(t, req.Tools)
	text := req.Messages[0].Text
	require.True(t, strings.HasPrefix(text, "Summarise turns 1–9 of this conversation."), text)
	require.Contains(t, text, "[summary of turns 1–8]\nEarlier: sums.")
	require.Contains(t, text, "[turn 9] You are talking with Ada.")
	require.Contains(t, text, "\nuser: What is 2+2?\nassistant: 4")
}

func histTurn(q, a string) *ent.Turn {
	return &ent.Turn{Number: 9, UserText: q, Answer: ptr(a), Status: "COMPLETED", StartedAt: time.Unix(0, 0)}
}
