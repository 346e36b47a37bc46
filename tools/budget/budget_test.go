package budget_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/ent"
	"github.com/toolgate/toolgate/ent/db"
	"github.com/toolgate/toolgate/ent/db/dbtest"
	"github.com/toolgate/toolgate/ent/schematype"
	"github.com/toolgate/toolgate/ent/tenancy"
	"github.com/toolgate/toolgate/tools/budget"
)

type testBundle struct {
	client          *ent.Client
	org, ada, bob   int
	turnAda, turnBo int
	agent           int
}

func setup(t *testing.T, d *db.DB) *testBundle {
	t.Helper()
	ctx := tenancy.System(context.Background())
	c := d.Client()
	b := &testBundle{client: c}
	org := c.Organization.Create().SetName("Acme").SaveX(ctx)
	other := c.Organization.Create().SetName("Other").SaveX(ctx)
	b.org = org.ID
	ag := c.Agent.Create().SetOrganizationID(org.ID).SetName("a").SaveX(ctx)
	b.agent = ag.ID
	turnOf := func(org, user, agent int) int {
		conv := c.Conversation.Create().SetOrganizationID(org).SetUserID(user).SetAgentID(agent).SaveX(ctx)
		return c.Turn.Create().SetConversationID(conv.ID).SetNumber(1).SetUserText("hi").SaveX(ctx).ID
	}
	b.ada = c.User.Create().SetOrganizationID(org.ID).SetName("Ada").SetAdmin(true).SaveX(ctx).ID
	b.bob = c.User.Create().SetOrganizationID(org.ID).SetName("Bob").SaveX(ctx).ID
	b.turnAda, b.turnBo = turnOf(org.ID, b.ada, ag.ID), turnOf(org.ID, b.bob, ag.ID)
	// Another organisation's spend never counts.
	eve := c.User.Create().SetOrganizationID(other.ID).SetName("Eve").SaveX(ctx).ID
	oag := c.Agent.Create().SetOrganizationID(other.ID).SetName("o").SaveX(ctx).ID
	c.ModelCall.Create().SetTurnID(turnOf(other.ID, eve, oag)).SetOrganizationID(other.ID).SetAgentID(oag).SetUserID(eve).
		SetProvider("p").SetModel("m").SetCost(100).SetCostMicros(100_000_000).SetStartedAt(time.Date(2026, 2, 1, 12, 0, 0, 0, time.UTC)).ExecX(ctx)
	return b
}

func (b *testBundle) spend(t *testing.T, turn, user int, usd float64, at time.Time) {
	t.Helper()
	b.client.ModelCall.Create().SetTurnID(turn).SetOrganizationID(b.org).SetAgentID(b.agent).SetUserID(user).
		SetProvider("p").SetModel("m").SetCost(usd).SetCostMicros(schematype.MicrosFromUSD(usd)).SetStartedAt(at).ExecX(tenancy.System(context.Background()))
}

// TestMonthIsUTC: a call at 23:30 on 31 January in UTC−5 is 04:30 on
// 1 February in UTC, so it counts in February and not in January; a call
// at 18:59 the same evening (23:59 UTC) counts in January.
func TestMonthIsUTC(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, d *db.DB) {
		b := setup(t, d)
		ctx := context.Background()
		est := time.FixedZone("UTC-5", -5*3600)
		b.spend(t, b.turnAda, b.ada, 1.25, time.Date(2026, 1, 31, 18, 59, 0, 0, est))
		b.spend(t, b.turnAda, b.ada, 2.5, time.Date(2026, 1, 31, 23, 30, 0, 0, est))
		b.spend(t, b.turnBo, b.bob, 0.000123, time.Date(2026, 2, 28, 23, 59, 59, 0, time.UTC))

		jan, err := budget.Spent(ctx, b.client, b.org, b.ada, time.Date(2026, 1, 31, 18, 59, 0, 0, est))
		require.NoError(t, err)
		require.Equal(t, schematype.MicrosFromUSD(1.25), jan)
		// Asked at 23:30 on the 31st in UTC−5: already February in UTC.
		feb, err := budget.Spent(ctx, b.client, b.org, b.ada, time.Date(2026, 1, 31, 23, 30, 0, 0, est))
		require.NoError(t, err)
		require.Equal(t, schematype.MicrosFromUSD(2.5), feb)
		org, err := budget.Spent(ctx, b.client, b.org, 0, time.Date(2026, 2, 10, 0, 0, 0, 0, time.UTC))
		require.NoError(t, err)
		require.Equal(t, budget.Micros(2_500_123), org, "exact to the micro-dollar, this organisation only")

		start, end := budget.Month(time.Date(2026, 1, 31, 23, 30, 0, 0, est))
		require.Equal(t, time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC), start)
		require.Equal(t, time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC), end)
	})
}

// TestEnforceNamesTheLimit: the user's limit is named first, then the
// organisation's; nothing is refused without limits or under them.
func TestEnforceNamesTheLimit(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, d *db.DB) {
		b := setup(t, d)
		ctx := context.Background()
		sys := tenancy.System(ctx)
		now := time.Date(2026, 3, 15, 9, 0, 0, 0, time.UTC)
		b.spend(t, b.turnAda, b.ada, 3, now.Add(-time.Hour))
		b.spend(t, b.turnBo, b.bob, 1, now.Add(-time.Hour))
		require.NoError(t, budget.Enforce(ctx, b.client, b.org, b.bob, now), "no limit set")

		_, err := budget.Set(sys, b.client, b.org, 0, schematype.MicrosFromUSD(4))
		require.NoError(t, err)
		err = budget.Enforce(ctx, b.client, b.org, b.bob, now)
		var ex *budget.ExceededError
		require.ErrorAs(t, err, &ex)
		require.True(t, ex.Organization)
		require.EqualError(t, err, "budget exceeded: the organisation's monthly limit of $4.00 is spent ($4.00 in 2026-03, UTC)")

		_, err = budget.Set(sys, b.client, b.org, 0, schematype.MicrosFromUSD(10))
		require.NoError(t, err)
		require.NoError(t, budget.Enforce(ctx, b.client, b.org, b.bob, now), "raised: replaced, not added")
		require.Equal(t, 1, b.client.Budget.Query().CountX(sys))

		_, err = budget.Set(sys, b.client, b.org, b.bob, schematype.MicrosFromUSD(0.5))
		require.NoError(t, err)
		err = budget.Enforce(ctx, b.client, b.org, b.bob, now)
		require.EqualError(t, err, "budget exceeded: your monthly limit of $0.50 is spent ($1.00 in 2026-03, UTC)")
		require.NoError(t, budget.Enforce(ctx, b.client, b.org, b.ada, now), "Bob's limit is not Ada's")

		s, err := budget.StatusOf(ctx, b.client, b.org, b.ada, now)
		require.NoError(t, err)
		require.Nil(t, s.User.Limit)
		require.Nil(t, s.User.Left())
		require.Equal(t, schematype.MicrosFromUSD(3), s.User.Spent)
		require.Equal(t, schematype.MicrosFromUSD(6), *s.Organization.Left())
		// Next month starts from nothing.
		require.NoError(t, budget.Enforce(ctx, b.client, b.org, b.bob, now.AddDate(0, 1, 0)))
	})
}
