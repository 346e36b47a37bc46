package store

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/db"
	"github.com/toolgate/toolgate/db/dbtest"
	"github.com/toolgate/toolgate/ent"
	"github.com/toolgate/toolgate/ent/agent"
	"github.com/toolgate/toolgate/ent/attachment"
	"github.com/toolgate/toolgate/ent/conversation"
	"github.com/toolgate/toolgate/ent/organization"
	"github.com/toolgate/toolgate/ent/schematype"
	"github.com/toolgate/toolgate/ent/tenancy"
	"github.com/toolgate/toolgate/ent/turn"
	"github.com/toolgate/toolgate/ent/user"
	"github.com/toolgate/toolgate/graph/auth"
)

// Load reads every column ent has for the tables it joins: a field
// added to the schema is loaded too, or this fails.
func TestLoadTurnReadsEveryColumn(t *testing.T) {
	t.Parallel()
	tables := loadedTables(&ent.Turn{}, &ent.Conversation{}, &ent.Agent{}, &ent.User{}, &ent.Organization{})
	want := map[string][]string{turn.Table: turn.Columns, conversation.Table: conversation.Columns,
		agent.Table: agent.Columns, user.Table: user.Columns, organization.Table: organization.Columns}
	require.Len(t, tables, len(want))
	for _, tb := range tables {
		var got []string
		for _, c := range tb.cols {
			got = append(got, c.name)
		}
		require.ElementsMatch(t, want[tb.table], got, tb.table)
	}
}

// Load's one statement gives what ent's five give, and the attachment
// checks what their query gives, with fields set and unset, and strings
// PostgreSQL keeps escaped read back as written.
func TestLoadTurnAsEntLoadsIt(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, d *db.DB) {
		ctx := tenancy.System(context.Background())
		c := d.Client()
		g, err := auth.Bootstrap(ctx, c, "Acme", "Ada Lovelace", "Research")
		require.NoError(t, err)
		a := c.Agent.Create().SetOrganizationID(g.OrganizationID).SetName("Analyst").SetInstructions("Be\x00 exact.\uE000").
			SetTools([]string{"calculator"}).SetMemory(true).SetSkills([]string{"s"}).SaveX(ctx)
		now := time.Date(2026, 11, 29, 19, 30, 42, 123456000, time.UTC)
		bare := c.Conversation.Create().SetOrganizationID(g.OrganizationID).SetUserID(g.UserID).SetAgentID(a.ID).SaveX(ctx)
		full := c.Conversation.Create().SetOrganizationID(g.OrganizationID).SetUserID(g.UserID).SetAgentID(a.ID).
			SetTitle("t").SetArchivedAt(now).SaveX(ctx)
		c.Attachment.Create().SetConversationID(full.ID).SetOrganizationID(g.OrganizationID).SetFilename("a.txt").
			SetStatus(attachment.StatusFAILED).SaveX(ctx)
		turns := []*ent.Turn{
			c.Turn.Create().SetConversationID(bare.ID).SetNumber(1).SetUserText("go").SetStartedAt(now).SaveX(ctx),
			c.Turn.Create().SetConversationID(full.ID).SetNumber(1).SetUserText("go").SetStartedAt(now).
				SetFinishedAt(now).SetAnswer("a").SetThinking("th").SetStatus(turn.StatusCOMPLETED).SetSuggestions([]string{"x"}).
				SetClarification(&schematype.Clarification{Question: "q", Options: []string{"o"}}).SetHeartbeatAt(now).
				SetAgentConfig(&schematype.AgentConfig{Instructions: "i", Tools: []string{"t"}}).SetClaimedBy("r").
				SetTraceParent("p").SetReplayed(true).SaveX(ctx),
		}
		for i, tu := range turns {
			s := New(c, d.Queue().Dialect(), "r", nil)
			l, err := s.Load(ctx, tu.ID)
			require.NoError(t, err)
			want := c.Turn.GetX(ctx, tu.ID)
			conv := c.Conversation.Query().Where(conversation.ID(want.ConversationID)).
				WithAgent().WithUser(func(q *ent.UserQuery) { q.WithOrganization() }).OnlyX(ctx)
			require.JSONEq(t, asJSON(t, want), asJSON(t, l.Turn))
			require.JSONEq(t, asJSON(t, conv), asJSON(t, l.Conv))
			require.Equal(t, i == 1, l.Attached)
			require.False(t, l.Readable)
		}
		_, err = New(c, d.Queue().Dialect(), "r", nil).Load(ctx, slices.Max([]int{turns[0].ID, turns[1].ID})+1000)
		require.True(t, ent.IsNotFound(err), err)
	})
}

func asJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}
