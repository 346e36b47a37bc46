package main

import (
	"context"
	"encoding/json"
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

// TestApprovalCrash approves each charge of a turn (its application asks
// for every call) and kills the process with SIGKILL as soon as the
// decision is answered: between the decision and the call, or while the
// call runs, or after it. Each restart goes on from the stored decision:
// a call is never asked about again, and never sent twice.
func TestApprovalCrash(t *testing.T) {
	t.Parallel()
	bin := buildBinary(t)
	for _, backend := range []dbtest.Backend{dbtest.SQLite, dbtest.Postgres} {
		t.Run(string(backend), func(t *testing.T) {
			t.Parallel()
			approvalCrashRun(t, bin, dbtest.URL(t, backend))
		})
	}
}

func approvalCrashRun(t *testing.T, bin, url string) {
	ctx := tenancy.System(context.Background())
	bill, model := &billing{}, &fakeModel{}
	billURL, modelURL := bill.serve(t), model.serve(t)
	s := newCrashServer(t, bin, url, "OPENAI_BASE_URL="+modelURL, "OPENAI_API_KEY=test", "TOOLGATE_TEST_STALE_AFTER=2s")
	d, err := db.Open(ctx, url)
	require.NoError(t, err)
	defer d.Close()
	client := d.Client()
	s.start()
	must := func(data map[string]any, err error) map[string]any {
		t.Helper()
		require.NoError(t, err)
		return data
	}
	must(s.gql(`mutation($u: String!) { registerApplication(input: {name: "billing", url: $u, allowedTools: ["charge"], defaultApproval: ALWAYS}) { id } }`,
		map[string]any{"u": billURL}))
	agent := must(s.gql(`mutation { createAgent(input: {name: "Clerk", tools: ["billing__charge"]}) { id } }`, nil))
	conv := must(s.gql(`mutation($a: ID!) { startConversation(input: {agentId: $a, title: "c0"}) { id } }`,
		map[string]any{"a": agent["createAgent"].(map[string]any)["id"]}))
	sent := must(s.gql(`mutation($c: ID!) { sendMessage(input: {conversationId: $c, text: "Please handle turn c0-t1"}) { id } }`,
		map[string]any{"c": conv["startConversation"].(map[string]any)["id"]}))
	turnID := sent["sendMessage"].(map[string]any)["id"].(string)
	id, err := gid.Decode(turnID)
	require.NoError(t, err)

	status := func() turn.Status { return client.Turn.GetX(ctx, id).Status }
	for kill := range crashCharges {
		require.Eventually(t, func() bool { return status() == turn.StatusWAITING_FOR_APPROVAL }, time.Minute, 20*time.Millisecond,
			"charge %d waits for its approval", kill+1)
		pending := must(s.gql(`query($t: ID!) { node(id: $t) { ... on Turn { pendingApprovals { id name } } } }`, map[string]any{"t": turnID}))
		calls := pending["node"].(map[string]any)["pendingApprovals"].([]any)
		require.Len(t, calls, 1)
		must(s.gql(`mutation($t: ID!, $c: ID!) { decideToolCalls(input: {turnId: $t, decisions: [{toolCallId: $c, decision: APPROVE}]}) { status } }`,
			map[string]any{"t": turnID, "c": calls[0].(map[string]any)["id"]}))
		// Later and later after the decision: before the job, during the
		// call, after it.
		time.Sleep(time.Duration(kill*150) * time.Millisecond)
		s.kill()
		s.start()
	}
	require.Eventually(t, func() bool { return status() == turn.StatusCOMPLETED }, 2*time.Minute, 50*time.Millisecond)
	s.stop()

	calls := client.ToolCall.Query().Where(toolcall.TurnID(id), toolcall.Name("billing__charge")).Order(ent.Asc(toolcall.FieldPosition)).AllX(ctx)
	require.Len(t, calls, crashCharges)
	ran := bill.runs()
	outcomes := map[schematype.Outcome]int{}
	for _, c := range calls {
		outcomes[c.Outcome]++
		var args struct{ Name string }
		require.NoError(t, json.Unmarshal([]byte(c.Arguments), &args))
		a := client.Approval.Query().Where(approval.ToolCallID(c.ID)).OnlyX(ctx) // asked once, never again
		require.Equal(t, schematype.DecisionApprove, *a.Decision)
		switch c.Outcome {
		case schematype.OutcomeHits:
			require.Equal(t, 1, ran[args.Name], "charge %s ran once", args.Name)
		case schematype.OutcomeMayHaveRun:
			require.LessOrEqual(t, ran[args.Name], 1, "charge %s: taken up before the kill, never sent again", args.Name)
		default:
			t.Errorf("charge %s: %s %v", args.Name, c.Outcome, c.Message)
		}
	}
	for name, n := range ran {
		require.Equal(t, 1, n, "charge %s ran %d times", name, n)
	}
	require.Equal(t, crashCharges, client.Approval.Query().CountX(ctx))
	t.Logf("outcomes after a kill following each approval: %v", outcomes)
}
