package interact

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/db"
	"github.com/toolgate/toolgate/db/dbtest"
	"github.com/toolgate/toolgate/ent/tenancy"
	"github.com/toolgate/toolgate/ent/turn"
	"github.com/toolgate/toolgate/tools"
	"github.com/toolgate/toolgate/tools/tooltest"
)

func TestDefinitions(t *testing.T) {
	t.Parallel()
	require.Equal(t, []string{"clarify", "suggest_next_actions"}, []string{Definitions[0].Name, Definitions[1].Name})
	for _, d := range Definitions {
		require.Equal(t, "interact", d.Family)
		require.True(t, d.AlwaysOn(), d.Name)
		require.Equal(t, tools.PreviewExempt, d.Preview, d.Name)
		require.LessOrEqual(t, len(d.Description), 600, "every turn pays for %s", d.Name)
		tooltest.Schema(t, d.Schema)
	}
	require.Empty(t, Clarify.Operation, "the runtime carries clarify out")
	require.Contains(t, Suggest.Operation, Suggest.Field+"(")

	tests := []struct {
		give string
		want bool
	}{
		{give: `{"suggestions": ["a"]}`, want: true},
		{give: `{"suggestions": []}`, want: false},
		{give: `{"suggestions": ["a", "b", "c", "d", "e", "f"]}`, want: false},
		{give: `{"suggestions": ["a"], "extra": 1}`, want: false},
	}
	s := tooltest.Schema(t, Suggest.Schema)
	for _, tt := range tests {
		var v any
		require.NoError(t, json.Unmarshal([]byte(tt.give), &v))
		require.Equal(t, tt.want, s.Validate(v) == nil, tt.give)
	}
}

func TestCheckSuggestions(t *testing.T) {
	t.Parallel()
	got, err := CheckSuggestions([]string{" Chart it ", "Explain", "Chart it", strings.Repeat("é", 200)})
	require.NoError(t, err)
	require.Equal(t, []string{"Chart it", "Explain", strings.Repeat("é", 200)}, got)

	tests := []struct {
		give []string
		want string
	}{
		{give: nil, want: "suggestions: give 1 to 5"},
		{give: []string{"a", "b", "c", "d", "e", "f"}, want: "suggestions: at most 5, got 6"},
		{give: []string{"\t"}, want: "suggestions[0]: empty"},
		{give: []string{"a", strings.Repeat("x", 201)}, want: "suggestions[1]: at most 200 characters"},
	}
	for _, tt := range tests {
		_, err := CheckSuggestions(tt.give)
		require.EqualError(t, err, tt.want)
	}
}

func TestSaveSuggestions(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, d *db.DB) {
		ctx := tenancy.System(context.Background())
		c := d.Client()
		s := dbtest.Seed(t, c)
		conv, other := s.Conversation, s.NewConversation(t, c)

		_, err := SaveSuggestions(ctx, c, conv, 0, []string{"a"})
		require.ErrorIs(t, err, ErrNoTurn)
		first := c.Turn.Create().SetConversationID(conv).SetNumber(1).SetUserText("one").SaveX(ctx)
		second := c.Turn.Create().SetConversationID(conv).SetNumber(2).SetUserText("two").SaveX(ctx)
		elsewhere := c.Turn.Create().SetConversationID(other).SetNumber(1).SetUserText("x").SaveX(ctx)

		id, err := SaveSuggestions(ctx, c, conv, 0, []string{"latest"})
		require.NoError(t, err)
		require.Equal(t, second.ID, id, "no turn named: the latest")
		id, err = SaveSuggestions(ctx, c, conv, first.ID, []string{"named"})
		require.NoError(t, err)
		require.Equal(t, first.ID, id)
		_, err = SaveSuggestions(ctx, c, conv, elsewhere.ID, []string{"no"})
		require.ErrorIs(t, err, ErrNoTurn, "a turn of another conversation")

		got := map[int][]string{}
		for _, tu := range c.Turn.Query().Where(turn.IDIn(first.ID, second.ID, elsewhere.ID)).AllX(ctx) {
			got[tu.ID] = tu.Suggestions
		}
		require.Equal(t, map[int][]string{first.ID: {"named"}, second.ID: {"latest"}, elsewhere.ID: {}}, got)
	})
}
