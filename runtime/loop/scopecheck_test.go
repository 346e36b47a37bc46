package loop_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/db"
	"github.com/toolgate/toolgate/ent/schematype"
	"github.com/toolgate/toolgate/ent/turn"
	"github.com/toolgate/toolgate/graph/gid"
	"github.com/toolgate/toolgate/runtime/model"
)

// TestScopeTokenRefusedOnceTheTurnEnds: the turn's own calls pass with its
// scope token while the runner of this process has them in flight (no
// statement: Runner.Vouches); a token of the same turn, as the runtime
// mints it, passes between its steps (the database says it runs), and is
// refused like a made-up token once the turn has ended, and for a turn
// that was cancelled.
func TestScopeTokenRefusedOnceTheTurnEnds(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, d *db.DB) {
		p := &scripted{answers: []model.Response{
			{ToolCalls: []model.ToolCall{call("c1", "calculator", `{"expression": "2+2"}`)}},
			{Text: "Four."},
		}, block: make(chan struct{}), blockCall: 2}
		h := newHarness(t, d, p)
		conv := h.conversation(t)
		convID, err := gid.Decode(conv)
		require.NoError(t, err)
		calc := `{ calculate(expression: "3*3") { value } }`

		id := h.send(t, conv, "2+2?", "")
		turnID, err := gid.Decode(id)
		require.NoError(t, err)
		require.Eventually(t, func() bool { return p.count() == 2 }, 20*time.Second, time.Millisecond)
		// Between the steps (the second model call waits): running.
		token := h.mint(t, turnID, convID, []string{"calculator"})
		data, errs := h.tryAs(t, token, calc, nil)
		require.Empty(t, errs)
		require.NotNil(t, data["calculate"])

		close(p.block)
		got := h.wait(t, id)
		require.Equal(t, turn.StatusCOMPLETED, got.Status, got.Error)
		calls := h.calls(t, id)
		require.Len(t, calls, 1)
		require.Equal(t, schematype.OutcomeHits, calls[0].Outcome, "the turn's own call passed")

		// Ended: the same token, and a fresh one, are refused.
		for _, tok := range []string{token, h.mint(t, turnID, convID, []string{"calculator"})} {
			_, errs = h.tryAs(t, tok, calc, nil)
			require.Len(t, errs, 1)
			require.Equal(t, "UNAUTHENTICATED", errs[0].(map[string]any)["extensions"].(map[string]any)["code"])
		}

		// Cancelled while its second model call waits: refused too.
		p.mu.Lock()
		p.answers = []model.Response{{ToolCalls: []model.ToolCall{call("c2", "calculator", `{"expression": "1+1"}`)}}, {Text: "Two."}}
		p.block, p.blockCall = make(chan struct{}), 4
		p.mu.Unlock()
		id = h.send(t, conv, "1+1?", "")
		turnID, err = gid.Decode(id)
		require.NoError(t, err)
		require.Eventually(t, func() bool { return p.count() == 4 }, 20*time.Second, time.Millisecond)
		token = h.mint(t, turnID, convID, []string{"calculator"})
		h.gql(t, `mutation($id: ID!) { cancelTurn(id: $id) { status } }`, map[string]any{"id": id})
		got = h.wait(t, id)
		require.Equal(t, turn.StatusCANCELLED, got.Status)
		_, errs = h.tryAs(t, token, calc, nil)
		require.Len(t, errs, 1)
		require.Equal(t, "UNAUTHENTICATED", errs[0].(map[string]any)["extensions"].(map[string]any)["code"])
	})
}
