package graph_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/db"
	"github.com/toolgate/toolgate/db/dbtest"
	"github.com/toolgate/toolgate/ent"
	"github.com/toolgate/toolgate/ent/schematype"
	"github.com/toolgate/toolgate/ent/tenancy"
	"github.com/toolgate/toolgate/ent/turn"
	"github.com/toolgate/toolgate/graph"
	"github.com/toolgate/toolgate/graph/gid"
	"github.com/toolgate/toolgate/tools/transcript"
)

// pastTurn is a finished turn to seed, straight through ent.
type pastTurn struct {
	user     string
	answer   *string
	thinking string
	zone     string
	calls    []string // arguments of calculator calls, each with a ref
	// said are the texts of the turn's model calls, step by step; the
	// calls are asked in step 0.
	said []string
}

func text(s string) *string { return &s }

// seedTurns appends finished turns to a conversation (a global id) and
// returns its database id.
func seedTurns(t testing.TB, c *ent.Client, conversationID string, turns ...pastTurn) int {
	t.Helper()
	ctx := tenancy.System(context.Background())
	convID, err := gid.Decode(conversationID)
	require.NoError(t, err)
	n := c.Turn.Query().Where(turn.ConversationID(convID)).CountX(ctx)
	for i, pt := range turns {
		create := c.Turn.Create().SetConversationID(convID).SetNumber(n + i + 1).
			SetUserText(pt.user).SetNillableAnswer(pt.answer).SetStatus(turn.StatusCOMPLETED)
		if pt.thinking != "" {
			create.SetThinking(pt.thinking)
		}
		if pt.zone != "" {
			create.SetTimeZone(pt.zone)
		}
		tu := create.SaveX(ctx)
		if len(pt.said) > 0 {
			conv := c.Conversation.GetX(ctx, convID)
			for step, txt := range pt.said {
				c.ModelCall.Create().SetTurnID(tu.ID).SetOrganizationID(conv.OrganizationID).SetAgentID(conv.AgentID).
					SetUserID(conv.UserID).SetStep(step).SetText(txt).SetProvider("openai").SetModel("gpt-4.1").ExecX(ctx)
			}
		}
		for j, args := range pt.calls {
			c.ToolCall.Create().SetTurnID(tu.ID).SetPosition(j).SetName("calculator").
				SetArguments(args).SetOutcome(schematype.OutcomeHits).SetAttempts(1).
				SetRef(fmt.Sprintf("ref-%d-%d", tu.Number, j)).SaveX(ctx)
		}
	}
	return convID
}

const transcriptDoc = `query($c: ID!, $from: Int, $to: Int, $words: String, $offset: Int, $max: Int) {
  transcript(conversationId: $c, fromTurn: $from, toTurn: $to, words: $words, offset: $offset, maxChars: $max) {
    text truncated nextOffset
    turns { number startedAt timeZone userText answer toolCalls { name arguments argumentsTruncated ref } }
  }
}`

// numbers returns the turn numbers of a transcript read.
func numbers(data map[string]any) []int {
	out := []int{}
	for _, tu := range get(data, "transcript", "turns").([]any) {
		out = append(out, int(get(tu, "number").(float64)))
	}
	return out
}

