package db_test

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"entgo.io/ent/dialect"
	entsql "entgo.io/ent/dialect/sql"
	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/db"
	"github.com/toolgate/toolgate/db/dbtest"
	"github.com/toolgate/toolgate/ent"
	"github.com/toolgate/toolgate/ent/organization"
	"github.com/toolgate/toolgate/ent/schematype"
	"github.com/toolgate/toolgate/ent/setting"
	"github.com/toolgate/toolgate/ent/tenancy"
)

func TestMigrateIsIdempotent(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, d *db.DB) {
		ctx := tenancy.System(context.Background())
		pending, err := d.Pending(ctx)
		require.NoError(t, err)
		require.False(t, pending, "a migrated database has nothing pending")
		require.NoError(t, d.Migrate(ctx))
		require.NoError(t, d.Migrate(ctx))
		c := d.Client()
		o := c.Organization.Create().SetName("Acme").SaveX(ctx)
		// Ids are unique across types: each table owns a range.
		u := c.User.Create().SetOrganizationID(o.ID).SetName("Ann").SaveX(ctx)
		require.NotEqual(t, o.ID>>32, u.ID>>32)
	})
}

func TestPendingOnNewDatabase(t *testing.T) {
	t.Parallel()
	ctx := tenancy.System(context.Background())
	d, err := db.Open(ctx, "sqlite://"+filepath.Join(t.TempDir(), "new.db"))
	require.NoError(t, err)
	defer d.Close()
	pending, err := d.Pending(ctx)
	require.NoError(t, err)
	require.True(t, pending)
	require.NoError(t, d.Migrate(ctx))
	pending, err = d.Pending(ctx)
	require.NoError(t, err)
	require.False(t, pending)
}

func TestOpenRejectsUnknownURL(t *testing.T) {
	t.Parallel()
	tests := []struct{ give, want string }{
		{give: "mysql://root:secret@localhost/x", want: `database url "mysql://root:xxxxx@localhost/x": want postgres://, sqlite:// or file:PATH`},
		{give: "sqlite://", want: "sqlite database path is empty"},
	}
	for _, tt := range tests {
		_, err := db.Open(tenancy.System(context.Background()), tt.give)
		require.EqualError(t, err, tt.want)
	}
}

func TestSQLiteForeignKeysOn(t *testing.T) {
	t.Parallel()
	d := dbtest.Open(t, dbtest.SQLite)
	ctx := tenancy.System(context.Background())
	// A user in an organisation that does not exist is refused.
	_, err := d.Client().User.Create().SetOrganizationID(424242).SetName("x").Save(ctx)
	require.Error(t, err)
	var mode string
	require.NoError(t, d.SQL.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode))
	require.Equal(t, "wal", mode)
}

