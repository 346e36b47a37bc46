package loop_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/db"
	"github.com/toolgate/toolgate/ent"
	"github.com/toolgate/toolgate/ent/schematype"
	"github.com/toolgate/toolgate/ent/tenancy"
	"github.com/toolgate/toolgate/ent/turn"
	"github.com/toolgate/toolgate/graph/gid"
	"github.com/toolgate/toolgate/runtime/loop"
	"github.com/toolgate/toolgate/runtime/model"
)

// deadTurn is a turn as a killed process leaves it: RUNNING, claimed by a
// runner that no longer beats, and its job "running" in River's table
// since a minute, fetched by that runner (River never rescues it: a turn's
// job has no timeout).
func (h *harness) deadTurn(t *testing.T, d *db.DB, convID int, claimed bool) *ent.Turn {
	t.Helper()
	ctx := tenancy.System(context.Background())
	c := h.client.Turn.Create().SetConversationID(convID).SetNumber(1).SetUserText("total 1200 and 850").
		SetStartedAt(h.now).SetHeartbeatAt(h.now.Add(-loop.StaleAfter - time.Second))
	if claimed {
		c.SetClaimedBy("r_dead")
	}
	tu := c.SaveX(ctx)
	orphanJob(t, d, tu.ID, "r_dead", time.Minute)
	return tu
}

// orphanJob puts a turn's job in River's table as running since ago,
// fetched by the runner named by.
func orphanJob(t *testing.T, d *db.DB, turnID int, by string, ago time.Duration) int64 {
	t.Helper()
	args, err := json.Marshal(loop.TurnArgs{TurnID: turnID})
	require.NoError(t, err)
	at := time.Now().Add(-ago)
	row, err := d.Queue().Executor().JobInsertFull(context.Background(), &riverdriver.JobInsertFullParams{
		Attempt: 1, AttemptedAt: &at, AttemptedBy: []string{by}, CreatedAt: &at, ScheduledAt: &at,
		EncodedArgs: args, Kind: loop.TurnArgs{}.Kind(), MaxAttempts: 10, Priority: 1, Queue: river.QueueDefault,
		State: rivertype.JobStateRunning, Metadata: []byte("{}"),
	})
	require.NoError(t, err)
	return row.ID
}

// runningTurnJobs counts the turn jobs River's table shows running.
func runningTurnJobs(t *testing.T, d *db.DB) int {
	t.Helper()
	jobs, err := d.Queue().Executor().JobList(context.Background(), &riverdriver.JobListParams{
		Max: 1000, WhereClause: "state = @state AND kind = @kind", OrderByClause: "id",
		NamedArgs: map[string]any{"state": string(rivertype.JobStateRunning), "kind": loop.TurnArgs{}.Kind()},
	})
	require.NoError(t, err)
	return len(jobs)
}

func (h *harness) step(t *testing.T, turnID, step int, text string) {
	t.Helper()
	h.client.ModelCall.Create().SetTurnID(turnID).SetOrganizationID(h.grant.OrganizationID).SetAgentID(h.agentID(t)).
		SetUserID(h.grant.UserID).SetStep(step).SetText(text).SetProvider("scripted").SetModel("gpt-4.1").
		ExecX(tenancy.System(context.Background()))
}

func (h *harness) agentID(t *testing.T) int {
	t.Helper()
	return h.client.Agent.Query().FirstIDX(tenancy.System(context.Background()))
}

