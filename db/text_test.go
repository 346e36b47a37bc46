package db_test

import (
	"context"
	"strings"
	"testing"

	"entgo.io/ent/dialect"
	"entgo.io/ent/schema/field"
	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/db"
	"github.com/toolgate/toolgate/db/dbtest"
	"github.com/toolgate/toolgate/ent/migrate"
	"github.com/toolgate/toolgate/ent/organization"
	"github.com/toolgate/toolgate/ent/schematype"
	"github.com/toolgate/toolgate/ent/tenancy"
)

// Any string is stored and read back as it was, on both databases: NUL,
// bytes that are not UTF-8, and the escape PostgreSQL's text uses, alone
// or in the forms it escapes to; an equality predicate finds it.
func TestTextKeepsAnyBytes(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, d *db.DB) {
		ctx := tenancy.System(context.Background())
		c := d.Client()
		tests := []string{
			"a\x00b",
			"\x00",
			"bad \xff\xfe bytes",
			"\xc3",
			"escape \uE000 alone",
			"\uE0000 \uE000\uE000 \uE000x41 \uE000xzz",
			"ordinary text, é and 日本",
		}
		for i, give := range tests {
			o := c.Organization.Create().SetName(give).SaveX(ctx)
			require.Equal(t, give, c.Organization.GetX(ctx, o.ID).Name, "case %d", i)
			require.Equal(t, o.ID, c.Organization.Query().Where(organization.Name(give)).OnlyIDX(ctx), "case %d", i)
		}
	})
}

// A NUL, or the text escape, in any JSON column is stored and read back as
// written, on both databases: PostgreSQL's jsonb refuses \u0000, so JSON
// columns are json there.
func TestJSONKeepsNul(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, d *db.DB) {
		ctx := tenancy.System(context.Background())
		c := d.Client()
		const s = "a\x00b \uE000 c"
		o := c.Organization.Create().SetName("Acme").SaveX(ctx)
		u := c.User.Create().SetOrganizationID(o.ID).SetName("Ann").SaveX(ctx)
		a := c.Agent.Create().SetOrganizationID(o.ID).SetName("Helper").SetTools([]string{s}).SetSkills([]string{s}).SaveX(ctx)
		app := c.Application.Create().SetOrganizationID(o.ID).SetName("crm").SetURL("https://crm.example/mcp").
			SetAllowedTools([]string{s}).SaveX(ctx)
		conv := c.Conversation.Create().SetOrganizationID(o.ID).SetUserID(u.ID).SetAgentID(a.ID).SaveX(ctx)
		rec := "2026"
		clar := &schematype.Clarification{Question: s, Options: []string{s, "b"}, Recommended: &rec}
		cfg := &schematype.AgentConfig{Instructions: s, Tools: []string{s}}
		tu := c.Turn.Create().SetConversationID(conv.ID).SetNumber(1).SetUserText(s).
			SetSuggestions([]string{s}).SetClarification(clar).SetAgentConfig(cfg).SaveX(ctx)
		failures := []schematype.ItemFailure{{Item: 0, Input: s, Kind: schematype.FailureError, Message: s}}
		repairs := []schematype.Repair{{Rule: s, Path: s}}
		evidence := []schematype.Span{{Ref: s, Start: 0, End: 1}}
		call := c.ToolCall.Create().SetTurnID(tu.ID).SetPosition(0).SetName("x").
			SetFailures(failures).SetRepairs(repairs).SetEvidence(evidence).SaveX(ctx)

		gotAgent := c.Agent.GetX(ctx, a.ID)
		require.Equal(t, []string{s}, gotAgent.Tools)
		require.Equal(t, []string{s}, gotAgent.Skills)
		require.Equal(t, []string{s}, c.Application.GetX(ctx, app.ID).AllowedTools)
		gotTurn := c.Turn.GetX(ctx, tu.ID)
		require.Equal(t, s, gotTurn.UserText)
		require.Equal(t, []string{s}, gotTurn.Suggestions)
		require.Equal(t, clar, gotTurn.Clarification)
		require.Equal(t, cfg, gotTurn.AgentConfig)
		gotCall := c.ToolCall.GetX(ctx, call.ID)
		require.Equal(t, failures, gotCall.Failures)
		// A traversal reads them too (no DISTINCT over a json row).
		require.Equal(t, []int{call.ID}, tu.QueryToolCalls().IDsX(ctx))
		require.Equal(t, failures, tu.QueryToolCalls().OnlyX(ctx).Failures)
		require.Equal(t, tu.ID, conv.QueryTurns().OnlyX(ctx).ID)
		require.Equal(t, a.ID, o.QueryAgents().OnlyX(ctx).ID)
		require.Equal(t, repairs, gotCall.Repairs)
		require.Equal(t, evidence, gotCall.Evidence)

		// An update writes them as well as an insert does.
		answer := "x\x00y"
		clar.Answer = &answer
		c.Turn.UpdateOneID(tu.ID).SetClarification(clar).ExecX(ctx)
		require.Equal(t, &answer, c.Turn.GetX(ctx, tu.ID).Clarification.Answer)
	})
}

