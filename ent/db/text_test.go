package db_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/ent/db"
	"github.com/toolgate/toolgate/ent/db/dbtest"
	"github.com/toolgate/toolgate/ent/organization"
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
