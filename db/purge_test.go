package db_test

import (
	"slices"
	"testing"

	"entgo.io/ent/dialect/sql/schema"
	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/db"
	"github.com/toolgate/toolgate/ent/migrate"
)

// TestConversationOwnsEveryTableThatPointsAtIt fails when a table whose
// rows belong to a conversation (a conversation_id column, or a foreign key
// to such a row, at any depth) is not in deleteConversation's purge, or is
// purged after a table it references. Attachments, artifacts, summaries and
// whatever comes next are covered by their columns, with no list to keep.
func TestConversationOwnsEveryTableThatPointsAtIt(t *testing.T) {
	t.Parallel()
	order, err := db.ConversationOwned()
	require.NoError(t, err)
	pos := map[string]int{}
	for i, o := range order {
		pos[o.Table] = i
	}
	require.Equal(t, len(order)-1, pos["conversations"], "the conversation goes last")
	for _, name := range []string{"turns", "tool_calls", "stored_results", "model_calls", "workspace_files", "tasks",
		"attachments", "artifacts", "artifact_versions", "summaries"} {
		if slices.ContainsFunc(migrate.Tables, func(t2 *schema.Table) bool { return t2.Name == name }) {
			require.Contains(t, pos, name, "%s belongs to a conversation", name)
		}
	}
	// Independently of the walk: every table pointing at an owned table by
	// a foreign key, or holding conversation_id, is owned, and comes before
	// what it points at.
	for _, tb := range migrate.Tables {
		for _, c := range tb.Columns {
			if c.Name == "conversation_id" {
				require.Contains(t, pos, tb.Name)
			}
		}
		for _, fk := range tb.ForeignKeys {
			if _, ok := pos[fk.RefTable.Name]; !ok || fk.RefTable.Name == tb.Name {
				continue
			}
			require.Contains(t, pos, tb.Name, "%s.%s points at %s", tb.Name, fk.Columns[0].Name, fk.RefTable.Name)
			require.Less(t, pos[tb.Name], pos[fk.RefTable.Name], "%s is deleted before %s", tb.Name, fk.RefTable.Name)
		}
	}
	// Server-wide and organisation rows are never a conversation's.
	for _, name := range []string{"organizations", "users", "agents", "api_tokens", "applications", "settings"} {
		require.NotContains(t, pos, name)
	}
}
