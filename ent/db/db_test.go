package db_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/ent/db"
	"github.com/toolgate/toolgate/ent/db/dbtest"
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
		{give: "mysql://root:secret@localhost/x", want: `database url "mysql://root:xxxxx@localhost/x": want postgres://, sqlite:// or file:`},
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
