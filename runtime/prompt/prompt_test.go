package prompt_test

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/ent"
	"github.com/toolgate/toolgate/ent/schematype"
	"github.com/toolgate/toolgate/runtime/model"
	"github.com/toolgate/toolgate/runtime/prompt"
	"github.com/toolgate/toolgate/tools"
	"github.com/toolgate/toolgate/tools/result"
)

func def(name string, o tools.Offering, guidanceKey, guidance string) tools.Definition {
	return tools.Definition{Name: name, Offered: o, GuidanceKey: guidanceKey, Guidance: guidance, Schema: json.RawMessage(`{"type":"object"}`)}
}

var builtins = []tools.Definition{
	def("clarify", tools.OfferAlways, "", ""),
	def("read_file", tools.OfferWorkspace, "files", "Files live in the conversation's workspace."),
	def("search_web", tools.OfferAllowlisted, "search", "A search that ran and found nothing is not a failure."),
	def("search_docs", tools.OfferAllowlisted, "search", "A search that ran and found nothing is not a failure."),
	def("remember", tools.OfferMemorySwitch, "", "Remember only what the user asks you to."),
	def("check_budget", tools.OfferBudgetSwitch, "", ""),
	def("search_conversations", tools.OfferPastConversationsSwitch, "search", "A search that ran and found nothing is not a failure."),
}

func names(defs []tools.Definition) []string {
	out := make([]string, len(defs))
	for i, d := range defs {
		out[i] = d.Name
	}
	return out
}

func TestSystemCollectsGuidanceOnce(t *testing.T) {
	t.Parallel()
	a := &ent.Agent{Instructions: "  Be brief.  ", Tools: []string{"search_web", "search_docs", "search_conversations", "remember"}, PastConversationSearch: true, Memory: true}
	got := prompt.System(a, builtins, false)
	want := "Be brief.\n\n" +
		"Files live in the conversation's workspace.\n\n" +
		"A search that ran and found nothing is not a failure.\n\n" +
		"Remember only what the user asks you to.\n\n" +
		prompt.MaterialNotice
	require.Equal(t, want, got)
	// Same agent, same bytes.
	require.Equal(t, got, prompt.System(a, builtins, false))
}

func TestOpening(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 3, 29, 0, 59, 59, 0, time.UTC)
	p := prompt.Person{Name: "Ada", Department: "Research", Organization: "Acme"}
	tests := []struct {
		zone string
		want string
	}{
		{zone: "Europe/Paris", want: "You are talking with Ada (Research, Acme). It is Sunday 29 March 2026, 01:59 (Europe/Paris)."},
		{zone: "Asia/Kolkata", want: "You are talking with Ada (Research, Acme). It is Sunday 29 March 2026, 06:29 (Asia/Kolkata)."},
		{zone: "", want: "You are talking with Ada (Research, Acme). It is Sunday 29 March 2026, 00:59 (UTC)."},
		{zone: "Not/AZone", want: "You are talking with Ada (Research, Acme). It is Sunday 29 March 2026, 00:59 (UTC)."},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, prompt.Opening(p, at, tt.zone), tt.zone)
	}
	require.Equal(t, "You are talking with Bo. It is Sunday 29 March 2026, 00:59 (UTC).", prompt.Opening(prompt.Person{Name: "Bo"}, at, "UTC"))
}

func ptr(s string) *string { return &s }

func TestHistoryReplayLines(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", 3000)
	mk := func(n int) prompt.Past {
		ref := "r_" + string(rune('a'+n))
		small := "r_s" + string(rune('a'+n))
		return prompt.Past{
			Turn: &ent.Turn{Number: n, UserText: "q", Answer: ptr("a"), Status: "COMPLETED", StartedAt: time.Unix(0, 0)},
			Steps: []prompt.Step{{Text: "", Calls: []*ent.ToolCall{
				{ID: n*10 + 1, Name: "read_file", Arguments: `{}`, Outcome: schematype.OutcomeHits, Ref: &ref, Heard: &long},
				{ID: n*10 + 2, Name: "calculator", Arguments: `{}`, Outcome: schematype.OutcomeHits, Ref: &small, Heard: ptr("2")},
			}}},
			Sizes: map[string]int64{ref: 52_345, small: 1},
		}
	}
	past := []prompt.Past{mk(1), mk(2), mk(3)}
	msgs := prompt.History(prompt.Person{Name: "Ada"}, past)
	tool := func(turn, call int) string {
		var seen int
		for _, m := range msgs {
			if m.Role == model.RoleTool {
				if seen == turn*2+call {
					return m.Text
				}
				seen++
			}
		}
		return ""
	}
	// Outside the window: the outcome and the line, no excerpt.
	require.Equal(t, "[HITS] [~51000 of ~52000 chars cut; read_tool_result ref r_b for the rest]", tool(0, 0))
	require.Equal(t, "[HITS]", tool(0, 1), "small and outside the window: the outcome alone")
	// Inside the window: an excerpt and the line.
	require.Equal(t, "[HITS] "+long[:prompt.ExcerptChars]+"\n[~51000 of ~52000 chars cut; read_tool_result ref r_c for the rest]", tool(1, 0))
	// A result that crossed whole carries no line.
	require.Equal(t, "[HITS] 2", tool(2, 1))
	// The line of a call does not change when its turn leaves the window.
	inWindow := prompt.Replay(past[1].Steps[0].Calls[0], true, past[1].Sizes)
	outside := prompt.Replay(past[1].Steps[0].Calls[0], false, past[1].Sizes)
	require.Equal(t, inWindow[strings.LastIndex(inWindow, "\n")+1:], strings.TrimPrefix(outside, "[HITS] "))
	// Rendering is a pure function of what is stored: the same on the next
	// call, so the provider's cache holds.
	again := prompt.History(prompt.Person{Name: "Ada"}, past)
	require.Equal(t, msgs, again)
}

