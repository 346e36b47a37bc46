package graph_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/db/dbtest"
	"github.com/toolgate/toolgate/ent/tenancy"
	"github.com/toolgate/toolgate/graph/gid"
	"github.com/toolgate/toolgate/tools/tasks"
)

// TestConversationTasksListedInOneStatement lists conversations with their
// task lists: one statement for all the lists, whatever their number.
func TestConversationTasksListedInOneStatement(t *testing.T) {
	t.Parallel()
	d := dbtest.Open(t, dbtest.SQLite)
	counter := dbtest.Count(d)
	b := setup(t, d)
	agentID := b.createAgent(t, b.alice.Token, "Planner")
	count := func() int {
		counter.Reset()
		data := b.do(t, b.alice.Token, `{ conversations(first: 20) { edges { node { title tasks { title status } } } } }`, nil).ok(t)
		edges := get(data, "conversations", "edges").([]any)
		for _, e := range edges {
			require.Len(t, get(e, "node", "tasks"), 2)
		}
		return len(counter.Statements())
	}
	add := func(n int) {
		for i := range n {
			conv := b.startConversation(t, b.alice.Token, agentID, fmt.Sprintf("c%d", i))
			id, err := gid.Decode(conv)
			require.NoError(t, err)
			args, _ := json.Marshal(map[string]any{"tasks": []map[string]string{{"title": "one", "status": "done"}, {"title": "two", "status": "pending"}}})
			_, err = tasks.Apply(tenancy.System(context.Background()), b.client, id, args)
			require.NoError(t, err)
		}
	}
	add(2)
	few := count()
	add(8)
	require.Equal(t, few, count(), "statements must not grow with the number of conversations")
}
