package loop_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/db"
	"github.com/toolgate/toolgate/db/dbtest"
	"github.com/toolgate/toolgate/ent/schematype"
	"github.com/toolgate/toolgate/ent/tenancy"
	"github.com/toolgate/toolgate/ent/turn"
	"github.com/toolgate/toolgate/graph/gid"
	"github.com/toolgate/toolgate/runtime/events"
	"github.com/toolgate/toolgate/runtime/model"
	"github.com/toolgate/toolgate/runtime/prompt"
)

func TestTurnRunsToolsAndAnswers(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, d *db.DB) {
		p := &scripted{answers: []model.Response{
			{Text: "Working it out.", ToolCalls: []model.ToolCall{call("c1", "calculator", `{"expression": "2/3"}`)},
				Usage: model.Usage{InputUncached: 1000, CacheRead: 500, Output: 50}},
			{Text: "Two thirds is 0.666666666667.", Usage: model.Usage{InputUncached: 200, CacheRead: 1400, Output: 20}},
		}}
		h := newHarness(t, d, p)
		conv := h.conversation(t)
		id := h.send(t, conv, "What is 2/3?", "")
		got := h.wait(t, id)
		require.Equal(t, turn.StatusCOMPLETED, got.Status, got.Error)
		require.Equal(t, "Two thirds is 0.666666666667.", *got.Answer)

		calls := h.calls(t, id)
		require.Len(t, calls, 1)
		require.Equal(t, schematype.OutcomeHits, calls[0].Outcome)
		require.Equal(t, 1, calls[0].Attempts)
		require.NotNil(t, calls[0].Ref)
		// The second model call heard the calculator's result.
		heard := lastTool(p.request(1))
		require.Equal(t, "c1", heard.ToolCallID)
		require.Contains(t, heard.Text, "0.666666666667")

		// Each model call was recorded with its tokens and cost.
		mcs := got.QueryModelCalls().AllX(tenancy.System(context.Background()))
		require.Len(t, mcs, 2)
		require.EqualValues(t, 1000, mcs[0].InputTokens)
		require.EqualValues(t, 500, mcs[0].CacheReadTokens)
		require.Greater(t, mcs[0].Cost, 0.0)
		require.Equal(t, "Working it out.", mcs[0].Text)

		// The transcript shows it all through the API.
		data := h.gql(t, `query($c: ID!) { conversation(id: $c) { turns(first: 5) { edges { node { status answer toolCalls { name outcome result { kind chars } } } } } } }`,
			map[string]any{"c": conv})
		node := data["conversation"].(map[string]any)["turns"].(map[string]any)["edges"].([]any)[0].(map[string]any)["node"].(map[string]any)
		require.Equal(t, "COMPLETED", node["status"])
		require.Equal(t, "calculator", node["toolCalls"].([]any)[0].(map[string]any)["name"])
	})
}

func TestRefusesToolNotOffered(t *testing.T) {
	t.Parallel()
	p := &scripted{answers: []model.Response{
		{ToolCalls: []model.ToolCall{call("c1", "drop_tables", `{}`), call("c2", "update_tasks", `{"tasks": []}`)}},
		{Text: "Understood."},
	}}
	h := newHarness(t, dbtest.Open(t, dbtest.SQLite), p)
	// The agent declares no tools: update_tasks (optional) is not offered either.
	id := h.send(t, h.conversation(t), "clean up", "")
	require.Equal(t, turn.StatusCOMPLETED, h.wait(t, id).Status)
	calls := h.calls(t, id)
	require.Len(t, calls, 2)
	for i, name := range []string{"drop_tables", "update_tasks"} {
		require.Equal(t, schematype.OutcomeRefused, calls[i].Outcome)
		require.Equal(t, `tool "`+name+`" is not available`, *calls[i].Message)
		require.Equal(t, 0, calls[i].Attempts)
	}
	// The model hears the refusal naming that tool and nothing else.
	req := p.request(1)
	for _, m := range req.Messages {
		if m.Role == model.RoleTool {
			require.NotContains(t, m.Text, "calculator")
			require.True(t, m.IsError)
		}
	}
	// Offered tools: always-on and workspace only.
	var names []string
	for _, s := range req.Tools {
		names = append(names, s.Name)
	}
	require.Contains(t, names, "calculator")
	require.Contains(t, names, "read_tool_result")
	require.NotContains(t, names, "update_tasks")
	require.NotContains(t, names, "search_tools")
}

