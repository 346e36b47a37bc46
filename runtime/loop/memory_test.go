package loop_test

import (
	"context"
	"regexp"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/ent/db"
	"github.com/toolgate/toolgate/ent/tenancy"
	"github.com/toolgate/toolgate/ent/turn"
	"github.com/toolgate/toolgate/graph/gid"
	"github.com/toolgate/toolgate/runtime/model"
)

// memoryAgent starts a conversation with an agent that has the memory
// switch on and the memory tools listed.
func (h *harness) memoryAgent(t testing.TB) string {
	t.Helper()
	return h.agent(t, map[string]any{"memory": true, "tools": []string{"memory_write", "memory_search", "memory_forget"}})
}

// remember saves a fact through the API, as the person's own, and returns
// its public id.
func (h *harness) remember(t testing.TB, conv, fact string) string {
	t.Helper()
	m := h.gql(t, `mutation($c: ID, $f: String!) { memoryWrite(conversationId: $c, facts: [{text: $f}]) { stored { id } } }`,
		map[string]any{"c": conv, "f": fact})
	return m["memoryWrite"].(map[string]any)["stored"].([]any)[0].(map[string]any)["id"].(string)
}

// TestMemoryNamesPublicIDs: a fact already remembered is named to the model
// by the id the API shows (the one memory_forget takes), never the row's
// number; a repeat within the call names the fact it repeats.
func TestMemoryNamesPublicIDs(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, d *db.DB) {
		p := &scripted{answers: []model.Response{
			{ToolCalls: []model.ToolCall{call("w", "memory_write",
				`{"facts":[{"text":"ada PREFERS  metric units."},{"text":"Ada leads the Oslo office."},{"text":"Ada leads the Oslo office."}]}`)}},
			{Text: "Saved."},
		}}
		h := newHarness(t, d, p)
		conv := h.memoryAgent(t)
		public := h.remember(t, conv, "Ada prefers metric units.")
		row, err := gid.Decode(public)
		require.NoError(t, err)

		require.Equal(t, turn.StatusCOMPLETED, h.wait(t, h.send(t, conv, "Remember these", "")).Status)
		heard := lastTool(p.request(1)).Text
		require.Contains(t, heard, "already remembered (id "+public+"): nothing was saved", heard)
		require.Contains(t, heard, "repeats facts[1] of this call: nothing more was saved", heard)
		require.NotRegexp(t, regexp.MustCompile(`\b`+strconv.Itoa(row)+`\b`), heard, "the row's number never reaches the model")
		require.Equal(t, 2, h.client.Memory.Query().CountX(tenancy.System(context.Background())))
	})
}
