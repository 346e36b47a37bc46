package loop_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/db"
	"github.com/toolgate/toolgate/ent"
	"github.com/toolgate/toolgate/ent/modelcall"
	"github.com/toolgate/toolgate/ent/schematype"
	"github.com/toolgate/toolgate/ent/summary"
	"github.com/toolgate/toolgate/ent/tenancy"
	"github.com/toolgate/toolgate/graph/gid"
	"github.com/toolgate/toolgate/runtime/loop"
	"github.com/toolgate/toolgate/runtime/model"
	"github.com/toolgate/toolgate/runtime/prompt"
)

func withHistoryBudget(n int) option { return func(c *loop.Config) { c.HistoryBudget = n } }

func withCallsPerTurn(n int) option { return func(c *loop.Config) { c.CallsPerTurn = n } }

// summarizing answers compaction calls itself, numbering its summaries, and
// hands every other call to the scripted provider: p.request(i) is the
// turns' own calls only.
type summarizing struct {
	*scripted
	mu        sync.Mutex
	summaries []model.Request
	fail      bool
}

func (s *summarizing) Complete(ctx context.Context, req model.Request) (*model.Response, error) {
	if req.Kind != model.KindSummary {
		return s.scripted.Complete(ctx, req)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.summaries = append(s.summaries, req)
	if s.fail {
		return nil, errors.New("summariser unavailable")
	}
	return &model.Response{Model: "gpt-4.1", Text: fmt.Sprintf("Summary %d: the person asked for codes, one a turn, and got them.", len(s.summaries)),
		Usage: model.Usage{InputUncached: 9000, Output: 120}}, nil
}

func (s *summarizing) summaryCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.summaries)
}

// seed stores turns from–to of a conversation directly, as a run would
// have left them: each asks for a code and answers it (detail(n), found
// nowhere else), after one calculator call with a stored result.
func seed(t testing.TB, h *harness, convID, from, to int, answer func(n int) string) {
	t.Helper()
	ctx := tenancy.System(context.Background())
	c := h.client
	conv := c.Conversation.GetX(ctx, convID)
	turns := make([]*ent.TurnCreate, 0, to-from+1)
	for n := from; n <= to; n++ {
		turns = append(turns, c.Turn.Create().SetConversationID(convID).SetNumber(n).
			SetUserText(fmt.Sprintf("What is the code for item %d?", n)).SetAnswer(answer(n)).
			SetStatus("COMPLETED").SetStartedAt(h.now).SetTimeZone("Europe/Berlin"))
	}
	rows := c.Turn.CreateBulk(turns...).SaveX(ctx)
	results := make([]*ent.StoredResultCreate, len(rows))
	mcs := make([]*ent.ModelCallCreate, len(rows))
	for i, tu := range rows {
		results[i] = c.StoredResult.Create().SetConversationID(convID).SetRef(fmt.Sprintf("r_%d_%d", convID, tu.Number)).
			SetKind(schematype.KindText).SetContent([]byte(fmt.Sprint(tu.Number * 7))).SetChars(3).SetBytes(3).SetItems(1)
		mcs[i] = c.ModelCall.Create().SetTurnID(tu.ID).SetOrganizationID(conv.OrganizationID).SetAgentID(conv.AgentID).
			SetUserID(conv.UserID).SetProvider("openai").SetModel("gpt-4.1").SetStep(0).SetText("")
	}
	srs := c.StoredResult.CreateBulk(results...).SaveX(ctx)
	c.ModelCall.CreateBulk(mcs...).ExecX(ctx)
	calls := make([]*ent.ToolCallCreate, len(rows))
	for i, tu := range rows {
		heard := fmt.Sprint(tu.Number * 7)
		calls[i] = c.ToolCall.Create().SetTurnID(tu.ID).SetPosition(0).SetStep(0).SetName("calculator").
			SetArguments(fmt.Sprintf(`{"expression":"%d*7"}`, tu.Number)).SetOutcome(schematype.OutcomeHits).SetAttempts(1).
			SetRef(srs[i].Ref).SetResultID(srs[i].ID).SetHeard(heard).
			SetEvidence([]schematype.Span{{Ref: srs[i].Ref, Start: 0, End: int64(len(heard))}})
	}
	c.ToolCall.CreateBulk(calls...).ExecX(ctx)
}