// TestGuidanceQuotesTheLinesAsWritten holds read_tool_result's guidance to
// the lines later turns really carry: each line the history writes must
// match an example the guidance quotes, placeholders aside. (The guidance
// once told the model to look for "[… chars shown; read_tool_result ref …]"
// while the line said "[~N of ~M chars cut; …]".)
func TestGuidanceQuotesTheLinesAsWritten(t *testing.T) {
	t.Parallel()
	quoted := regexp.MustCompile(`"(\[[^"]*\])"`).FindAllStringSubmatch(result.Definition.Guidance, -1)
	require.Len(t, quoted, 2, "the guidance quotes the result line and the arguments line")
	var examples []*regexp.Regexp
	for _, q := range quoted {
		pattern := regexp.MustCompile(`\b[NMPR]\b`).ReplaceAllString(regexp.QuoteMeta(q[1]), `\S+?`)
		examples = append(examples, regexp.MustCompile("^"+pattern+"$"))
	}
	matches := func(line string) bool {
		for _, e := range examples {
			if e.MatchString(line) {
				return true
			}
		}
		return false
	}

	ref, argsRef := "r_Xy-9", "r_Ab_1"
	long := strings.Repeat("word ", 2000)
	args, err := json.Marshal(map[string]any{"files": []any{map[string]any{"path": "a.md", "content": long}}})
	require.NoError(t, err)
	c := &ent.ToolCall{ID: 1, Name: "write_file", Arguments: string(args), Outcome: schematype.OutcomeHits,
		Ref: &ref, Heard: &long, ArgumentsRef: &argsRef}
	for _, recent := range []bool{true, false} {
		lines := strings.Split(prompt.Replay(c, recent, map[string]int64{ref: 52_345}), "\n")
		var written []string
		for _, l := range lines {
			if strings.HasPrefix(l, "[~") || strings.HasPrefix(l, "[arguments") {
				written = append(written, l)
			} else if i := strings.Index(l, "] [~"); i >= 0 {
				written = append(written, l[i+2:])
			}
		}
		require.Len(t, written, 2, lines)
		for _, l := range written {
			require.True(t, matches(l), "%q matches no example the guidance quotes", l)
		}
	}
	// And the guidance quotes them through the functions that write them.
	require.Contains(t, result.Definition.Guidance, tools.CutLine("N", "M", "R"))
}