// A database file written before times had a format of their own holds Go's
// debug strings; migrate rewrites them once, and they then order as times.
//
// Not parallel: it migrates the old file with ent directly, outside the lock
// that keeps ent's process-wide migration state to one migration at a time.
func TestMigrateRewritesDebugTimes(t *testing.T) {
	ctx := tenancy.System(context.Background())
	path := filepath.Join(t.TempDir(), "old.db")
	// The DSN earlier versions opened SQLite with: no _time_format.
	old, err := sql.Open("sqlite", "file:"+path+"?_pragma=foreign_keys(1)&_pragma=journal_mode(WAL)"+
		"&_pragma=busy_timeout(10000)&_pragma=synchronous(NORMAL)&_txlock=immediate")
	require.NoError(t, err)
	oc := ent.NewClient(ent.Driver(entsql.OpenDB(dialect.SQLite, old)))
	require.NoError(t, oc.Schema.Create(ctx))
	now := time.Now() // with a monotonic reading, as time.Now defaults write it
	offsets := []time.Duration{0, 5 * time.Millisecond, 50 * time.Millisecond, 500*time.Millisecond + 1}
	for i, off := range offsets {
		oc.Organization.Create().SetName(fmt.Sprint(i)).SetCreatedAt(now.Add(off)).SaveX(ctx)
	}
	// Turns written before conversations counted them.
	org := oc.Organization.Query().FirstX(ctx)
	u := oc.User.Create().SetOrganizationID(org.ID).SetName("Ann").SaveX(ctx)
	a := oc.Agent.Create().SetOrganizationID(org.ID).SetName("Helper").SaveX(ctx)
	conv := oc.Conversation.Create().SetOrganizationID(org.ID).SetUserID(u.ID).SetAgentID(a.ID).SaveX(ctx)
	for n := range 2 {
		oc.Turn.Create().SetConversationID(conv.ID).SetNumber(n + 1).SetUserText("hi").SaveX(ctx)
	}
	var raw string
	require.NoError(t, old.QueryRow("SELECT CAST(created_at AS TEXT) FROM organizations LIMIT 1").Scan(&raw))
	require.Contains(t, raw, " m=+", "the old format, as earlier versions wrote it")
	require.NoError(t, old.Close())

	d, err := db.Open(ctx, "sqlite://"+path)
	require.NoError(t, err)
	defer d.Close()
	require.NoError(t, d.Migrate(ctx))
	require.NoError(t, d.Migrate(ctx), "running it again changes nothing")
	var version int
	require.NoError(t, d.SQL.QueryRowContext(ctx, "PRAGMA user_version").Scan(&version))
	require.Equal(t, 1, version, "the rewrite is recorded, so later starts skip the scan")

	rows, err := d.SQL.QueryContext(ctx, "SELECT name, CAST(created_at AS TEXT) FROM organizations ORDER BY created_at")
	require.NoError(t, err)
	var names []string
	for rows.Next() {
		var name, at string
		require.NoError(t, rows.Scan(&name, &at))
		require.Regexp(t, `^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(\.\d+)?\+00:00$`, at)
		names = append(names, name)
	}
	require.NoError(t, rows.Err())
	require.Equal(t, []string{"0", "1", "2", "3"}, names)

	c := d.Client()
	require.Equal(t, 2, c.Conversation.GetX(ctx, conv.ID).TurnsCount, "turns counted by migrate")
	c.Turn.Create().SetConversationID(conv.ID).SetNumber(3).SetUserText("hi").SaveX(ctx)
	require.Equal(t, 3, c.Conversation.GetX(ctx, conv.ID).TurnsCount, "and by the hook from then on")
	got, err := c.Organization.Query().Where(organization.CreatedAtLT(now.Add(50 * time.Millisecond))).Count(ctx)
	require.NoError(t, err)
	require.Equal(t, 2, got, "a bound time compares with stored ones")
	o := c.Organization.Query().Where(organization.Name("3")).OnlyX(ctx)
	require.True(t, o.CreatedAt.Equal(now.Add(offsets[3])), "%v != %v", o.CreatedAt, now.Add(offsets[3]))
}

// Times written through the DSN are in SQLite's own format, in UTC, whatever
// the zone of the time written.
func TestSQLiteWritesTimesInUTC(t *testing.T) {
	t.Parallel()
	ctx := tenancy.System(context.Background())
	d := dbtest.Open(t, dbtest.SQLite)
	paris, err := time.LoadLocation("Europe/Paris")
	require.NoError(t, err)
	at := time.Date(2026, 11, 30, 18, 58, 13, 518478830, paris)
	d.Client().Organization.Create().SetName("Acme").SetCreatedAt(at).SaveX(ctx)
	var raw string
	require.NoError(t, d.SQL.QueryRowContext(ctx, "SELECT CAST(created_at AS TEXT) FROM organizations").Scan(&raw))
	require.Equal(t, "2026-11-30 17:58:13.51847883+00:00", raw)
}