func itemCode(n int) string {
	return fmt.Sprintf("The code for item %d is ZQ-%04d-%s; keep it for the audit.", n, n*37, strings.Repeat("x", n%5))
}

// history returns the messages of a request before the turn's own.
func history(req model.Request) []model.Message {
	for i := len(req.Messages) - 1; i >= 0; i-- {
		if req.Messages[i].Role == model.RoleUser && strings.HasPrefix(req.Messages[i].Text, "You are talking with") &&
			!strings.Contains(req.Messages[i].Text, "What is the code for item") {
			return req.Messages[:i]
		}
	}
	return req.Messages
}

// TestCompactionLongConversation: a 300-turn conversation replays within
// its budget. The oldest turns are summarised by one model call (kind
// SUMMARY, on the triggering turn, with its tokens and cost); the summary
// names its turns, Conversation.summaries shows it; read_transcript reads
// back a detail the summary left out; a later turn carries the summary's
// identical bytes, and a newer summary covers a later range.
func TestCompactionLongConversation(t *testing.T) {
	each(t, func(t *testing.T, d *db.DB) {
		const budget = 12_000
		p := &summarizing{scripted: &scripted{answers: []model.Response{
			{Text: "Done: noted."},
			// The next turn reads a detail of turn 7 back.
			{ToolCalls: []model.ToolCall{call("a", "read_transcript", `{"fromTurn":7,"toTurn":7}`)}},
			{Text: "Turn 7 said it."},
		}}}
		h := newHarness(t, d, p, withHistoryBudget(budget))
		conv := h.conversation(t)
		convID, err := gid.Decode(conv)
		require.NoError(t, err)
		seed(t, h, convID, 1, 300, itemCode)
		ctx := tenancy.System(context.Background())

		id := h.send(t, conv, "Note this down.", "")
		require.Equal(t, "COMPLETED", string(h.wait(t, id).Status))

		// The turn's own call replays summaries and recent turns, within
		// the budget.
		first := p.request(0)
		hist := history(first)
		require.LessOrEqual(t, prompt.Chars(hist), budget)
		require.Positive(t, p.summaryCount())
		sums := h.client.Summary.Query().Where(summary.ConversationID(convID)).Order(ent.Asc(summary.FieldToTurn)).AllX(ctx)
		require.Len(t, sums, p.summaryCount())
		require.Equal(t, 1, sums[0].FromTurn)
		last := sums[len(sums)-1]
		for i := 1; i < len(sums); i++ {
			require.Equal(t, sums[i-1].ToTurn+1, sums[i].FromTurn, "each summary covers the turns after the one before")
		}
		require.Less(t, last.ToTurn, 300, "the latest turns stay whole")
		for i, s := range sums {
			require.Equal(t, fmt.Sprintf("[Summary of turns %d–%d, which are no longer replayed here; read_transcript reads them verbatim.]\n\n%s",
				s.FromTurn, s.ToTurn, s.Text), hist[i].Text, "the summary names its turns")
			require.Contains(t, p.summaries[i].Messages[0].Text, fmt.Sprintf("Summarise turns %d–%d", s.FromTurn, s.ToTurn))
		}
		require.True(t, strings.HasPrefix(hist[len(sums)].Text, "You are talking with"), "the turns after the summaries follow")
		require.Contains(t, hist[len(sums)].Text, fmt.Sprintf("What is the code for item %d?", last.ToTurn+1))
		for _, m := range hist {
			require.NotContains(t, m.Text, itemCode(7), "turn 7 is summarised, not replayed")
		}
		require.Contains(t, p.summaries[0].Messages[0].Text, itemCode(7), "the summariser read turn 7")

		// Each summary is a model call of the turn that triggered it.
		turnID, err := gid.Decode(id)
		require.NoError(t, err)
		mcs := h.client.ModelCall.Query().Where(modelcall.TurnID(turnID), modelcall.KindEQ(modelcall.KindSUMMARY)).AllX(ctx)
		require.Len(t, mcs, len(sums))
		for _, mc := range mcs {
			require.Equal(t, int64(9000), mc.InputTokens)
			require.Equal(t, int64(120), mc.OutputTokens)
			require.Positive(t, int64(mc.CostMicros))
			require.NotEmpty(t, mc.Attribution)
		}
		require.Equal(t, turnID, sums[0].TurnID)
		require.Equal(t, mcs[0].CostMicros, sums[0].CostMicros)

		got := h.gql(t, `query($id: ID!) { conversation(id: $id) { summaries { fromTurn toTurn text model createdAt costAmount { micros currency } } } }`,
			map[string]any{"id": conv})["conversation"].(map[string]any)["summaries"].([]any)
		require.Len(t, got, len(sums))
		s0 := got[0].(map[string]any)
		require.Equal(t, float64(1), s0["fromTurn"])
		require.Equal(t, float64(sums[0].ToTurn), s0["toTurn"])
		require.Equal(t, sums[0].Text, s0["text"])
		require.Equal(t, "gpt-4.1", s0["model"])
		require.Equal(t, map[string]any{"micros": float64(sums[0].CostMicros), "currency": "USD"}, s0["costAmount"])

		// The next turn: no new summary; the same bytes lead its prompt;
		// read_transcript reads back the detail the summary left out.
		id2 := h.send(t, conv, "What did turn 7 say?", "")
		require.Equal(t, "COMPLETED", string(h.wait(t, id2).Status))
		require.Equal(t, len(sums), p.summaryCount(), "within budget again: no new summary")
		second := p.request(1)
		require.Equal(t, hist[:len(sums)], second.Messages[:len(sums)], "the summaries' bytes never change")
		read := lastTool(p.request(2))
		require.Contains(t, read.Text, "[turn 7,")
		require.Contains(t, read.Text, itemCode(7))
	})
}

