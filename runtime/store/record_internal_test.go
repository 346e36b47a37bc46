package store

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/db"
	"github.com/toolgate/toolgate/db/dbtest"
	"github.com/toolgate/toolgate/ent"
	"github.com/toolgate/toolgate/ent/modelcall"
	"github.com/toolgate/toolgate/ent/monthlyspend"
	"github.com/toolgate/toolgate/ent/schematype"
	"github.com/toolgate/toolgate/ent/tenancy"
	"github.com/toolgate/toolgate/ent/toolcall"
	"github.com/toolgate/toolgate/ent/turn"
	"github.com/toolgate/toolgate/runtime/model"
)

// A turn's records are whole or not there, on both databases (on
// PostgreSQL each is one statement, on SQLite one transaction): a step is
// recorded once, with its model call's cost added once; a runner that lost
// the turn writes nothing, neither step nor record; a call is recorded
// once; the rows a step returns are the rows ent reads back; the answer
// ends the turn with its model call.
func TestRecordsAreWholeOrNothing(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, d *db.DB) {
		ctx := tenancy.System(context.Background())
		c := d.Client()
		ten := dbtest.Seed(t, c)
		id := dbtest.NewTurn(t, c, ten.Conversation, 1)
		now := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
		clock := func() time.Time { return now }
		a, b := New(c, d.Dialect, "runner-a", clock), New(c, d.Dialect, "runner-b", clock)
		claimed, _, err := a.Claim(ctx, id, time.Minute)
		require.NoError(t, err)
		require.True(t, claimed)
		ta, tb := a.Turn(id), b.Turn(id)
		call := ModelCall{OrganizationID: ten.Org, AgentID: ten.Agent, UserID: ten.User, Text: "Let me add.",
			Provider: "openai", Model: "gpt-4.1", Cost: 7, StartedAt: now}
		spent := func() []schematype.Micros {
			var out []schematype.Micros
			for _, u := range []int{0, ten.User} {
				m, err := c.MonthlySpend.Query().Where(monthlyspend.OrganizationID(ten.Org), monthlyspend.UserID(u)).Only(ctx)
				require.NoError(t, err)
				out = append(out, m.CostMicros)
			}
			return out
		}
		count := func() (calls, tools, results int) {
			return c.ModelCall.Query().Where(modelcall.TurnID(id)).CountX(ctx),
				c.ToolCall.Query().Where(toolcall.TurnID(id)).CountX(ctx), c.StoredResult.Query().CountX(ctx)
		}

		step := Step{Number: 0, Call: call, ConversationID: ten.Conversation,
			Calls: []model.ToolCall{{ID: "c1", Name: "calculator", Arguments: json.RawMessage(`{"expression":"1+1"}`)},
				{ID: "c2", Name: "calculator", Arguments: json.RawMessage(`{"expression":"2+2"}`)}}}
		rows, finished, err := ta.RecordStep(ctx, step)
		require.NoError(t, err)
		require.False(t, finished)
		require.Len(t, rows, 2)
		for i, r := range rows {
			stored := c.ToolCall.GetX(ctx, r.ID)
			r.Edges, stored.Edges = ent.ToolCallEdges{}, ent.ToolCallEdges{}
			require.Equal(t, stored.String(), r.String(), "row %d as ent reads it back", i)
		}
		require.Equal(t, []schematype.Micros{7, 7}, spent())

		_, _, err = ta.RecordStep(ctx, step)
		require.True(t, errors.Is(err, ErrStepRecorded), "%v", err)
		_, _, err = tb.RecordStep(ctx, Step{Number: 1, Call: call, ConversationID: ten.Conversation, Calls: step.Calls})
		require.True(t, errors.Is(err, ErrLeaseLost), "%v", err)
		calls, tools, results := count()
		require.Equal(t, []int{1, 2, 0}, []int{calls, tools, results}, "nothing written twice, nothing by runner b")
		require.Equal(t, []schematype.Micros{7, 7}, spent())

		rec := func(r *ent.ToolCall, ref string) CallRecord {
			return CallRecord{ID: r.ID, ConversationID: ten.Conversation, Arguments: r.Arguments,
				Outcome: schematype.OutcomeHits, Attempts: 1, Ref: ref, Heard: "2",
				Result: Result{Kind: schematype.KindText, Content: []byte("2")}}
		}
		_, err = tb.RecordCall(ctx, rec(rows[0], "ref-b"))
		require.True(t, errors.Is(err, ErrLeaseLost), "%v", err)
		n, err := ta.RecordCall(ctx, rec(rows[0], "ref-a"))
		require.NoError(t, err)
		require.Equal(t, int64(1), n)
		_, err = ta.RecordCall(ctx, rec(rows[0], "ref-again"))
		require.True(t, errors.Is(err, ErrStepRecorded), "%v", err)
		got := c.ToolCall.GetX(ctx, rows[0].ID)
		require.Equal(t, schematype.OutcomeHits, got.Outcome)
		require.NotNil(t, got.ResultID)
		require.Equal(t, "ref-a", c.StoredResult.GetX(ctx, *got.ResultID).Ref)
		require.Equal(t, schematype.OutcomePending, c.ToolCall.GetX(ctx, rows[1].ID).Outcome)
		_, _, results = count()
		require.Equal(t, 1, results, "the refused records stored nothing")

		// Runner b's answer is refused; runner a's ends the turn.
		answer := Step{Number: 1, Call: call, ConversationID: ten.Conversation}
		answer.Call.Text = "It is 2."
		_, _, err = tb.RecordStep(ctx, answer)
		require.True(t, errors.Is(err, ErrLeaseLost), "%v", err)
		require.Equal(t, turn.StatusRUNNING, c.Turn.GetX(ctx, id).Status)
		_, finished, err = ta.RecordStep(ctx, answer)
		require.NoError(t, err)
		require.True(t, finished)
		ended := c.Turn.GetX(ctx, id)
		require.Equal(t, turn.StatusCOMPLETED, ended.Status)
		require.Equal(t, "It is 2.", *ended.Answer)
		require.Nil(t, ended.ClaimedBy)
		require.True(t, c.Conversation.GetX(ctx, ten.Conversation).UpdatedAt.Equal(now))
		calls, _, _ = count()
		require.Equal(t, 2, calls)
		require.Equal(t, []schematype.Micros{14, 14}, spent())
	})
}