// Costs recorded in dollars before money was kept exact get their
// micro-dollars from migrate, once, on both databases.
func TestMigrateBackfillsExactCosts(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, d *db.DB) {
		ctx := tenancy.System(context.Background())
		c := d.Client()
		s := dbtest.Seed(t, c)
		turn := dbtest.NewTurn(t, c, s.Conversation, 1)
		call := func(usd float64, micros schematype.Micros) int {
			return c.ModelCall.Create().SetTurnID(turn).SetOrganizationID(s.Org).SetAgentID(s.Agent).SetUserID(s.User).
				SetProvider("p").SetModel("m").SetCost(usd).SetCostMicros(micros).SaveX(ctx).ID
		}
		// As an earlier version wrote them: dollars only.
		old1, old2 := call(0.0165, 0), call(12.345678, 0)
		free := call(0, 0)
		// Already exact: its micro-dollars are kept even where the dollars disagree.
		exact := call(1.0, 999_999)
		sum := c.Summary.Create().SetConversationID(s.Conversation).SetFromTurn(1).SetToTurn(1).SetText("s").
			SetTurnID(turn).SetModel("m").SetCost(0.25).SaveX(ctx)

		require.NoError(t, d.Migrate(ctx))
		require.NoError(t, d.Migrate(ctx), "running it again changes nothing")
		for id, want := range map[int]schematype.Micros{old1: 16_500, old2: 12_345_678, free: 0, exact: 999_999} {
			require.Equal(t, want, c.ModelCall.GetX(ctx, id).CostMicros, "model call %d", id)
		}
		require.Equal(t, schematype.Micros(250_000), c.Summary.GetX(ctx, sum.ID).CostMicros)
	})
}

// TestMigrateBuildsMonthlySpend: the running totals of the model calls an
// earlier version recorded (it kept none) are built once, by month in UTC,
// for each user and the organisation; a later migration keeps the totals
// as the calls since have made them.
func TestMigrateBuildsMonthlySpend(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, d *db.DB) {
		ctx := tenancy.System(context.Background())
		c := d.Client()
		s := dbtest.Seed(t, c)
		ann := c.User.GetX(ctx, s.User) // Alice
		bo := c.User.Create().SetOrganizationID(s.Org).SetName("Bo").SaveX(ctx)
		turn := dbtest.NewTurn(t, c, s.Conversation, 1)
		midnight := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)
		call := func(user int, micros schematype.Micros, at time.Time) {
			c.ModelCall.Create().SetTurnID(turn).SetOrganizationID(s.Org).SetAgentID(s.Agent).SetUserID(user).
				SetProvider("p").SetModel("m").SetCostMicros(micros).SetStartedAt(at).ExecX(ctx)
		}
		call(ann.ID, 100, midnight.Add(-time.Microsecond))
		call(bo.ID, 20, midnight.Add(-time.Hour))
		call(ann.ID, 3, midnight)
		// As an earlier version left the database: no totals.
		c.MonthlySpend.Delete().ExecX(ctx)
		c.Setting.Delete().Where(setting.Key("monthly_spend.built")).ExecX(ctx)

		require.NoError(t, d.Migrate(ctx))
		call(bo.ID, 4000, midnight.Add(time.Hour))
		require.NoError(t, d.Migrate(ctx), "built once: the call since is not counted twice")
		got := map[string]schematype.Micros{}
		for _, m := range c.MonthlySpend.Query().AllX(ctx) {
			require.Equal(t, s.Org, m.OrganizationID)
			got[fmt.Sprintf("%s/%d", m.Month, m.UserID)] = m.CostMicros
		}
		require.Equal(t, map[string]schematype.Micros{
			"2026-04/0": 120, fmt.Sprintf("2026-04/%d", ann.ID): 100, fmt.Sprintf("2026-04/%d", bo.ID): 20,
			"2026-05/0": 4003, fmt.Sprintf("2026-05/%d", ann.ID): 3, fmt.Sprintf("2026-05/%d", bo.ID): 4000,
		}, got)
	})
}