func TestTranscript(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, d *db.DB) {
		b := setup(t, d)
		agentID := b.createAgent(t, b.alice.Token, "Helper")
		conv := b.startConversation(t, b.alice.Token, agentID, "past")
		long := `{"expression":"` + strings.Repeat("1+", 300) + `1"}`
		seedTurns(t, b.client, conv,
			pastTurn{user: "What is two thirds?", answer: text("0.666666666667"), thinking: "SECRET-THOUGHT-ONE",
				calls: []string{`{"expression":"2/3"}`}, zone: "Europe/Berlin"},
			pastTurn{user: "Tell me about ÄRGER im Büro", answer: text("Grüße aus dem Büro"), thinking: "SECRET-THOUGHT-TWO"},
			pastTurn{user: "Add a long sum", answer: text("601"), calls: []string{long, `{"expression":"1"}`}},
			pastTurn{user: "Another question", answer: text("Another answer")},
			pastTurn{user: "unanswered"},
		)
		read := func(t *testing.T, vars map[string]any) map[string]any {
			t.Helper()
			vars["c"] = conv
			return b.do(t, b.alice.Token, transcriptDoc, vars).ok(t)
		}

		t.Run("everything, oldest first", func(t *testing.T) {
			data := read(t, map[string]any{})
			require.Equal(t, []int{1, 2, 3, 4, 5}, numbers(data))
			require.Equal(t, false, get(data, "transcript", "truncated"))
			require.Nil(t, get(data, "transcript", "nextOffset"))
			first := get(data, "transcript", "turns", 0)
			require.Equal(t, "What is two thirds?", get(first, "userText"))
			require.Equal(t, "0.666666666667", get(first, "answer"))
			require.Equal(t, "Europe/Berlin", get(first, "timeZone"))
			require.Equal(t, map[string]any{"name": "calculator", "arguments": `{"expression":"2/3"}`, "argumentsTruncated": false, "ref": "ref-1-0"},
				get(first, "toolCalls", 0))
			require.Nil(t, get(data, "transcript", "turns", 4, "answer"))
			txt := get(data, "transcript", "text").(string)
			require.Contains(t, txt, "user: What is two thirds?\ntool calculator {\"expression\":\"2/3\"} ref ref-1-0\nassistant: 0.666666666667\n")
			require.Contains(t, txt, "Europe/Berlin]\n", "the time is shown in the turn's zone")
			require.Equal(t, 5, strings.Count(txt, "[turn "))
		})
		t.Run("range", func(t *testing.T) {
			require.Equal(t, []int{2, 3}, numbers(read(t, map[string]any{"from": 2, "to": 3})))
			require.Equal(t, []int{4, 5}, numbers(read(t, map[string]any{"from": 4})))
			require.Equal(t, []int{1}, numbers(read(t, map[string]any{"to": 1})))
			require.Equal(t, []int{}, numbers(read(t, map[string]any{"from": 9})))
		})
		t.Run("words", func(t *testing.T) {
			tests := []struct {
				give string
				want []int
			}{
				{give: "ärger büro", want: []int{2}},     // case folded beyond ASCII
				{give: "GRÜSSE", want: []int{}},          // literal: no spelling rules
				{give: "thirds 0.666", want: []int{1}},   // one word in the question, one in the answer
				{give: "another", want: []int{4}},        // both in one turn count once
				{give: "another missing", want: []int{}}, // every word must appear
				{give: "expression", want: []int{}},      // tool-call arguments are not searched
				{give: "  büro   ", want: []int{2}},      // spaces only separate
				{give: "50%", want: []int{}},             // LIKE wildcards are literal
				{give: "_", want: []int{}},               //
				{give: "o", want: []int{1, 2, 3, 4}},     // substrings match
				{give: "unanswered", want: []int{5}},     //
			}
			for _, tt := range tests {
				require.Equal(t, tt.want, numbers(read(t, map[string]any{"words": tt.give})), tt.give)
			}
			require.Equal(t, []int{2, 3}, numbers(read(t, map[string]any{"words": "o", "from": 2, "to": 3})), "words within a range")
			require.Equal(t, []int{3, 4}, numbers(read(t, map[string]any{"words": "o", "offset": 2})), "offset counts matches")
		})
		t.Run("arguments cut at 400 characters", func(t *testing.T) {
			data := read(t, map[string]any{"from": 3, "to": 3})
			call := get(data, "transcript", "turns", 0, "toolCalls", 0)
			require.Equal(t, long[:transcript.ArgumentChars], get(call, "arguments"))
			require.Equal(t, true, get(call, "argumentsTruncated"))
			require.Equal(t, false, get(data, "transcript", "turns", 0, "toolCalls", 1, "argumentsTruncated"))
			require.Contains(t, get(data, "transcript", "text"), long[:transcript.ArgumentChars]+"… ref ref-3-0\n")
			require.NotContains(t, get(data, "transcript", "text"), long[:transcript.ArgumentChars+1])
		})
		t.Run("thinking never", func(t *testing.T) {
			for _, vars := range []map[string]any{{}, {"words": "secret"}, {"words": "thought"}} {
				r := b.do(t, b.alice.Token, transcriptDoc, map[string]any{"c": conv, "words": vars["words"]})
				require.NotContains(t, strings.ToLower(string(r.Raw)), "secret-thought")
			}
			require.Equal(t, []int{}, numbers(read(t, map[string]any{"words": "SECRET-THOUGHT-ONE"})))
		})
		t.Run("refusals", func(t *testing.T) {
			tests := []struct {
				give map[string]any
				want string
			}{
				{give: map[string]any{"from": 0}, want: "fromTurn must be 1 or more"},
				{give: map[string]any{"to": -1}, want: "toTurn must be 1 or more"},
				{give: map[string]any{"from": 3, "to": 2}, want: "fromTurn 3 is after toTurn 2"},
				{give: map[string]any{"offset": -1}, want: "offset must be 0 or more"},
				{give: map[string]any{"max": 0}, want: "maxChars must be between 1 and 20000"},
				{give: map[string]any{"max": 20_001}, want: "maxChars must be between 1 and 20000"},
				{give: map[string]any{"words": "   "}, want: "words: give at least one word, or leave words out"},
				{give: map[string]any{"words": strings.Repeat("w ", 11)}, want: "words: at most 10 words, got 11"},
				{give: map[string]any{"words": strings.Repeat("w", 201)}, want: "words: at most 200 characters"},
			}
			for _, tt := range tests {
				tt.give["c"] = conv
				r := b.do(t, b.alice.Token, transcriptDoc, tt.give)
				require.Equal(t, "BAD_USER_INPUT", r.code(t), tt.want)
				require.Equal(t, tt.want, r.Errors[0].Message)
			}
		})
		t.Run("asking turn left out", func(t *testing.T) {
			tok := b.scopeToken(t, conv, transcript.Definition.Name)
			// The tool's own operation, as the runtime posts it.
			data := b.do(t, tok, transcript.Definition.Operation, map[string]any{"conversationId": conv}).ok(t)
			txt := get(data, transcript.Definition.Field, "text").(string)
			require.Equal(t, 5, strings.Count(txt, "[turn "))
			require.NotContains(t, txt, "scoped")
			require.Equal(t, false, get(data, "transcript", "truncated"))
			// An API token has no asking turn: the running turn is there.
			require.Equal(t, []int{1, 2, 3, 4, 5, 6}, numbers(read(t, map[string]any{})))
			require.Equal(t, "scoped", get(read(t, map[string]any{"from": 6}), "transcript", "turns", 0, "userText"))
			// Offsets skip past the left-out turn too.
			data = b.do(t, tok, transcript.Definition.Operation, map[string]any{"conversationId": conv, "fromTurn": 5}).ok(t)
			require.Equal(t, 1, strings.Count(get(data, "transcript", "text").(string), "[turn "))
		})
		t.Run("scope", func(t *testing.T) {
			other := b.scopeToken(t, conv, "calculator")
			require.Equal(t, "NOT_FOUND", b.do(t, other, transcript.Definition.Operation, map[string]any{"conversationId": conv}).code(t),
				"a token not offered the tool")
			tok := b.scopeToken(t, conv, transcript.Definition.Name)
			elsewhere := b.startConversation(t, b.alice.Token, agentID, "elsewhere")
			require.Equal(t, "NOT_FOUND", b.do(t, tok, transcript.Definition.Operation, map[string]any{"conversationId": elsewhere}).code(t),
				"a token names its own conversation only")

			foreign := b.do(t, b.eve.Token, transcriptDoc, map[string]any{"c": conv})
			madeUp := b.do(t, b.eve.Token, transcriptDoc, map[string]any{"c": graph.EncodeID(1<<40 + 77)})
			require.Equal(t, "NOT_FOUND", foreign.code(t))
			require.Equal(t, string(madeUp.Raw), string(foreign.Raw))
			require.Equal(t, string(madeUp.Raw), string(b.do(t, b.bob.Token, transcriptDoc, map[string]any{"c": conv}).Raw), "a colleague's")
		})
	})
}