func TestOpeningMessageZoneAndStablePrefix(t *testing.T) {
	t.Parallel()
	p := &scripted{answers: []model.Response{{Text: "Hello."}}}
	h := newHarness(t, dbtest.Open(t, dbtest.SQLite), p)
	conv := h.conversation(t, "update_tasks")
	first := h.send(t, conv, "Hi there", "Europe/Paris")
	h.wait(t, first)
	h.now = h.now.Add(3 * time.Hour)
	second := h.send(t, conv, "And now?", "")
	h.wait(t, second)

	r1, r2 := p.request(0), p.request(1)
	open1 := r1.Messages[len(r1.Messages)-1].Text
	require.Equal(t, "You are talking with Ada Lovelace (Research, Acme). It is Sunday 29 November 2026, 20:30 (Europe/Paris).\n\nHi there", open1)
	open2 := r2.Messages[len(r2.Messages)-1].Text
	require.True(t, strings.HasPrefix(open2, "You are talking with Ada Lovelace (Research, Acme). It is Sunday 29 November 2026, 22:30 (UTC)."), open2)
	// The earlier turn replays with its own zone and time, unchanged.
	require.Equal(t, open1, r2.Messages[0].Text)

	// The stable prefix: same system prompt and tool definitions, byte for
	// byte, and no clock in them.
	require.Equal(t, r1.System, r2.System)
	t1, err := json.Marshal(r1.Tools)
	require.NoError(t, err)
	t2, err := json.Marshal(r2.Tools)
	require.NoError(t, err)
	require.Equal(t, string(t1), string(t2))
	require.NotContains(t, r1.System, "2026")
	require.NotContains(t, r1.System, "19:30")
	require.True(t, strings.HasPrefix(r1.System, "Be exact."))
	require.Contains(t, r1.System, prompt.MaterialNotice)
	require.Equal(t, 1, strings.Count(r1.System, prompt.MaterialNotice))
}

func TestClarifyPausesAndResumesTheSameTurn(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, d *db.DB) {
		p := &scripted{answers: []model.Response{
			{ToolCalls: []model.ToolCall{call("q1", "clarify", `{"question": "Which year?", "options": ["2025", "2026"], "recommended": "2026"}`)}},
			{Text: "Then 2026 it is."},
		}}
		h := newHarness(t, d, p)
		conv := h.conversation(t)
		id := h.send(t, conv, "Plan the budget", "America/New_York")
		waiting := h.wait(t, id)
		require.Equal(t, turn.StatusWAITING_FOR_CLARIFICATION, waiting.Status)
		require.Equal(t, "Which year?", waiting.Clarification.Question)

		// Nothing new may start while it waits.
		_, errs := h.try(t, `mutation($c: ID!) { sendMessage(input: {conversationId: $c, text: "x"}) { id } }`, map[string]any{"c": conv})
		require.NotEmpty(t, errs)

		h.now = h.now.Add(time.Hour)
		data := h.gql(t, `mutation($t: ID!) { answerClarification(input: {turnId: $t, answer: "2026"}) { id status } }`, map[string]any{"t": id})
		require.Equal(t, id, data["answerClarification"].(map[string]any)["id"])
		done := h.wait(t, id)
		require.Equal(t, turn.StatusCOMPLETED, done.Status, done.Error)
		require.Equal(t, "Then 2026 it is.", *done.Answer)

		// The resumed call renders the same zone and time as the first, and
		// hears the answer as the clarify call's result.
		r1, r2 := p.request(0), p.request(1)
		require.Equal(t, r1.Messages[len(r1.Messages)-1].Text, r2.Messages[len(r1.Messages)-1].Text)
		require.Contains(t, r2.Messages[len(r1.Messages)-1].Text, "(America/New_York)")
		require.Equal(t, "The user answered: 2026", lastTool(r2).Text)
		require.Equal(t, r1.System, r2.System)
	})
}

func TestStepLimitFailsTheTurn(t *testing.T) {
	t.Parallel()
	p := &scripted{answers: []model.Response{{ToolCalls: []model.ToolCall{call("c", "calculator", `{"expression": "1+1"}`)}}}}
	h := newHarness(t, dbtest.Open(t, dbtest.SQLite), p, withMaxSteps(3))
	id := h.send(t, h.conversation(t), "loop forever", "")
	got := h.wait(t, id)
	require.Equal(t, turn.StatusFAILED, got.Status)
	require.Equal(t, "step limit reached: 3 model calls without a final answer", *got.Error)
	require.Equal(t, 3, p.count())
	require.Len(t, h.calls(t, id), 3)
}

func TestCancelStopsARunningTurn(t *testing.T) {
	t.Parallel()
	p := &scripted{answers: []model.Response{{Text: "never"}}, block: make(chan struct{})}
	h := newHarness(t, dbtest.Open(t, dbtest.SQLite), p)
	id := h.send(t, h.conversation(t), "take your time", "")
	require.Eventually(t, func() bool { return p.count() == 1 }, 10*time.Second, 5*time.Millisecond)
	data := h.gql(t, `mutation($t: ID!) { cancelTurn(id: $t) { status } }`, map[string]any{"t": id})
	require.Equal(t, "CANCELLED", data["cancelTurn"].(map[string]any)["status"])
	got := h.wait(t, id)
	require.Equal(t, turn.StatusCANCELLED, got.Status)
	require.Nil(t, got.Answer)
}