// TestSummaryBytesStayAcrossCompactions: once written, a summary's bytes
// lead every later prompt unchanged, and when the history passes its
// budget again a newer summary covers a later range beside it.
func TestSummaryBytesStayAcrossCompactions(t *testing.T) {
	each(t, func(t *testing.T, d *db.DB) {
		const budget = 8_000
		long := strings.Repeat("A long answer about tides and their tables. ", 40) // ~1,800 characters
		p := &summarizing{scripted: &scripted{answers: []model.Response{{Text: long}}}}
		h := newHarness(t, d, p, withHistoryBudget(budget))
		conv := h.conversation(t)
		convID, err := gid.Decode(conv)
		require.NoError(t, err)
		seed(t, h, convID, 1, 60, itemCode)
		ctx := tenancy.System(context.Background())

		var firstText string
		var first *ent.Summary
		for i := range 8 {
			id := h.send(t, conv, fmt.Sprintf("Tell me about tides, part %d.", i), "")
			require.Equal(t, "COMPLETED", string(h.wait(t, id).Status))
			req := p.request(p.count() - 1)
			require.LessOrEqual(t, prompt.Chars(history(req)), budget)
			if first == nil {
				first = h.client.Summary.Query().Where(summary.ConversationID(convID)).Order(ent.Asc(summary.FieldToTurn)).FirstX(ctx)
				firstText = req.Messages[0].Text
				continue
			}
			require.Equal(t, firstText, req.Messages[0].Text, "turn %d: the first summary's bytes lead the prompt unchanged", i)
		}
		sums := h.client.Summary.Query().Where(summary.ConversationID(convID)).Order(ent.Asc(summary.FieldToTurn)).AllX(ctx)
		require.Greater(t, len(sums), 1, "the long answers passed the budget again")
		require.Equal(t, first.Text, sums[0].Text)
		require.Equal(t, first.ToTurn, sums[0].ToTurn)
		require.Equal(t, sums[0].ToTurn+1, sums[1].FromTurn, "a newer summary covers a later range")
		require.Greater(t, sums[1].ToTurn, 60, "it covers turns run since")
	})
}