func TestTranscriptBudget(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, d *db.DB) {
		b := setup(t, d)
		agentID := b.createAgent(t, b.alice.Token, "Helper")
		conv := b.startConversation(t, b.alice.Token, agentID, "long")
		turns := make([]pastTurn, 60)
		for i := range turns {
			turns[i] = pastTurn{user: fmt.Sprintf("question %d %s", i+1, strings.Repeat("q", 400)), answer: text(fmt.Sprintf("answer %d.", i+1))}
		}
		huge := strings.Repeat("é", 7_000)
		turns[54].answer = &huge // turn 55
		seedTurns(t, b.client, conv, turns...)
		read := func(t *testing.T, vars map[string]any) map[string]any {
			t.Helper()
			vars["c"] = conv
			return get(b.do(t, b.alice.Token, transcriptDoc, vars).ok(t), "transcript").(map[string]any)
		}

		t.Run("default and max budget, whole turns", func(t *testing.T) {
			def := read(t, map[string]any{})
			n := len(def["turns"].([]any))
			txt := def["text"].(string)
			require.LessOrEqual(t, utf8.RuneCountInString(txt), transcript.DefaultChars)
			require.Greater(t, utf8.RuneCountInString(txt), transcript.DefaultChars-500, "the budget is spent")
			require.Equal(t, true, def["truncated"])
			require.EqualValues(t, n, def["nextOffset"])
			require.Equal(t, n, strings.Count(txt, "[turn "))
			require.True(t, strings.HasSuffix(txt, fmt.Sprintf("assistant: answer %d.\n", n)), "ends on a whole turn")

			maxRead := read(t, map[string]any{"max": transcript.MaxChars})
			txt = maxRead["text"].(string)
			require.LessOrEqual(t, utf8.RuneCountInString(txt), transcript.MaxChars)
			require.Greater(t, utf8.RuneCountInString(txt), transcript.MaxChars-500)
			require.Greater(t, len(maxRead["turns"].([]any)), 3*n)
		})
		t.Run("continuation reads every turn once", func(t *testing.T) {
			var seen []int
			offset, reads := 0, 0
			for {
				reads++
				page := read(t, map[string]any{"offset": offset, "max": 2_000})
				seen = append(seen, numbers(map[string]any{"transcript": page})...)
				if page["truncated"] == false {
					require.Nil(t, page["nextOffset"])
					break
				}
				offset = int(page["nextOffset"].(float64))
				require.Equal(t, len(seen), offset)
				require.Less(t, reads, 60)
			}
			want := make([]int, 60)
			for i := range want {
				want[i] = i + 1
			}
			require.Equal(t, want, seen)
			require.Greater(t, reads, 10)
		})
		t.Run("a turn over budget comes back whole", func(t *testing.T) {
			page := read(t, map[string]any{"from": 55})
			require.Equal(t, []int{55}, numbers(map[string]any{"transcript": page}))
			require.Contains(t, page["text"], "assistant: "+huge+"\n")
			require.Equal(t, true, page["truncated"])
			require.EqualValues(t, 1, page["nextOffset"])

			page = read(t, map[string]any{"from": 54, "max": 1})
			require.Equal(t, []int{54}, numbers(map[string]any{"transcript": page}), "one whole turn, however small the budget")
			page = read(t, map[string]any{"from": 55, "to": 55, "max": 1})
			require.Equal(t, false, page["truncated"], "nothing was left")
		})
	})
}

