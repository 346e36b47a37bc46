package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/db"
	"github.com/toolgate/toolgate/db/dbtest"
	"github.com/toolgate/toolgate/ent/tenancy"
	"github.com/toolgate/toolgate/ent/turn"
	"github.com/toolgate/toolgate/graph/gid"
	"github.com/toolgate/toolgate/runtime/loop"
)

// resumeWithin is the promise: a turn whose process died resumes within
// 15 s of the death (StaleAfter until it counts as abandoned, plus one
// SweepEvery), on the restarted replica.
const resumeWithin = 15 * time.Second

// TestDeadTurnResumesWithin15s kills the real binary, run with its default
// timings, while a turn waits on its model call, restarts it at once, and
// requires the turn's model call to be sent again within 15 s of the kill,
// and the turn to complete.
func TestDeadTurnResumesWithin15s(t *testing.T) {
	t.Parallel()
	require.LessOrEqual(t, loop.StaleAfter+loop.SweepEvery, resumeWithin, "the defaults keep the promise")
	bin := buildBinary(t)
	for _, backend := range []dbtest.Backend{dbtest.SQLite, dbtest.Postgres} {
		t.Run(string(backend), func(t *testing.T) {
			t.Parallel()
			resumeTimeRun(t, bin, dbtest.URL(t, backend))
		})
	}
}

func resumeTimeRun(t *testing.T, bin, url string) {
	ctx := tenancy.System(context.Background())
	// The model holds its first call until the caller goes away (the
	// kill), and answers every later one at once.
	var calls atomic.Int32
	arrived := make(chan time.Time, 4)
	model := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		n := calls.Add(1)
		arrived <- time.Now()
		if n == 1 {
			<-r.Context().Done()
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, `data: {"id":"y","object":"chat.completion.chunk","created":1,"model":"gpt-4.1","choices":[{"index":0,"finish_reason":"stop","delta":{"role":"assistant","content":"Resumed."}}]}`+"\n\n")
		fmt.Fprint(w, `data: {"id":"y","object":"chat.completion.chunk","created":1,"model":"gpt-4.1","choices":[],"usage":{"prompt_tokens":100,"completion_tokens":3,"total_tokens":103}}`+"\n\n")
		fmt.Fprint(w, "data: [DONE]\n\n")
	}))
	t.Cleanup(model.Close)
	s := newCrashServer(t, bin, url, "OPENAI_BASE_URL="+model.URL+"/v1", "OPENAI_API_KEY=test")

	s.start()
	must := func(data map[string]any, err error) map[string]any {
		t.Helper()
		require.NoError(t, err)
		return data
	}
	agent := must(s.gql(`mutation { createAgent(input: {name: "Quick", instructions: "Answer.", tools: []}) { id } }`, nil))
	conv := must(s.gql(`mutation($a: ID!) { startConversation(input: {agentId: $a}) { id } }`,
		map[string]any{"a": agent["createAgent"].(map[string]any)["id"]}))
	sent := must(s.gql(`mutation($c: ID!) { sendMessage(input: {conversationId: $c, text: "hello"}) { id } }`,
		map[string]any{"c": conv["startConversation"].(map[string]any)["id"]}))
	turnID, err := gid.Decode(sent["sendMessage"].(map[string]any)["id"].(string))
	require.NoError(t, err)

	select {
	case <-arrived:
	case <-time.After(30 * time.Second):
		t.Fatal("the turn's first model call never came")
	}
	s.kill()
	died := time.Now()
	s.start()
	defer s.stop()
	select {
	case at := <-arrived:
		took := at.Sub(died)
		t.Logf("resumed %s after the kill", took.Round(time.Millisecond))
		require.Less(t, took, resumeWithin, "a dead turn resumes within 15 s")
	case <-time.After(2 * resumeWithin):
		t.Fatal("the dead turn was not resumed")
	}

	d, err := db.Open(ctx, url)
	require.NoError(t, err)
	defer d.Close()
	require.Eventually(t, func() bool {
		return d.Client().Turn.GetX(ctx, turnID).Status == turn.StatusCOMPLETED
	}, 30*time.Second, 50*time.Millisecond, "the resumed turn completes")
	require.EqualValues(t, 2, calls.Load(), "the model was asked once more, not again and again")
	// The killed process's job does not stay running: it is finished
	// within a minute of the restart, and the metric counts nothing.
	s.requireQueueIdle(t, d, died)
}