// TestCompactionFailureCutsHistory: a summariser that fails does not fail
// the turn. The turn goes on with the oldest turns left out behind one
// line saying read_transcript has them, within the budget; nothing is
// stored as a summary, and the next turn tries again.
func TestCompactionFailureCutsHistory(t *testing.T) {
	each(t, func(t *testing.T, d *db.DB) {
		const budget = 10_000
		p := &summarizing{scripted: &scripted{answers: []model.Response{{Text: "ok"}}}, fail: true}
		h := newHarness(t, d, p, withHistoryBudget(budget))
		conv := h.conversation(t)
		convID, err := gid.Decode(conv)
		require.NoError(t, err)
		seed(t, h, convID, 1, 200, itemCode)

		id := h.send(t, conv, "Go on.", "")
		require.Equal(t, "COMPLETED", string(h.wait(t, id).Status))
		require.Equal(t, 1, p.summaryCount())
		hist := history(p.request(0))
		require.LessOrEqual(t, prompt.Chars(hist), budget)
		require.Regexp(t, `^\[Turns 1–\d+ left out here to keep the prompt within its budget; read_transcript reads them verbatim\.\]$`, hist[0].Text)
		require.Contains(t, hist[len(hist)-1].Text, itemCode(200), "the last turn stays")
		ctx := tenancy.System(context.Background())
		require.Zero(t, h.client.Summary.Query().Where(summary.ConversationID(convID)).CountX(ctx))
		require.Zero(t, h.client.ModelCall.Query().Where(modelcall.KindEQ(modelcall.KindSUMMARY)).CountX(ctx))

		p.mu.Lock()
		p.fail = false
		p.mu.Unlock()
		id = h.send(t, conv, "Again.", "")
		require.Equal(t, "COMPLETED", string(h.wait(t, id).Status))
		require.Equal(t, 1, h.client.Summary.Query().Where(summary.ConversationID(convID)).CountX(ctx), "the next turn summarises")
	})
}

// TestCallsPerTurnCapInPrompt: a later turn replays at most the set number
// of an earlier turn's tool calls: the failures and the reads the model
// was shown keep their place before routine ones, and one terse line says
// how many were left out and that read_transcript has them.
func TestCallsPerTurnCapInPrompt(t *testing.T) {
	each(t, func(t *testing.T, d *db.DB) {
		var batch []model.ToolCall
		for i := range 6 {
			batch = append(batch, call(fmt.Sprintf("c%d", i), "calculator", fmt.Sprintf(`{"expression":"%d+1"}`, i)))
		}
		batch = append(batch,
			call("s1", "suggest_next_actions", `{"suggestions":["more"]}`),
			call("x1", "delete_everything", `{}`)) // not offered: refused
		p := &scripted{answers: []model.Response{
			{ToolCalls: batch},
			{Text: "Worked them out."},
			{Text: "And again."},
		}}
		h := newHarness(t, d, p, withCallsPerTurn(3))
		conv := h.conversation(t)
		id := h.send(t, conv, "Work these out.", "")
		require.Equal(t, "COMPLETED", string(h.wait(t, id).Status))
		id = h.send(t, conv, "Once more.", "")
		require.Equal(t, "COMPLETED", string(h.wait(t, id).Status))

		req := p.request(2)
		var replayed []string
		for _, m := range req.Messages {
			for _, c := range m.ToolCalls {
				replayed = append(replayed, c.ID)
			}
		}
		require.Equal(t, []string{"c4", "c5", "x1"}, replayed, "the refusal and the latest reads keep their place; routine calls go first")
		answer := req.Messages[len(req.Messages)-2]
		require.Equal(t, model.RoleAssistant, answer.Role)
		require.Equal(t, "Worked them out.\n\n(5 more tool calls of this turn are left out here; read_transcript has them.)", answer.Text)
		// read_transcript lists every call of the turn.
		data := h.gql(t, `query($c: ID!) { transcript(conversationId: $c, fromTurn: 1, toTurn: 1) { text } }`, map[string]any{"c": conv})
		text := data["transcript"].(map[string]any)["text"].(string)
		require.Equal(t, 8, strings.Count(text, "\ntool "))
	})
}