// TestTranscriptSaid: what the assistant wrote in a step that also called
// tools comes back verbatim, before that step's calls, beside the answer
// (never twice); the budget counts it, and a single turn over budget still
// comes back whole; words only a step wrote find the turn; a summary
// call's text is never read.
func TestTranscriptSaid(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, d *db.DB) {
		b := setup(t, d)
		conv := b.startConversation(t, b.alice.Token, b.createAgent(t, b.alice.Token, "Helper"), "said")
		long := strings.Repeat("ü", 7_000)
		convID := seedTurns(t, b.client, conv,
			pastTurn{user: "Check the sum", answer: text("It is 4."), said: []string{"Let me add\nthem up.", "It is 4."},
				calls: []string{`{"expression":"2+2"}`}},
			pastTurn{user: "Think long", answer: text("Done."), said: []string{long, "Done."}, calls: []string{`{"expression":"1"}`}},
			pastTurn{user: "Cut off", said: []string{"Half an answer, never recorded as one."}},
			pastTurn{user: "Short", answer: text("Yes.")},
		)
		ctx := tenancy.System(context.Background())
		first := b.client.Turn.Query().Where(turn.ConversationID(convID), turn.Number(1)).OnlyX(ctx)
		c := b.client.Conversation.GetX(ctx, convID)
		b.client.ModelCall.Create().SetTurnID(first.ID).SetOrganizationID(c.OrganizationID).SetAgentID(c.AgentID).SetUserID(c.UserID).
			SetStep(0).SetKind("SUMMARY").SetText("SUMMARY-TEXT").SetProvider("openai").SetModel("gpt-4.1").ExecX(ctx)
		const doc = `query($c: ID!, $from: Int, $to: Int, $words: String, $max: Int) {
  transcript(conversationId: $c, fromTurn: $from, toTurn: $to, words: $words, maxChars: $max) {
    text truncated nextOffset turns { number answer said { step text } toolCalls { step name ref } } } }`
		read := func(vars map[string]any) map[string]any {
			vars["c"] = conv
			return get(b.do(t, b.alice.Token, doc, vars).ok(t), "transcript").(map[string]any)
		}

		page := read(map[string]any{"from": 1, "to": 1})
		require.Equal(t, "[turn 1, "+first.StartedAt.UTC().Format("2006-01-02 15:04")+" UTC]\nuser: Check the sum\n"+
			"assistant: Let me add\nthem up.\ntool calculator {\"expression\":\"2+2\"} ref ref-1-0\nassistant: It is 4.\n", page["text"])
		require.Equal(t, []any{map[string]any{"step": 0.0, "text": "Let me add\nthem up."}}, get(page, "turns", 0, "said"))
		require.Equal(t, 0.0, get(page, "turns", 0, "toolCalls", 0, "step"))
		require.NotContains(t, page["text"], "SUMMARY-TEXT")

		// An answer the turn did not record is not lost.
		page = read(map[string]any{"from": 3, "to": 3})
		require.Contains(t, page["text"], "user: Cut off\nassistant: Half an answer, never recorded as one.\n")

		// The budget counts the words: turns 3 and 4 would fit in it
		// without turn 3's, and do not with them.
		three := utf8.RuneCountInString(page["text"].(string))
		four := utf8.RuneCountInString(read(map[string]any{"from": 4, "to": 4})["text"].(string))
		words := utf8.RuneCountInString("assistant: Half an answer, never recorded as one.\n")
		page = read(map[string]any{"from": 3, "max": three - words + 1 + four})
		require.Equal(t, []int{3}, numbers(map[string]any{"transcript": page}))
		require.Equal(t, true, page["truncated"])
		require.EqualValues(t, 1, page["nextOffset"])
		require.Equal(t, []int{3, 4}, numbers(map[string]any{"transcript": read(map[string]any{"from": 3, "max": three + 1 + four})}))
		// A single turn over budget comes back whole, its words with it.
		page = read(map[string]any{"from": 2})
		require.Equal(t, []int{2}, numbers(map[string]any{"transcript": page}))
		require.Contains(t, page["text"], "assistant: "+long+"\ntool calculator")
		require.Equal(t, true, page["truncated"])

		// Words only a step wrote find the turn, case folded; a summary's do not.
		for _, tt := range []struct {
			give string
			want []int
		}{
			{give: "ADD THEM", want: []int{1}},
			{give: "half never", want: []int{3}},
			{give: "sum add", want: []int{1}},
			{give: "summary-text", want: []int{}},
		} {
			require.Equal(t, tt.want, numbers(map[string]any{"transcript": read(map[string]any{"words": tt.give})}), tt.give)
		}
	})
}