func TestCapArguments(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("é", 240_000)
	head := strings.Repeat("é", prompt.ArgumentChars) + "…"
	tests := []struct {
		name     string
		give     string
		want     string
		wantCuts []prompt.Cut
	}{
		{name: "short", give: `{"expression": "2/3"}`, want: `{"expression": "2/3"}`},
		{name: "long but no long value", give: `{"strings": [` + strings.Repeat(`"abc",`, 200) + `"abc"]}`,
			want: `{"strings": [` + strings.Repeat(`"abc",`, 200) + `"abc"]}`},
		{
			name:     "a whole file",
			give:     `{"files": [{"path": "a<b>&c.md", "content": "` + long + `"}], "n": 1.50}`,
			want:     `{"files":[{"path":"a<b>&c.md","content":"` + head + `"}],"n":1.50}`,
			wantCuts: []prompt.Cut{{Path: "files[0].content", Chars: 240_000}},
		},
		{
			name:     "two values, in document order",
			give:     `{"z": "` + long + `", "a": ["x", "` + long + `"]}`,
			want:     `{"z":"` + head + `","a":["x","` + head + `"]}`,
			wantCuts: []prompt.Cut{{Path: "z", Chars: 240_000}, {Path: "a[1]", Chars: 240_000}},
		},
		{name: "not JSON", give: `{"content": "` + long, want: `{"content": "` + long},
		{name: "trailing data", give: `{"c": "` + long + `"} {}`, want: `{"c": "` + long + `"} {}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, cuts := prompt.CapArguments(tt.give)
			require.Equal(t, tt.want, got)
			require.Equal(t, tt.wantCuts, cuts)
			require.True(t, json.Valid([]byte(got)) || !json.Valid([]byte(tt.give)))
		})
	}
}

// TestHistoryCapsEarlierArguments: an earlier turn's call replays what was
// asked, not its payload, with one line naming the cut and the ref that
// holds the arguments whole; the turn's result line is unchanged.
func TestHistoryCapsEarlierArguments(t *testing.T) {
	t.Parallel()
	content := strings.Repeat("x", 240_000)
	args, err := json.Marshal(map[string]any{"files": []any{map[string]any{"path": "big.txt", "content": content}}})
	require.NoError(t, err)
	ref, argsRef := "r_res", "r_args"
	ack := `{"files":[{"path":"big.txt","chars":240000,"created":true}]}`
	past := []prompt.Past{{
		Turn: &ent.Turn{Number: 1, UserText: "save it", Answer: ptr("Saved."), Status: "COMPLETED", StartedAt: time.Unix(0, 0)},
		Steps: []prompt.Step{{Calls: []*ent.ToolCall{{ID: 1, Name: "write_file", Arguments: string(args),
			Outcome: schematype.OutcomeHits, Ref: &ref, ArgumentsRef: &argsRef, Heard: &ack}}}},
		Sizes: map[string]int64{ref: int64(len(ack))},
	}}
	msgs := prompt.History(prompt.Person{Name: "Ada"}, past)
	size := 0
	for _, m := range msgs {
		size += len(m.Text)
		for _, c := range m.ToolCalls {
			size += len(c.Arguments)
			require.JSONEq(t, `{"files":[{"path":"big.txt","content":"`+content[:prompt.ArgumentChars]+`…"}]}`, string(c.Arguments))
		}
	}
	require.Less(t, size, 2_000, "a 240,000-character payload is not replayed")
	require.Equal(t, "[HITS] "+ack+"\n[arguments cut: files[0].content ~240000 chars; read_tool_result ref r_args has them whole]", msgs[2].Text)
}

// TestCallsPerTurnCap: an earlier turn replays at most CallsPerTurn calls.
// Evidence and failures keep their place before routine calls, later
// before earlier; the kept calls keep their order; one terse line says how
// many were left out and where they are.
func TestCallsPerTurnCap(t *testing.T) {
	t.Parallel()
	seen := []schematype.Span{{Ref: "r", Start: 0, End: 1}}
	calls := []*ent.ToolCall{
		{ID: 1, Name: "read_file", Outcome: schematype.OutcomeHits, Evidence: seen}, // evidence, earliest
		{ID: 2, Name: "search_files", Outcome: schematype.OutcomeAbsence},           // routine
		{ID: 3, Name: "read_page", Outcome: schematype.OutcomeOutage},               // failure
		{ID: 4, Name: "update_tasks", Outcome: schematype.OutcomeHits},              // routine acknowledgement
		{ID: 5, Name: "read_file", Outcome: schematype.OutcomeHits, Evidence: seen}, // evidence
		{ID: 6, Name: "suggest_next_actions", Outcome: schematype.OutcomeHits},      // routine, latest
	}
	for _, c := range calls {
		c.Arguments = `{}`
	}
	tests := []struct {
		name string
		give int
		want []int
	}{
		{"no cap", 0, []int{1, 2, 3, 4, 5, 6}},
		{"under the cap", 6, []int{1, 2, 3, 4, 5, 6}},
		{"evidence and failures first, later first", 2, []int{3, 5}},
		{"all of them, then the latest routine call", 4, []int{1, 3, 5, 6}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			past := []prompt.Past{{
				Turn:         &ent.Turn{Number: 1, UserText: "q", Answer: ptr("a"), Status: "COMPLETED", StartedAt: time.Unix(0, 0)},
				Steps:        []prompt.Step{{Calls: calls[:3]}, {Calls: calls[3:]}},
				CallsPerTurn: tt.give,
			}}
			msgs := prompt.History(prompt.Person{Name: "Ada"}, past)
			var got []int
			for _, m := range msgs {
				for _, c := range m.ToolCalls {
					var id int
					_, err := fmt.Sscanf(c.ID, "call_%d", &id)
					require.NoError(t, err)
					got = append(got, id)
				}
			}
			require.Equal(t, tt.want, got)
			answer := msgs[len(msgs)-1]
			require.Equal(t, model.RoleAssistant, answer.Role)
			if left := len(calls) - len(tt.want); left > 0 {
				require.Equal(t, "a\n\n"+prompt.LeftOutLine(left), answer.Text)
				require.Contains(t, answer.Text, fmt.Sprintf("(%d more tool calls of this turn are left out here; read_transcript has them.)", left))
			} else {
				require.Equal(t, "a", answer.Text, "nothing left out, no line")
			}
		})
	}
}

// TestSystemSaysDeferNotice: a deferring turn's system prompt tells the
// model how to read what is deferred; a turn sent whole does not.
func TestSystemSaysDeferNotice(t *testing.T) {
	t.Parallel()
	require.Contains(t, prompt.System(&ent.Agent{}, builtins, true), prompt.DeferNotice)
	require.NotContains(t, prompt.System(&ent.Agent{}, builtins, false), prompt.DeferNotice)
}
