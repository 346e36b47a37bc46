package replay

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/toolgate/toolgate/offer/token"
	"github.com/toolgate/toolgate/runtime/model"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// conversation drives a provider the way the turn loop does: it sends the
// history, runs nothing, and feeds back a result for every call.
type conversation struct {
	t        *testing.T
	provider model.Provider
	history  []model.Message
}

// say sends a user message and plays the turn to its end, returning every
// answer the provider gave.
func (c *conversation) say(text string) []*model.Response {
	c.t.Helper()
	c.history = append(c.history, model.Message{Role: model.RoleUser, Text: "Ada Lovelace (Research, Analytical Engines Ltd), 2024-05-01 10:00 Europe/London.\n\n" + text})
	var answers []*model.Response
	for range 10 {
		res, err := c.provider.Complete(c.t.Context(), model.Request{Messages: c.history})
		require.NoError(c.t, err)
		answers = append(answers, res)
		c.history = append(c.history, model.Message{Role: model.RoleAssistant, Text: res.Text, ToolCalls: res.ToolCalls})
		if len(res.ToolCalls) == 0 {
			return answers
		}
		for _, call := range res.ToolCalls {
			c.history = append(c.history, model.Message{Role: model.RoleTool, ToolCallID: call.ID, ToolName: call.Name, Text: "ok"})
		}
	}
	c.t.Fatal("the turn did not end")
	return nil
}

func TestDemoScript(t *testing.T) {
	t.Parallel()
	p, err := Load("demo.json")
	require.NoError(t, err)
	c := &conversation{t: t, provider: p}

	turn := c.say("Two items at 1,200 and 850, plus a 20% markup: what's the total?")
	require.Len(t, turn, 3)

	require.Equal(t, "Let me work that out.", turn[0].Text)
	require.NotEmpty(t, turn[0].Thinking)
	require.Len(t, turn[0].ToolCalls, 1)
	require.Equal(t, "calculator", turn[0].ToolCalls[0].Name)
	var calc struct {
		Expression string `json:"expression"`
	}
	require.NoError(t, json.Unmarshal(turn[0].ToolCalls[0].Arguments, &calc))
	require.Equal(t, "(1200 + 850) * 1.2", calc.Expression)

	require.Len(t, turn[1].ToolCalls, 1)
	require.Equal(t, "suggest_next_actions", turn[1].ToolCalls[0].Name)
	var suggest struct {
		Suggestions []string `json:"suggestions"`
	}
	require.NoError(t, json.Unmarshal(turn[1].ToolCalls[0].Arguments, &suggest))
	require.Len(t, suggest.Suggestions, 3)

	require.Contains(t, turn[2].Text, "2,460")
	require.Empty(t, turn[2].ToolCalls)

	for _, res := range turn {
		require.Equal(t, ModelName, res.Model)
		require.Equal(t, StopReason, res.StopReason)
		require.Positive(t, res.Usage.InputUncached, "estimated input tokens")
		require.Positive(t, res.Usage.Output, "estimated output tokens")
	}
	require.NotEqual(t, turn[0].ToolCalls[0].ID, turn[1].ToolCalls[0].ID)
	require.True(t, strings.HasPrefix(turn[0].ToolCalls[0].ID, "call_replay_"))

	// A later turn picks its entry from its own message and starts over.
	thanks := c.say("Thank you!")
	require.Len(t, thanks, 1)
	require.Contains(t, thanks[0].Text, "welcome")

	again := c.say("Again: 1,200 and 850 with a 20% markup?")
	require.Len(t, again, 3)
	require.Equal(t, "calculator", again[0].ToolCalls[0].Name)
	require.NotEqual(t, turn[0].ToolCalls[0].ID, again[0].ToolCalls[0].ID)

	// The Quick start's question goes through the calculator.
	third := c.say("What is 2/3?")
	require.Len(t, third, 2)
	require.Equal(t, "calculator", third[0].ToolCalls[0].Name)
	require.JSONEq(t, `{"expression":"2/3"}`, string(third[0].ToolCalls[0].Arguments))
	require.Contains(t, third[1].Text, "0.666666666667")

	// Anything else is told what the script is, not a made-up answer.
	other := c.say("And for 300 and 40?")
	require.Len(t, other, 1)
	require.Contains(t, other[0].Text, "replay provider")
	require.NotContains(t, other[0].Text, "2,460")
}

func TestStepSelection(t *testing.T) {
	t.Parallel()
	p, err := New(Script{Entries: []Entry{
		{Match: "Weather", Steps: []Step{{Text: "sunny"}}},
		{Match: "two", Steps: []Step{
			{ToolCalls: []ToolCall{{Name: "a"}, {Name: "b", Arguments: json.RawMessage(`{ "x" : 1 }`)}}},
			{Text: "done"},
		}},
	}})
	require.NoError(t, err)
	user := func(s string) model.Message { return model.Message{Role: model.RoleUser, Text: s} }
	assistant := model.Message{Role: model.RoleAssistant}
	tool := model.Message{Role: model.RoleTool, ToolCallID: "x", Text: "r"}
	tests := []struct {
		name      string
		give      []model.Message
		wantText  string
		wantCalls []string
	}{
		{name: "match is case-insensitive", give: []model.Message{user("What's the WEATHER like?")}, wantText: "sunny"},
		{name: "first step", give: []model.Message{user("run two tools")}, wantCalls: []string{"a", "b"}},
		{name: "after the results", give: []model.Message{user("run two tools"), assistant, tool, tool}, wantText: "done"},
		{name: "past the last step", give: []model.Message{user("run two tools"), assistant, tool, assistant}, wantText: NoStepText},
		{name: "latest user message decides", give: []model.Message{user("weather"), assistant, user("two")}, wantCalls: []string{"a", "b"}},
		{name: "no match, no default", give: []model.Message{user("hello")}, wantText: NoEntryText},
		{name: "no history", give: nil, wantText: NoEntryText},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			res, err := p.Complete(t.Context(), model.Request{Messages: tt.give})
			require.NoError(t, err)
			require.Equal(t, tt.wantText, res.Text)
			var names []string
			for _, c := range res.ToolCalls {
				names = append(names, c.Name)
			}
			require.Equal(t, tt.wantCalls, names)
		})
	}

	res, err := p.Complete(t.Context(), model.Request{Messages: []model.Message{user("two")}})
	require.NoError(t, err)
	require.JSONEq(t, `{}`, string(res.ToolCalls[0].Arguments))
	require.Equal(t, `{"x":1}`, string(res.ToolCalls[1].Arguments))
}

func TestNewErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		give Script
		want string
	}{
		{name: "empty", give: Script{}, want: "replay script: no entries"},
		{name: "no steps", give: Script{Entries: []Entry{{Match: "x"}}}, want: "replay script: entry 0: no steps"},
		{name: "empty step", give: Script{Entries: []Entry{{Steps: []Step{{Thinking: "hm"}}}}}, want: "replay script: entry 0, step 0: a step needs text or tool calls"},
		{name: "two defaults", give: Script{Entries: []Entry{{Steps: []Step{{Text: "a"}}}, {Match: " ", Steps: []Step{{Text: "b"}}}}}, want: "replay script: entries 0 and 1 are both the default"},
		{name: "unnamed call", give: Script{Entries: []Entry{{Steps: []Step{{ToolCalls: []ToolCall{{}}}}}}}, want: "replay script: entry 0, step 0: tool call 0: no name"},
		{
			name: "arguments not an object",
			give: Script{Entries: []Entry{{Steps: []Step{{ToolCalls: []ToolCall{{Name: "calculator", Arguments: json.RawMessage(`"2+2"`)}}}}}}},
			want: "replay script: entry 0, step 0: tool call 0 (calculator): arguments must be a JSON object",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := New(tt.give)
			require.EqualError(t, err, tt.want)
		})
	}
}

func TestLoadErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	misspelt := filepath.Join(dir, "misspelt.json")
	require.NoError(t, os.WriteFile(misspelt, []byte(`{"entries":[{"steps":[{"txt":"hi"}]}]}`), 0o600))
	_, err := Load(misspelt)
	require.ErrorContains(t, err, `unknown field "txt"`)

	_, err = Load(filepath.Join(dir, "absent.json"))
	require.ErrorIs(t, err, os.ErrNotExist)
}

func TestProvider(t *testing.T) {
	t.Parallel()
	p, err := New(Script{Entries: []Entry{{Steps: []Step{{Text: "hi"}}}}})
	require.NoError(t, err)
	require.Equal(t, Name, p.Name())

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err = p.Complete(ctx, model.Request{})
	require.ErrorIs(t, err, context.Canceled)
}

// TestSummary: a compaction request is answered with a summary of what the
// person wrote, never with a scripted step (which could call tools).
func TestSummary(t *testing.T) {
	t.Parallel()
	p, err := Demo()
	require.NoError(t, err)
	req := model.Request{Kind: model.KindSummary, Messages: []model.Message{{Role: model.RoleUser,
		Text: "Summarise turns 1–2 of this conversation.\n\n[turn 1] You are talking with Ada.\nuser: What is 6*7?\nassistant: 42\n\n[turn 2] You are talking with Ada.\nuser: " +
			strings.Repeat("long ", 40) + "\ncall calculator {}\n"}}}
	res, err := p.Complete(t.Context(), req)
	require.NoError(t, err)
	require.Empty(t, res.ToolCalls)
	require.Equal(t, "Replayed summary (no model wrote it). The person wrote:\n- What is 6*7?\n- "+strings.Repeat("long ", 16)+"…", res.Text)
}

// TestUsageIsEstimated: a replayed call counts its request and answer in
// o200k tokens; the stable prefix is read from cache once the conversation
// has an answer, as a provider's prompt cache would.
func TestUsageIsEstimated(t *testing.T) {
	t.Parallel()
	p, err := New(Script{Entries: []Entry{{Steps: []Step{{Text: "It is 42."}}}}})
	require.NoError(t, err)
	system := strings.Repeat("You are a careful assistant. ", 40)
	tools := []model.ToolSpec{{Name: "calculator", Description: "Evaluates arithmetic.", Schema: json.RawMessage(`{"type":"object"}`)}}
	first, err := p.Complete(t.Context(), model.Request{System: system, Tools: tools,
		Messages: []model.Message{{Role: model.RoleUser, Text: "What is 6*7?"}}})
	require.NoError(t, err)
	require.Zero(t, first.Usage.CacheRead)
	require.Greater(t, first.Usage.InputUncached, int64(200), "the system prompt is counted")
	require.Equal(t, int64(token.Count("It is 42.")), first.Usage.Output)

	later, err := p.Complete(t.Context(), model.Request{System: system, Tools: tools, Messages: []model.Message{
		{Role: model.RoleUser, Text: "What is 6*7?"}, {Role: model.RoleAssistant, Text: "It is 42."},
		{Role: model.RoleUser, Text: "What is 6*7?"}}})
	require.NoError(t, err)
	require.Positive(t, later.Usage.CacheRead)
	require.Less(t, later.Usage.InputUncached, first.Usage.InputUncached)
	require.Equal(t, int64(token.Count(system)+token.Count("calculator\nEvaluates arithmetic.\n{\"type\":\"object\"}")), later.Usage.CacheRead)
}