// Every JSON column is json on PostgreSQL, and migrate turns a jsonb column
// that an earlier version made into json, keeping its rows.
func TestJSONColumnsAreJSONOnPostgres(t *testing.T) {
	t.Parallel()
	for _, tb := range migrate.Tables {
		for _, col := range tb.Columns {
			if col.Type == field.TypeJSON {
				require.Equal(t, "json", col.SchemaType[dialect.Postgres], "%s.%s: a JSON column is json on PostgreSQL (ent/schema/json.go)", tb.Name, col.Name)
			}
		}
	}
	d := dbtest.Open(t, dbtest.Postgres)
	ctx := tenancy.System(context.Background())
	c := d.Client()
	o := c.Organization.Create().SetName("Acme").SaveX(ctx)
	a := c.Agent.Create().SetOrganizationID(o.ID).SetName("Helper").SetTools([]string{"calculator"}).SaveX(ctx)
	_, err := d.SQL.ExecContext(ctx, `ALTER TABLE agents ALTER COLUMN tools TYPE jsonb`)
	require.NoError(t, err)
	columnType := func() string {
		var typ string
		require.NoError(t, d.SQL.QueryRowContext(ctx, `SELECT data_type FROM information_schema.columns
			WHERE table_schema = current_schema() AND table_name = 'agents' AND column_name = 'tools'`).Scan(&typ))
		return typ
	}
	require.Equal(t, "jsonb", columnType())
	require.NoError(t, d.Migrate(ctx))
	require.Equal(t, "json", columnType())
	require.Equal(t, []string{"calculator"}, c.Agent.GetX(ctx, a.ID).Tools)
}

// LIKE reads past a NUL on SQLite as it does on PostgreSQL.
func TestLikeReadsPastNul(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, d *db.DB) {
		ctx := tenancy.System(context.Background())
		c := d.Client()
		c.Organization.Create().SetName("Ada\x00Lovelace notes").ExecX(ctx)
		c.Organization.Create().SetName("Ada Lovelace").ExecX(ctx)
		tests := []struct {
			give string
			want int
		}{
			{give: "Lovelace", want: 2},
			{give: "a\x00L", want: 1},
			{give: "a\x00X", want: 0},
			{give: "notes", want: 1},
		}
		for _, tt := range tests {
			require.Equal(t, tt.want, c.Organization.Query().Where(organization.NameContains(tt.give)).CountX(ctx), "contains %q", tt.give)
			require.Equal(t, tt.want, c.Organization.Query().Where(organization.NameContainsFold(strings.ToUpper(tt.give))).CountX(ctx), "contains fold %q", tt.give)
		}
	})
}