// TestTranscriptReadStatementsBounded checks that a read sends the same
// statements for 2 turns as for 50 turns of 4 tool calls: turns and tool
// calls are loaded in one statement each, never per turn.
func TestTranscriptReadStatementsBounded(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, d *db.DB) {
		counter := dbtest.Count(d)
		b := setup(t, d)
		agentID := b.createAgent(t, b.alice.Token, "Helper")
		small := b.startConversation(t, b.alice.Token, agentID, "small")
		large := b.startConversation(t, b.alice.Token, agentID, "large")
		smallID, err := gid.Decode(small)
		require.NoError(t, err)
		largeID, err := gid.Decode(large)
		require.NoError(t, err)
		seedTranscript(t, b.client, smallID, 2, 1)
		seedTranscript(t, b.client, largeID, 50, 4)

		count := func(vars map[string]any) (int, map[string]any) {
			counter.Reset()
			data := b.do(t, b.alice.Token, transcriptDoc, vars).ok(t)
			return len(counter.Statements()), data
		}
		nSmall, _ := count(map[string]any{"c": small})
		nLarge, data := count(map[string]any{"c": large, "max": transcript.MaxChars})
		require.Len(t, get(data, "transcript", "turns"), 50)
		require.Len(t, get(data, "transcript", "turns", 49, "toolCalls"), 4)
		// token, conversation, turns, what their steps said, tool calls.
		require.Equal(t, 5, nLarge, counter.Statements())
		require.Equal(t, nSmall, nLarge, "statements must not grow with the conversation")
		nWords, data := count(map[string]any{"c": large, "words": "question answer", "max": transcript.MaxChars})
		require.Len(t, get(data, "transcript", "turns"), 50)
		require.Equal(t, nLarge, nWords)
		for _, s := range counter.Statements() {
			require.NotContains(t, s, "thinking", "thinking is never even read")
		}
	})
}

// BenchmarkReadTranscript reads 20,000 characters of a transcript of 200
// turns × 5 tool calls through GraphQL.
func BenchmarkReadTranscript(b *testing.B) {
	for _, backend := range []dbtest.Backend{dbtest.SQLite, dbtest.Postgres} {
		b.Run(string(backend), func(b *testing.B) {
			tb, counter, conv := longConversation(b, backend, 200, 5)
			vars := map[string]any{"c": conv, "max": transcript.MaxChars, "from": 50}
			counter.Reset()
			b.ReportAllocs()
			for b.Loop() {
				tb.do(b, tb.alice.Token, transcriptDoc, vars).ok(b)
			}
			b.ReportMetric(float64(len(counter.Statements()))/float64(b.N), "stmts/op")
		})
	}
}
