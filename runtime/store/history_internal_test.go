package store

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/db"
	"github.com/toolgate/toolgate/db/dbtest"
	"github.com/toolgate/toolgate/ent"
	"github.com/toolgate/toolgate/ent/modelcall"
	"github.com/toolgate/toolgate/ent/schematype"
	"github.com/toolgate/toolgate/ent/summary"
	"github.com/toolgate/toolgate/ent/tenancy"
	"github.com/toolgate/toolgate/ent/toolcall"
	"github.com/toolgate/toolgate/ent/turn"
	"github.com/toolgate/toolgate/graph/auth"
	"github.com/toolgate/toolgate/runtime/prompt"
)

// ReadPast's one statement gives what ent's reads give: the summaries'
// chain, the turns after it, their steps' model calls and tool calls
// (what was heard only for the recent turns and this one), and the
// results' sizes; nothing of other conversations, of the turns the
// summaries stand for, or of later turns; strings PostgreSQL keeps
// escaped read back as written.
func TestReadPastAsEntReadsIt(t *testing.T) {
	t.Parallel()
	require.Len(t, toolcall.Columns, 20, "readPast reads each tool call column: read the new one too")
	dbtest.Each(t, func(t *testing.T, d *db.DB) {
		ctx := tenancy.System(context.Background())
		c := d.Client()
		g, err := auth.Bootstrap(ctx, c, "Acme", "Ada Lovelace", "Research")
		require.NoError(t, err)
		a := c.Agent.Create().SetOrganizationID(g.OrganizationID).SetName("Analyst").SaveX(ctx)
		now := time.Date(2026, 11, 29, 19, 30, 42, 123456000, time.UTC)
		newConv := func() *ent.Conversation {
			return c.Conversation.Create().SetOrganizationID(g.OrganizationID).SetUserID(g.UserID).SetAgentID(a.ID).SaveX(ctx)
		}
		conv, other := newConv(), newConv()
		// fill gives a conversation turns 1–6 of two steps each, a call per
		// step, and a summary of turn 1; turn 5 is the one that runs.
		fill := func(cv *ent.Conversation) []*ent.Turn {
			var turns []*ent.Turn
			for n := 1; n <= 6; n++ {
				tu := c.Turn.Create().SetConversationID(cv.ID).SetNumber(n).SetUserText("ask\x00 \uE000 ✓").
					SetStartedAt(now.Add(time.Duration(n) * time.Minute)).SetTimeZone("Europe/Paris").SaveX(ctx)
				if n%2 == 0 {
					tu = tu.Update().SetAnswer("answer").SetStatus(turn.StatusCOMPLETED).SaveX(ctx)
				}
				turns = append(turns, tu)
				for step := range 2 {
					c.ModelCall.Create().SetTurnID(tu.ID).SetOrganizationID(g.OrganizationID).SetAgentID(a.ID).SetUserID(g.UserID).
						SetStep(step).SetText("step text\x00").SetProvider("p").SetModel("m").ExecX(ctx)
					create := c.ToolCall.Create().SetTurnID(tu.ID).SetPosition(step).SetStep(step).SetCallID("c").
						SetName("calculator").SetArguments(`{"expression":"1+1"}`).SetStartedAt(now)
					if step == 0 {
						r := c.StoredResult.Create().SetConversationID(cv.ID).SetRef(fmt.Sprintf("r%d-%d", cv.ID, n)).SetKind(schematype.KindText).
							SetContent([]byte("2")).SetChars(int64(100 + n)).SetBytes(1).SetItems(1).SaveX(ctx)
						create.SetOutcome(schematype.OutcomeHits).SetAttempts(2).SetResultID(r.ID).SetRef(r.Ref).
							SetHeard("heard \x00 it").SetMessage("m").SetGuardrail("g").SetArgumentsRef("ar").SetFinishedAt(now.Add(time.Second)).
							SetFailures([]schematype.ItemFailure{{Item: 1, Kind: schematype.FailureOutage, Message: "x\x00"}}).
							SetEvidence([]schematype.Span{{Ref: r.Ref, Start: 0, End: 1}}).
							SetRepairs([]schematype.Repair{{Rule: "coerce", Path: "expression"}})
					}
					create.ExecX(ctx)
				}
				c.ModelCall.Create().SetTurnID(tu.ID).SetOrganizationID(g.OrganizationID).SetAgentID(a.ID).SetUserID(g.UserID).
					SetKind(modelcall.KindSUMMARY).SetStep(0).SetText("not a step").SetProvider("p").SetModel("m").ExecX(ctx)
			}
			c.Summary.Create().SetConversationID(cv.ID).SetFromTurn(1).SetToTurn(1).SetText("sum\x00").SetTurnID(turns[1].ID).
				SetModel("m").SetCreatedAt(now).ExecX(ctx)
			return turns
		}
		turns := fill(conv)
		fill(other)
		got, err := New(c, d.Queue().Dialect(), "r", nil).ReadPast(ctx,
			Of{Conversation: conv.ID, Number: turns[4].Number, Turn: turns[4].ID, Organization: conv.OrganizationID})
		require.NoError(t, err)

		want := entPast(ctx, t, c, conv.ID, turns[4])
		require.Len(t, got.Turns, 3) // turns 2 to 4
		require.Len(t, got.Chain, 1)
		require.JSONEq(t, asJSON(t, want.Chain), asJSON(t, got.Chain))
		require.JSONEq(t, asJSON(t, want.Turns), asJSON(t, got.Turns))
		require.JSONEq(t, asJSON(t, want.Steps), asJSON(t, got.Steps))
		require.Equal(t, want.Sizes, got.Sizes)
		require.Nil(t, got.Steps[turns[1].ID][0].Calls[0].Heard, "turn 2 is not among the recent")
		require.Equal(t, "heard \x00 it", *got.Steps[turns[3].ID][0].Calls[0].Heard)
		require.Equal(t, "heard \x00 it", *got.Steps[turns[4].ID][0].Calls[0].Heard)
	})
}