func TestSendMessageValidates(t *testing.T) {
	t.Parallel()
	h := newHarness(t, dbtest.Open(t, dbtest.SQLite), &scripted{answers: []model.Response{{Text: "ok"}}})
	conv := h.conversation(t)
	tests := []struct {
		name, conv, text, zone, want string
	}{
		{name: "empty text", conv: conv, text: "   ", want: "text is empty"},
		{name: "unknown zone", conv: conv, text: "hi", zone: "Mars/Olympus", want: `unknown time zone "Mars/Olympus": use an IANA name such as Europe/Paris`},
		{name: "unknown conversation", conv: "tg0000000000000", text: "hi", want: "not found"},
	}
	for _, tt := range tests {
		_, errs := h.try(t, `mutation($c: ID!, $x: String!, $z: String) { sendMessage(input: {conversationId: $c, text: $x, timeZone: $z}) { id } }`,
			map[string]any{"c": tt.conv, "x": tt.text, "z": tt.zone})
		require.Len(t, errs, 1, tt.name)
		require.Equal(t, tt.want, errs[0].(map[string]any)["message"], tt.name)
	}
}

func TestUsageByCalendarMonth(t *testing.T) {
	t.Parallel()
	p := &scripted{answers: []model.Response{{Text: "ok", Usage: model.Usage{InputUncached: 1000, CacheRead: 2000, CacheWrite: 300, Output: 400}}}}
	h := newHarness(t, dbtest.Open(t, dbtest.SQLite), p)
	conv := h.conversation(t)
	h.wait(t, h.send(t, conv, "one", ""))
	h.wait(t, h.send(t, conv, "two", ""))
	const q = `query($m: String) { usage(month: $m) { month inputTokens cacheReadTokens cacheWriteTokens outputTokens cost modelCalls
		byModel { model modelCalls inputTokens } byAgent { agent { name } modelCalls } byUser { user { name } outputTokens } } }`
	u := h.gql(t, q, map[string]any{"m": "2026-11"})["usage"].(map[string]any)
	require.Equal(t, "2026-11", u["month"])
	require.EqualValues(t, 2000, u["inputTokens"])
	require.EqualValues(t, 4000, u["cacheReadTokens"])
	require.EqualValues(t, 600, u["cacheWriteTokens"])
	require.EqualValues(t, 800, u["outputTokens"])
	require.EqualValues(t, 2, u["modelCalls"])
	require.Greater(t, u["cost"].(float64), 0.0)
	require.Equal(t, "gpt-4.1", u["byModel"].([]any)[0].(map[string]any)["model"])
	require.Equal(t, "Analyst", u["byAgent"].([]any)[0].(map[string]any)["agent"].(map[string]any)["name"])
	require.EqualValues(t, 800, u["byUser"].([]any)[0].(map[string]any)["outputTokens"])

	other := h.gql(t, q, map[string]any{"m": "2026-10"})["usage"].(map[string]any)
	require.EqualValues(t, 0, other["modelCalls"])
	_, errs := h.try(t, q, map[string]any{"m": "November"})
	require.Equal(t, `month "November": want YYYY-MM, e.g. 2026-11`, errs[0].(map[string]any)["message"])
}

func TestCancelFromAnotherReplica(t *testing.T) {
	t.Parallel()
	p := &scripted{answers: []model.Response{{Text: "never"}}, block: make(chan struct{})}
	h := newHarness(t, dbtest.Open(t, dbtest.SQLite), p)
	id := h.send(t, h.conversation(t), "take your time", "")
	require.Eventually(t, func() bool { return p.count() == 1 }, 10*time.Second, 5*time.Millisecond)
	// Another replica's cancelTurn: the row changes, and its STATUS event
	// arrives over the bridge; this replica's runner was never called.
	tid, err := gid.Decode(id)
	require.NoError(t, err)
	h.client.Turn.UpdateOneID(tid).SetStatus(turn.StatusCANCELLED).ExecX(tenancy.System(context.Background()))
	h.runner.Events().Deliver(events.Event{Kind: events.Status, TurnID: tid, At: time.Now()})
	require.Eventually(t, func() bool { return !h.runner.Running(tid) }, 10*time.Second, 5*time.Millisecond)
	require.Equal(t, turn.StatusCANCELLED, h.client.Turn.GetX(tenancy.System(context.Background()), tid).Status)
}

// TestTurnEndMarksConversationUpdated: a turn's end marks its
// conversation updated as of then, on both databases (PostgreSQL does it in
// the end's own statement).
func TestTurnEndMarksConversationUpdated(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, d *db.DB) {
		h := newHarness(t, d, &scripted{answers: []model.Response{{Text: "Done."}}})
		ctx := tenancy.System(context.Background())
		convID, err := gid.Decode(h.conversation(t))
		require.NoError(t, err)
		h.client.Conversation.UpdateOneID(convID).SetUpdatedAt(h.now.Add(-time.Hour)).ExecX(ctx)
		id := h.client.Turn.Create().SetConversationID(convID).SetNumber(1).SetUserText("go").SetStartedAt(h.now).SaveX(ctx).ID
		require.NoError(t, h.runner.RunTurn(ctx, id))
		got := h.client.Turn.GetX(ctx, id)
		require.Equal(t, turn.StatusCOMPLETED, got.Status, got.Error)
		cv := h.client.Conversation.GetX(ctx, convID)
		require.True(t, cv.UpdatedAt.Equal(*got.FinishedAt), "%v, %v", cv.UpdatedAt, got.FinishedAt)
	})
}
