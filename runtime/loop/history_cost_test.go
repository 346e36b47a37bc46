package loop_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/db/dbtest"
	"github.com/toolgate/toolgate/ent"
	"github.com/toolgate/toolgate/ent/modelcall"
	"github.com/toolgate/toolgate/ent/schematype"
	"github.com/toolgate/toolgate/ent/tenancy"
	"github.com/toolgate/toolgate/ent/turn"
	"github.com/toolgate/toolgate/graph/gid"
	"github.com/toolgate/toolgate/runtime/loop"
	"github.com/toolgate/toolgate/runtime/model"
	"github.com/toolgate/toolgate/tools/budget"
)

// seedModelCalls stores n model calls of the rig's user earlier in the
// month, each with a cost, straight into the tables (a client without the
// hooks: the month's running totals are not what is measured here), as a
// month of traffic spreads them: callsPerTurn a turn, turnsPerConversation
// turns a conversation, in conversations of their own. The planner reads
// the spread from the statistics: with every call under one turn, it would
// rightly scan them all for that turn's calls.
func (r *costRig) seedModelCalls(t testing.TB, n int) {
	t.Helper()
	const callsPerTurn, turnsPerConversation = 4, 50
	ctx := tenancy.System(context.Background())
	conv := r.client.Conversation.Query().FirstX(ctx)
	raw := ent.NewClient(ent.Driver(r.db.Driver))
	start, _ := budget.Month(r.now)
	var turns []int
	for len(turns)*callsPerTurn < n {
		seedConv := raw.Conversation.Create().SetOrganizationID(conv.OrganizationID).SetUserID(conv.UserID).SetAgentID(conv.AgentID).SaveX(ctx)
		batch := make([]*ent.TurnCreate, turnsPerConversation)
		for i := range batch {
			batch[i] = raw.Turn.Create().SetConversationID(seedConv.ID).SetNumber(i + 1).SetUserText("earlier").
				SetStatus(turn.StatusCOMPLETED).SetStartedAt(r.now)
		}
		for _, tu := range raw.Turn.CreateBulk(batch...).SaveX(ctx) {
			turns = append(turns, tu.ID)
		}
	}
	for done := 0; done < n; {
		batch := make([]*ent.ModelCallCreate, 0, 500)
		for ; done < n && len(batch) < cap(batch); done++ {
			batch = append(batch, raw.ModelCall.Create().SetTurnID(turns[done/callsPerTurn]).SetStep(done%callsPerTurn).
				SetOrganizationID(conv.OrganizationID).
				SetAgentID(conv.AgentID).SetUserID(conv.UserID).SetProvider("scripted").SetModel("gpt-4.1").
				SetInputTokens(1000).SetOutputTokens(100).SetCost(0.0028).SetCostMicros(2800).
				SetStartedAt(start.Add(time.Duration(done)*time.Second)))
		}
		raw.ModelCall.CreateBulk(batch...).ExecX(ctx)
	}
}

// BenchmarkTurnCostByHistory runs one-call turns, with the budget checks a
// turn makes (sendMessage's, before it is stored, and the runtime's after
// its tool step), after 10 and after 100,000 earlier model calls of the
// organisation in the month, with no limit set and with limits set (the
// organisation's and the user's, not reached). What a turn costs, in CPU
// here (cpu-ms/turn, SQLite's work included), in PostgreSQL's server
// processes (db-cpu-ms/turn), in statements and in allocations, does not
// grow with the month's traffic.
func BenchmarkTurnCostByHistory(b *testing.B) {
	for _, backend := range []dbtest.Backend{dbtest.SQLite, dbtest.Postgres} {
		for _, limits := range []bool{false, true} {
			for _, earlier := range []int{10, 100_000} {
				name := fmt.Sprintf("%s/limits=%t/earlier=%d", backend, limits, earlier)
				b.Run(name, func(b *testing.B) {
					p := turnOfCalls(1)
					for i := range p.answers {
						p.answers[i].Usage = model.Usage{InputUncached: 1000, Output: 100}
					}
					var client *ent.Client
					rig := newCostRig(b, backend, p, func(c *loop.Config) {
						c.Budget = func(ctx context.Context, org, user int, now time.Time) (string, error) {
							return budget.Stopper(client)(ctx, org, user, now)
						}
					})
					client = rig.client
					ctx := tenancy.System(context.Background())
					convID, err := gid.Decode(rig.conversation(b))
					require.NoError(b, err)
					conv := rig.client.Conversation.GetX(ctx, convID)
					rig.seedModelCalls(b, earlier)
					if backend == dbtest.Postgres {
						// The planner's statistics of the seeded calls, as
						// autovacuum (on by default) gathers them.
						_, err := rig.db.SQL.Exec("ANALYZE")
						require.NoError(b, err)
					}
					if limits {
						_, err := budget.Set(ctx, rig.client, conv.OrganizationID, 0, schematype.MicrosFromUSD(1_000_000))
						require.NoError(b, err)
						_, err = budget.Set(ctx, rig.client, conv.OrganizationID, conv.UserID, schematype.MicrosFromUSD(1_000_000))
						require.NoError(b, err)
					}
					var (
						cpu, dbCPU time.Duration
						stmts      int
					)
					b.ReportAllocs()
					for b.Loop() {
						b.StopTimer()
						// Each turn alone in its conversation; the earlier
						// calls stay.
						rig.client.ToolCall.Delete().ExecX(ctx)
						// By the turns' ids: a join on the conversation
						// led SQLite to scan every earlier call, which
						// emptied its page cache before each turn.
						ids := rig.client.Turn.Query().Where(turn.ConversationID(convID)).IDsX(ctx)
						rig.client.ModelCall.Delete().Where(modelcall.TurnIDIn(ids...)).ExecX(ctx)
						rig.client.StoredResult.Delete().ExecX(ctx)
						rig.client.Turn.Delete().Where(turn.ConversationID(convID)).ExecX(ctx)
						id := rig.newTurn(b, convID, 1)
						dbBefore := rig.dbCPU(b)
						rig.stmts.reset()
						before := processCPU()
						b.StartTimer()
						// sendMessage's check, then the turn.
						if err := budget.Enforce(ctx, rig.client, conv.OrganizationID, conv.UserID, rig.now); err != nil {
							b.Fatal(err)
						}
						if err := rig.runner.RunTurn(ctx, id); err != nil {
							b.Fatal(err)
						}
						rig.flush()
						b.StopTimer()
						cpu += processCPU() - before
						stmts += rig.stmts.count()
						dbCPU += since(dbBefore, rig.dbCPU(b))
						b.StartTimer()
					}
					got := rig.client.Turn.Query().Where(turn.ConversationID(convID)).OnlyX(ctx)
					require.Equal(b, turn.StatusCOMPLETED, got.Status, got.Error)
					b.ReportMetric(float64(stmts)/float64(b.N), "stmts/turn")
					b.ReportMetric(float64(cpu.Microseconds())/1000/float64(b.N), "cpu-ms/turn")
					if backend == dbtest.Postgres {
						b.ReportMetric(float64(dbCPU.Microseconds())/1000/float64(b.N), "db-cpu-ms/turn")
					}
				})
			}
		}
	}
}