// entPast reads the history with ent, a statement a part.
func entPast(ctx context.Context, t *testing.T, c *ent.Client, convID int, cur *ent.Turn) *Past {
	rows := c.Summary.Query().Where(summary.ConversationID(convID), summary.ToTurnLT(cur.Number)).
		Order(ent.Asc(summary.FieldToTurn)).AllX(ctx)
	var all []prompt.Summary
	for _, r := range rows {
		all = append(all, prompt.Summary{From: r.FromTurn, To: r.ToTurn, Text: r.Text})
	}
	out := &Past{Chain: prompt.Chain(all), Steps: map[int][]prompt.Step{}, Sizes: map[string]int64{}}
	after := 0
	if len(out.Chain) > 0 {
		after = out.Chain[len(out.Chain)-1].To
	}
	out.Turns = c.Turn.Query().Where(turn.ConversationID(convID), turn.NumberGT(after), turn.NumberLT(cur.Number)).
		Order(ent.Asc(turn.FieldNumber)).
		Select(turn.FieldID, turn.FieldNumber, turn.FieldStartedAt, turn.FieldTimeZone, turn.FieldUserText, turn.FieldAnswer, turn.FieldStatus).
		AllX(ctx)
	ids := []int{}
	for _, tu := range out.Turns {
		ids = append(ids, tu.ID)
	}
	ids = append(ids, cur.ID)
	recent := ids[max(0, len(ids)-prompt.RecentTurns-1):]
	for _, mc := range c.ModelCall.Query().Where(modelcall.TurnIDIn(ids...), modelcall.KindEQ(modelcall.KindSTEP)).
		Order(ent.Asc(modelcall.FieldTurnID), ent.Asc(modelcall.FieldStep)).AllX(ctx) {
		for len(out.Steps[mc.TurnID]) <= mc.Step {
			out.Steps[mc.TurnID] = append(out.Steps[mc.TurnID], prompt.Step{})
		}
		out.Steps[mc.TurnID][mc.Step].Text = mc.Text
	}
	for _, call := range c.ToolCall.Query().Where(toolcall.TurnIDIn(ids...)).
		Order(ent.Asc(toolcall.FieldTurnID), ent.Asc(toolcall.FieldPosition)).WithResult().AllX(ctx) {
		if r := call.Edges.Result; r != nil {
			out.Sizes[r.Ref] = r.Chars
		}
		call.Edges = ent.ToolCallEdges{}
		isRecent := false
		for _, id := range recent {
			isRecent = isRecent || id == call.TurnID
		}
		if !isRecent {
			call.Heard = nil
		}
		for len(out.Steps[call.TurnID]) <= call.Step {
			out.Steps[call.TurnID] = append(out.Steps[call.TurnID], prompt.Step{})
		}
		out.Steps[call.TurnID][call.Step].Calls = append(out.Steps[call.TurnID][call.Step].Calls, call)
	}
	return out
}
