package graph_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/db"
	"github.com/toolgate/toolgate/db/dbtest"
	"github.com/toolgate/toolgate/ent"
	"github.com/toolgate/toolgate/ent/approval"
	"github.com/toolgate/toolgate/ent/schematype"
	"github.com/toolgate/toolgate/ent/tenancy"
	"github.com/toolgate/toolgate/ent/toolcall"
	"github.com/toolgate/toolgate/ent/turn"
	"github.com/toolgate/toolgate/graph/gid"
)

const approvalsTranscript = `query($id: ID!) {
  conversation(id: $id) {
    turns(first: 100) { edges { node {
      number status
      pendingApprovals { id name approval { tool decision } }
      toolCalls { id name outcome approval { tool decision reason } }
    } } }
  }
}`

// seedApprovals gives the first call of every turn of conv an approval,
// decided (APPROVE), and leaves every fifth turn waiting on its second
// call.
func seedApprovals(t testing.TB, c *ent.Client, convID int) {
	t.Helper()
	ctx := tenancy.System(context.Background())
	turns := c.Turn.Query().Where(turn.ConversationID(convID)).Order(ent.Asc(turn.FieldNumber)).AllX(ctx)
	now := time.Now()
	for _, tu := range turns {
		calls := tu.QueryToolCalls().Order(ent.Asc(toolcall.FieldPosition)).AllX(ctx)
		approve := schematype.DecisionApprove
		create := func(call *ent.ToolCall) *ent.ApprovalCreate {
			return c.Approval.Create().SetConversationID(convID).SetTurnID(tu.ID).SetToolCallID(call.ID).
				SetTool(call.Name).SetArguments(call.Arguments).SetPolicy(schematype.ApprovalAlways).
				SetCreatedAt(now).SetExpiresAt(now.Add(time.Hour))
		}
		create(calls[0]).SetDecision(approve).SetDecidedAt(now).ExecX(ctx)
		if tu.Number%5 == 0 {
			create(calls[1]).ExecX(ctx)
			c.ToolCall.UpdateOneID(calls[1].ID).SetOutcome(schematype.OutcomePending).ExecX(ctx)
			c.Turn.UpdateOneID(tu.ID).SetStatus(turn.StatusWAITING_FOR_APPROVAL).ClearAnswer().ExecX(ctx)
		}
	}
}

// TestApprovalFieldsStatementsBounded: a transcript that asks every call
// for its approval and every turn for what waits sends as many statements
// for 100 turns as for 2 (one for the approvals of the page, whatever the
// number of rows), and answers the same as asking each call alone.
func TestApprovalFieldsStatementsBounded(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, d *db.DB) {
		counter := dbtest.Count(d)
		b := setup(t, d)
		agentID := b.createAgent(t, b.alice.Token, "Helper")
		small := b.startConversation(t, b.alice.Token, agentID, "small")
		large := b.startConversation(t, b.alice.Token, agentID, "large")
		for conv, turns := range map[string]int{small: 2, large: 100} {
			id, err := gid.Decode(conv)
			require.NoError(t, err)
			seedTranscript(t, b.client, id, turns, 3)
			seedApprovals(t, b.client, id)
		}
		count := func(id string) (int, map[string]any) {
			counter.Reset()
			data := b.do(t, b.alice.Token, approvalsTranscript, map[string]any{"id": id}).ok(t)
			return len(counter.Statements()), data
		}
		nSmall, _ := count(small)
		nLarge, data := count(large)
		edges := get(data, "conversation", "turns", "edges").([]any)
		require.Len(t, edges, 100)
		waiting := 0
		for i, e := range edges {
			n := i + 1
			require.Equal(t, "APPROVE", get(e, "node", "toolCalls", 0, "approval", "decision"), "turn %d", n)
			pending := get(e, "node", "pendingApprovals").([]any)
			if n%5 == 0 {
				waiting++
				require.Equal(t, "WAITING_FOR_APPROVAL", get(e, "node", "status"))
				require.Len(t, pending, 1)
				require.Equal(t, get(e, "node", "toolCalls", 1, "id"), get(pending[0], "id"), "the waiting call")
				require.Equal(t, "calculator", get(pending[0], "approval", "tool"))
				require.Nil(t, get(pending[0], "approval", "decision"))
				require.Nil(t, get(e, "node", "toolCalls", 1, "approval", "decision"))
			} else {
				require.Empty(t, pending)
				require.Nil(t, get(e, "node", "toolCalls", 1, "approval"), "a call that needed none")
			}
			require.Nil(t, get(e, "node", "toolCalls", 2, "approval"))
		}
		require.Equal(t, 20, waiting)
		// token, conversation, turns, tool calls (one list for both fields),
		// approvals.
		require.Equal(t, 5, nLarge, counter.Statements())
		require.Equal(t, nSmall, nLarge, "statements must not grow with the transcript: %v", counter.Statements())
		// The same answers, one call at a time (node, outside any page).
		call := get(edges[4], "node", "toolCalls", 1, "id").(string)
		one := b.do(t, b.alice.Token, `query($id: ID!) { node(id: $id) { ... on ToolCall { approval { tool decision } } } }`,
			map[string]any{"id": call}).ok(t)
		require.Equal(t, "calculator", get(one, "node", "approval", "tool"))
		require.Nil(t, get(one, "node", "approval", "decision"))
	})
}

// TestApprovalListStatementsBounded: the approvals list with what the
// console asks of each row (the call, its turn, conversation and person,
// who decided) costs as many statements for 100 rows as for 3.
func TestApprovalListStatementsBounded(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, d *db.DB) {
		counter := dbtest.Count(d)
		b := setup(t, d)
		agentID := b.createAgent(t, b.alice.Token, "Helper")
		conv := b.startConversation(t, b.alice.Token, agentID, "refunds")
		id, err := gid.Decode(conv)
		require.NoError(t, err)
		seedTranscript(t, b.client, id, 100, 2)
		seedApprovals(t, b.client, id)
		ctx := tenancy.System(context.Background())
		b.client.Approval.Update().Where(approval.DecisionNotNil()).SetDecidedByID(b.alice.UserID).ExecX(ctx)
		const list = `query($n: Int) { approvals(first: $n) { id tool decision decidedBy { name }
		  toolCall { id turn { number status conversation { title user { name } } } } } }`
		count := func(n int) (int, []any) {
			counter.Reset()
			data := b.do(t, b.alice.Token, list, map[string]any{"n": n}).ok(t)
			return len(counter.Statements()), get(data, "approvals").([]any)
		}
		nSmall, small := count(3)
		nLarge, large := count(100)
		require.Len(t, small, 3)
		require.Len(t, large, 100)
		for _, a := range large {
			require.Equal(t, "refunds", get(a, "toolCall", "turn", "conversation", "title"))
			require.Equal(t, "Alice", get(a, "toolCall", "turn", "conversation", "user", "name"))
			if get(a, "decision") != nil {
				require.Equal(t, "Alice", get(a, "decidedBy", "name"))
			}
		}
		require.Equal(t, nSmall, nLarge, "statements must not grow with the list: %v", counter.Statements())
	})
}
