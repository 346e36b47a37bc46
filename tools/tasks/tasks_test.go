package tasks

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/db"
	"github.com/toolgate/toolgate/db/dbtest"
	"github.com/toolgate/toolgate/ent/tenancy"
	"github.com/toolgate/toolgate/tools"
	"github.com/toolgate/toolgate/tools/tooltest"
)

func TestDefinition(t *testing.T) {
	t.Parallel()
	d := Definition
	require.Equal(t, "update_tasks", d.Name)
	require.Equal(t, "tasks", d.Family)
	require.Equal(t, tools.OfferAllowlisted, d.Offered)
	require.False(t, d.AlwaysOn())
	require.Empty(t, d.Operation, "the runtime carries it out with Apply")
	require.LessOrEqual(t, len(d.Description), 600)

	schema := tooltest.Schema(t, d.Schema)
	tests := []struct {
		give string
		want bool
	}{
		{give: `{"tasks": []}`, want: true},
		{give: `{"tasks": [{"title": "a", "status": "in_progress"}]}`, want: true},
		{give: `{"tasks": [{"title": "a", "status": "started"}]}`, want: false},
		{give: `{"tasks": [{"title": "a"}]}`, want: false},
		{give: `{}`, want: false},
	}
	for _, tt := range tests {
		var v any
		require.NoError(t, json.Unmarshal([]byte(tt.give), &v))
		require.Equal(t, tt.want, schema.Validate(v) == nil, tt.give)
	}
}

func list(n int, status string) string {
	items := make([]string, n)
	for i := range items {
		items[i] = fmt.Sprintf(`{"title": "task %d", "status": %q}`, i, status)
	}
	return `{"tasks": [` + strings.Join(items, ",") + `]}`
}

func TestParse(t *testing.T) {
	t.Parallel()
	got, err := Parse(json.RawMessage(`{"tasks": [{"title": " a ", "status": "done"}, {"title": "b", "status": "in_progress"}]}`))
	require.NoError(t, err)
	require.Equal(t, []Item{{Title: "a", Status: "done"}, {Title: "b", Status: "in_progress"}}, got)
	got, err = Parse(json.RawMessage(list(MaxTasks, "pending")))
	require.NoError(t, err)
	require.Len(t, got, MaxTasks)

	tests := []struct {
		give string
		want string
	}{
		{give: list(MaxTasks+1, "pending"), want: "invalid task list: at most 20 tasks, got 21"},
		{give: list(2, "in_progress"), want: "invalid task list: at most 1 task in_progress, got 2"},
		{give: `{"tasks": [{"title": "a", "status": "started"}]}`, want: `invalid task list: tasks[0]: status "started": want pending, in_progress or done`},
		{give: `{"tasks": [{"title": " ", "status": "done"}]}`, want: "invalid task list: tasks[0]: empty title"},
		{give: `{"tasks": [{"title": "` + strings.Repeat("é", 201) + `", "status": "done"}]}`, want: "invalid task list: tasks[0]: title over 200 characters"},
		{give: `{}`, want: "invalid task list: tasks is required (an empty list clears it)"},
		{give: `{"tasks": [], "note": "x"}`, want: `invalid task list: json: unknown field "note"`},
	}
	for _, tt := range tests {
		_, err := Parse(json.RawMessage(tt.give))
		require.ErrorIs(t, err, ErrInvalid)
		require.EqualError(t, err, tt.want)
	}
}

func TestApply(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, d *db.DB) {
		ctx := tenancy.System(context.Background())
		c := d.Client()
		conv := dbtest.Seed(t, c).Conversation
		titles := func() []string {
			ts, err := List(ctx, c, conv)
			require.NoError(t, err)
			out := []string{}
			for _, t := range ts {
				out = append(out, t.Title+":"+string(t.Status))
			}
			return out
		}

		ack, err := Apply(ctx, c, conv, json.RawMessage(list(MaxTasks, "done")))
		require.NoError(t, err)
		require.JSONEq(t, `{"ok": true, "saved": 20}`, string(ack))
		require.Len(t, titles(), MaxTasks)
		require.Equal(t, "task 19:done", titles()[19], "in list order")

		// Inside a transaction of the caller's, Apply joins it.
		tx, err := c.Tx(ctx)
		require.NoError(t, err)
		_, err = Apply(ctx, tx.Client(), conv, json.RawMessage(`{"tasks": [{"title": "only", "status": "in_progress"}]}`))
		require.NoError(t, err)
		require.NoError(t, tx.Rollback())
		require.Len(t, titles(), MaxTasks, "rolled back with the caller's transaction")

		tx, err = c.Tx(ctx)
		require.NoError(t, err)
		_, err = Apply(ctx, tx.Client(), conv, json.RawMessage(`{"tasks": [{"title": "only", "status": "in_progress"}]}`))
		require.NoError(t, err)
		require.NoError(t, tx.Commit())
		require.Equal(t, []string{"only:in_progress"}, titles())

		long := strings.Repeat("é", MaxTitleChars)
		_, err = Apply(ctx, c, conv, json.RawMessage(`{"tasks": [{"title": "`+long+`", "status": "pending"}, {"title": "only", "status": "in_progress"}]}`))
		require.NoError(t, err)
		require.Equal(t, []string{long + ":pending", "only:in_progress"}, titles())

		_, err = Apply(ctx, c, conv, json.RawMessage(list(2, "in_progress")))
		require.ErrorIs(t, err, ErrInvalid)
		require.Equal(t, []string{long + ":pending", "only:in_progress"}, titles(), "a refused list changes nothing")
	})
}
