package main

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/db"
	"github.com/toolgate/toolgate/db/dbtest"
	"github.com/toolgate/toolgate/ent/schematype"
	"github.com/toolgate/toolgate/ent/tenancy"
	"github.com/toolgate/toolgate/ent/toolcall"
	"github.com/toolgate/toolgate/ent/turn"
	"github.com/toolgate/toolgate/graph/gid"
)

// TestDrainOnSIGTERM stops the real binary with SIGTERM while a write is
// in flight: the process waits for the call to finish (within
// TOOLGATE_DRAIN_GRACE), records it with its result, and exits cleanly; the
// turn, left for the next runner, resumes after the restart and completes,
// and the write ran once.
func TestDrainOnSIGTERM(t *testing.T) {
	t.Parallel()
	bin := buildBinary(t)
	for _, backend := range []dbtest.Backend{dbtest.SQLite, dbtest.Postgres} {
		t.Run(string(backend), func(t *testing.T) {
			t.Parallel()
			drainRun(t, bin, dbtest.URL(t, backend))
		})
	}
}

func drainRun(t *testing.T, bin, url string) {
	ctx := tenancy.System(context.Background())
	bill, model := &billing{hold: make(chan struct{})}, &fakeModel{}
	billURL, modelURL := bill.serve(t), model.serve(t)
	s := newCrashServer(t, bin, url, "OPENAI_BASE_URL="+modelURL, "OPENAI_API_KEY=test", "TOOLGATE_TEST_STALE_AFTER=2s", "TOOLGATE_DRAIN_GRACE=10s")
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
	must(s.gql(`mutation($u: String!) { registerApplication(input: {name: "billing", url: $u, allowedTools: ["charge"]}) { id } }`, map[string]any{"u": billURL}))
	agent := must(s.gql(`mutation { createAgent(input: {name: "Clerk", instructions: "Charge as asked.", tools: ["billing__charge"]}) { id } }`, nil))
	conv := must(s.gql(`mutation($a: ID!) { startConversation(input: {agentId: $a, title: "c0"}) { id } }`,
		map[string]any{"a": agent["createAgent"].(map[string]any)["id"]}))
	sent := must(s.gql(`mutation($c: ID!) { sendMessage(input: {conversationId: $c, text: "Please handle turn c0-t1"}) { id } }`,
		map[string]any{"c": conv["startConversation"].(map[string]any)["id"]}))
	turnID, err := gid.Decode(sent["sendMessage"].(map[string]any)["id"].(string))
	require.NoError(t, err)

	// The first charge is made, and its answer held: SIGTERM now.
	require.Eventually(t, func() bool { return bill.active.Load() > 0 }, 30*time.Second, 10*time.Millisecond)
	require.NoError(t, s.cmd.Process.Signal(syscall.SIGTERM))
	exited := make(chan error, 1)
	go func() { exited <- s.cmd.Wait() }()
	select {
	case err := <-exited:
		t.Fatalf("the process stopped with a call in flight: %v", err)
	case <-time.After(time.Second):
	}
	close(bill.hold) // the charge answers, within the grace
	select {
	case err := <-exited:
		require.NoError(t, err, "a clean exit after the drain")
	case <-time.After(30 * time.Second):
		t.Fatal("the process did not stop after its calls finished")
	}

	// The call finished and was recorded whole; the turn waits for a runner.
	calls := client.ToolCall.Query().Where(toolcall.TurnID(turnID), toolcall.Name("billing__charge")).AllX(ctx)
	require.Len(t, calls, 1)
	require.Equal(t, schematype.OutcomeHits, calls[0].Outcome)
	require.Equal(t, "charged c0-t1-1", string(calls[0].QueryResult().OnlyX(ctx).Content))
	require.Equal(t, turn.StatusRUNNING, client.Turn.GetX(ctx, turnID).Status)

	s.start()
	require.Eventually(t, func() bool {
		return client.Turn.GetX(ctx, turnID).Status != turn.StatusRUNNING
	}, 60*time.Second, 50*time.Millisecond, "the turn resumes after the restart")
	s.stop()
	tu := client.Turn.GetX(ctx, turnID)
	require.Equal(t, turn.StatusCOMPLETED, tu.Status, "%v", tu.Error)
	require.Equal(t, map[string]int{"c0-t1-1": 1, "c0-t1-2": 1, "c0-t1-3": 1}, bill.runs(), "each write ran once")
	calls = client.ToolCall.Query().Where(toolcall.TurnID(turnID), toolcall.Name("billing__charge")).AllX(ctx)
	require.Len(t, calls, 3)
	for _, c := range calls {
		require.Equal(t, schematype.OutcomeHits, c.Outcome)
	}
}