// A turn whose process died resumes, whatever it was doing, without the
// model being asked again for a step already recorded, and a call that may
// have reached its backend is never sent again.
func TestResumeAfterDeathInEveryPhase(t *testing.T) {
	t.Parallel()
	type state func(t *testing.T, h *harness, turnID int)
	tests := []struct {
		name  string
		give  state
		claim bool
		// answers the model is scripted with; wantAsked how often it is asked.
		answers   []model.Response
		wantAsked int
		want      turn.Status
		check     func(t *testing.T, h *harness, p *scripted, tu *ent.Turn)
	}{
		{
			name: "before the first model call", claim: true, give: func(*testing.T, *harness, int) {},
			answers: []model.Response{{Text: "2,050."}}, wantAsked: 1, want: turn.StatusCOMPLETED,
		},
		{
			name: "during a later model call", claim: true,
			give: func(t *testing.T, h *harness, id int) {
				h.step(t, id, 0, "")
				h.client.ToolCall.Create().SetTurnID(id).SetPosition(0).SetStep(0).SetCallID("c1").SetName("calculator").
					SetArguments(`{"expression":"1200+850"}`).SetOutcome(schematype.OutcomeHits).SetHeard("2050").
					ExecX(tenancy.System(context.Background()))
			},
			answers: []model.Response{{Text: "2,050."}}, wantAsked: 1, want: turn.StatusCOMPLETED,
			check: func(t *testing.T, h *harness, p *scripted, _ *ent.Turn) {
				heard := lastTool(p.request(0))
				require.Equal(t, "c1", heard.ToolCallID)
				require.Equal(t, "2050", heard.Text)
			},
		},
		{
			name: "during tool calls", claim: true,
			give: func(t *testing.T, h *harness, id int) {
				h.step(t, id, 0, "")
				ctx := tenancy.System(context.Background())
				h.client.ToolCall.Create().SetTurnID(id).SetPosition(0).SetStep(0).SetCallID("c1").SetName("calculator").
					SetArguments(`{"expression":"1200+850"}`).ExecX(ctx)
				h.client.ToolCall.Create().SetTurnID(id).SetPosition(1).SetStep(0).SetCallID("w1").SetName("write_file").
					SetArguments(`{"files":[{"path":"a.txt","content":"x"}]}`).ExecX(ctx)
			},
			answers: []model.Response{{Text: "2,050; check a.txt."}}, wantAsked: 1, want: turn.StatusCOMPLETED,
			check: func(t *testing.T, h *harness, p *scripted, tu *ent.Turn) {
				calls := h.calls(t, gid.Encode(tu.ID))
				require.Equal(t, schematype.OutcomeHits, calls[0].Outcome, "a read is safe to send again")
				require.Equal(t, schematype.OutcomeMayHaveRun, calls[1].Outcome, "a write is never sent twice")
				ws, err := h.client.WorkspaceFile.Query().Count(tenancy.System(context.Background()))
				require.NoError(t, err)
				require.Zero(t, ws, "the write was not repeated")
				msgs := p.request(0).Messages
				require.Equal(t, "c1", msgs[len(msgs)-2].ToolCallID, "heard in the order asked")
				require.Equal(t, "w1", msgs[len(msgs)-1].ToolCallID)
				require.Contains(t, msgs[len(msgs)-1].Text, "May or may not have run")
			},
		},
		{
			name: "after the answer was recorded", claim: true,
			give: func(t *testing.T, h *harness, id int) { h.step(t, id, 0, "2,050.") },
			want: turn.StatusCOMPLETED,
			check: func(t *testing.T, _ *harness, _ *scripted, tu *ent.Turn) {
				require.Equal(t, "2,050.", *tu.Answer)
			},
		},
		{
			name: "after a question was recorded, before the pause", claim: true,
			give: func(t *testing.T, h *harness, id int) {
				h.step(t, id, 0, "")
				h.client.ToolCall.Create().SetTurnID(id).SetPosition(0).SetStep(0).SetCallID("q1").SetName("clarify").
					SetArguments(`{"question":"Which currency?","options":["EUR","USD"]}`).SetOutcome(schematype.OutcomeHits).
					SetHeard("asked").ExecX(tenancy.System(context.Background()))
			},
			want: turn.StatusWAITING_FOR_CLARIFICATION,
			check: func(t *testing.T, _ *harness, _ *scripted, tu *ent.Turn) {
				require.Equal(t, "Which currency?", tu.Clarification.Question)
			},
		},
		{
			name: "after answerClarification",
			give: func(t *testing.T, h *harness, id int) {
				h.step(t, id, 0, "")
				ctx := tenancy.System(context.Background())
				h.client.ToolCall.Create().SetTurnID(id).SetPosition(0).SetStep(0).SetCallID("q1").SetName("clarify").
					SetArguments(`{"question":"Which currency?","options":["EUR","USD"]}`).SetOutcome(schematype.OutcomeHits).
					SetHeard("The user answered: EUR").ExecX(ctx)
				answer := "EUR"
				h.client.Turn.UpdateOneID(id).SetClarification(&schematype.Clarification{Question: "Which currency?",
					Options: []string{"EUR", "USD"}, Answer: &answer}).ExecX(ctx)
			},
			answers: []model.Response{{Text: "2,050 EUR."}}, wantAsked: 1, want: turn.StatusCOMPLETED,
			check: func(t *testing.T, _ *harness, p *scripted, _ *ent.Turn) {
				require.Equal(t, "The user answered: EUR", lastTool(p.request(0)).Text)
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			each(t, func(t *testing.T, d *db.DB) {
				p := &scripted{answers: tt.answers}
				h := newHarness(t, d, p, func(c *loop.Config) { c.SweepEvery = 50 * time.Millisecond })
				convID, err := gid.Decode(h.conversation(t, "write_file"))
				require.NoError(t, err)
				tu := h.deadTurn(t, d, convID, tt.claim)
				tt.give(t, h, tu.ID)
				h.runner.Sweep() // the process died in this state
				got := h.wait(t, gid.Encode(tu.ID))
				require.Equal(t, tt.want, got.Status, got.Error)
				require.Equal(t, tt.wantAsked, p.count(), "asked once per step not recorded")
				if tt.check != nil {
					tt.check(t, h, p, got)
				}
				// The dead process's job is finished, and the one that ran
				// the turn ended with it.
				require.Eventually(t, func() bool { return runningTurnJobs(t, d) == 0 }, 10*time.Second, 20*time.Millisecond,
					"no turn job left running")
			})
		})
	}
}

// A turn claimed by a runner that still beats is not taken, and one of
// several replicas takes a dead one; a runner that lost its turn writes
// nothing more for it.
func TestLostClaimWritesNothing(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, d *db.DB) {
		block := make(chan struct{})
		p := &scripted{answers: []model.Response{{Text: "late"}}, block: block}
		h := newHarness(t, d, p)
		convID, err := gid.Decode(h.conversation(t))
		require.NoError(t, err)
		id := h.send(t, gid.Encode(convID), "hello", "")
		turnID, err := gid.Decode(id)
		require.NoError(t, err)
		require.Eventually(t, func() bool { return p.count() == 1 }, 10*time.Second, 5*time.Millisecond)
		// Another runner takes the turn while the model call is in flight.
		ctx := tenancy.System(context.Background())
		h.client.Turn.UpdateOneID(turnID).SetClaimedBy("r_other").ExecX(ctx)
		close(block)
		require.Eventually(t, func() bool { return !h.runner.Running(turnID) }, 10*time.Second, 5*time.Millisecond)
		tu := h.client.Turn.GetX(ctx, turnID)
		require.Equal(t, turn.StatusRUNNING, tu.Status, "left to the runner that holds it")
		n, err := h.client.ModelCall.Query().Count(ctx)
		require.NoError(t, err)
		require.Zero(t, n, "the step was not recorded by a runner that lost the turn")
	})
}
