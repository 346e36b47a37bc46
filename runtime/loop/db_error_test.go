package loop_test

import (
	"testing"

	"entgo.io/ent/dialect"
	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/db"
	"github.com/toolgate/toolgate/ent/turn"
	"github.com/toolgate/toolgate/runtime/model"
)

// dbWords is what the database says when it refuses the write below: a
// constraint's name and the table's, which users must never read.
const dbWords = "refuse_calls: constraint tool_calls_secret violated"

// TestDatabaseErrorNeverShown: when the database refuses a turn's write
// (here a trigger on tool_calls, on both databases), the turn fails in the
// runtime's own words; the database's words reach neither Turn.error nor
// anything a client reads through GraphQL.
func TestDatabaseErrorNeverShown(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, d *db.DB) {
		ddl := []string{`CREATE TRIGGER refuse_calls BEFORE INSERT ON tool_calls BEGIN SELECT RAISE(ABORT, '` + dbWords + `'); END`}
		if d.Dialect == dialect.Postgres {
			ddl = []string{
				`CREATE FUNCTION refuse_calls() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION '` + dbWords + `'; END $$`,
				`CREATE TRIGGER refuse_calls BEFORE INSERT ON tool_calls FOR EACH ROW EXECUTE FUNCTION refuse_calls()`,
			}
		}
		p := &scripted{answers: []model.Response{
			{ToolCalls: []model.ToolCall{call("c", "calculator", `{"expression": "2+2"}`)}},
			{Text: "Four."},
		}}
		h := newHarness(t, d, p)
		for _, q := range ddl {
			_, err := d.SQL.ExecContext(t.Context(), q)
			require.NoError(t, err, q)
		}
		conv := h.conversation(t, "calculator")
		id := h.send(t, conv, "What is 2+2?", "")
		done := h.wait(t, id)
		require.Equal(t, turn.StatusFAILED, done.Status)
		require.NotNil(t, done.Error)
		require.NotContains(t, *done.Error, "refuse_calls")
		require.NotContains(t, *done.Error, "tool_calls")
		require.Contains(t, *done.Error, "internal error", "the runtime's own words")

		got := h.gql(t, `query($id: ID!) { node(id: $id) { ... on Turn { status error toolCalls { name } } } }`, map[string]any{"id": id})
		require.Equal(t, "FAILED", dig(got, "node", "status"))
		require.NotContains(t, dig(got, "node", "error"), "refuse_calls")
		require.Empty(t, dig(got, "node", "toolCalls"), "nothing half-written")
	})
}
