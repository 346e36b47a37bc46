package budget_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/db"
	"github.com/toolgate/toolgate/db/dbtest"
	"github.com/toolgate/toolgate/ent"
	"github.com/toolgate/toolgate/ent/modelcall"
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

// TestSpendAtTheMonthBoundary: the running totals split at midnight UTC
// as the month's model calls do. Calls a microsecond either side of the
// end of January, recorded February's first, count each in its own month,
// for the user and for the organisation; an admin's limit set mid-month
// counts what was spent before it was set.
func TestSpendAtTheMonthBoundary(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, d *db.DB) {
		b := setup(t, d)
		ctx := context.Background()
		midnight := time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC)
		b.spend(t, b.turnAda, b.ada, 0.75, midnight)
		b.spend(t, b.turnAda, b.ada, 2, midnight.Add(-time.Microsecond))
		b.spend(t, b.turnBo, b.bob, 1, midnight.Add(-time.Microsecond))
		b.spend(t, b.turnBo, b.bob, 0.25, midnight.Add(time.Microsecond))

		for _, tc := range []struct {
			at              time.Time
			ada, bob, total float64
		}{
			{midnight.Add(-time.Nanosecond), 2, 1, 3},
			{midnight, 0.75, 0.25, 1},
			{midnight.AddDate(0, 1, 0), 0, 0, 0},
		} {
			s, err := budget.SpentIn(ctx, b.client, b.org, tc.at)
			require.NoError(t, err)
			require.Equal(t, schematype.MicrosFromUSD(tc.ada), s.Of(b.ada), tc.at)
			require.Equal(t, schematype.MicrosFromUSD(tc.bob), s.Of(b.bob), tc.at)
			require.Equal(t, schematype.MicrosFromUSD(tc.total), s.Total, tc.at)
		}

		// The totals are what the month's calls sum to.
		sys := tenancy.System(ctx)
		for _, at := range []time.Time{midnight.Add(-time.Nanosecond), midnight} {
			start, end := budget.Month(at)
			var sum []struct {
				Sum int64 `json:"sum"`
			}
			b.client.ModelCall.Query().
				Where(modelcall.OrganizationID(b.org), modelcall.StartedAtGTE(start), modelcall.StartedAtLT(end)).
				Aggregate(ent.Sum(modelcall.FieldCostMicros)).ScanX(sys, &sum)
			s, err := budget.SpentIn(ctx, b.client, b.org, at)
			require.NoError(t, err)
			require.Equal(t, budget.Micros(sum[0].Sum), s.Total)
		}

		_, err := budget.Set(sys, b.client, b.org, b.bob, schematype.MicrosFromUSD(1))
		require.NoError(t, err)
		require.EqualError(t, budget.Enforce(ctx, b.client, b.org, b.bob, midnight.Add(-time.Nanosecond)),
			"budget exceeded: your monthly limit of $1.00 is spent ($1.00 in 2026-01, UTC)")
		require.NoError(t, budget.Enforce(ctx, b.client, b.org, b.bob, midnight), "February's 25 cents are under it")
	})
}

// TestEnforceReadsNoSpendWithoutALimit: with no limit set the check reads
// the limits only, one statement; with one it reads two rows of running
// totals more, one statement, however many model calls the month had.
func TestEnforceReadsNoSpendWithoutALimit(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, d *db.DB) {
		b := setup(t, d)
		ctx := context.Background()
		now := time.Date(2026, 3, 15, 9, 0, 0, 0, time.UTC)
		for i := range 20 {
			b.spend(t, b.turnAda, b.ada, 0.01, now.Add(-time.Duration(i)*time.Hour))
		}
		counter := dbtest.Count(d)
		c := d.Client()
		require.NoError(t, budget.Enforce(ctx, c, b.org, b.ada, now))
		require.Len(t, counter.Statements(), 1, counter.Statements())
		require.NotContains(t, counter.Statements()[0], "model_calls")

		_, err := budget.Set(tenancy.System(ctx), c, b.org, 0, schematype.MicrosFromUSD(0.2))
		require.NoError(t, err)
		counter.Reset()
		require.EqualError(t, budget.Enforce(ctx, c, b.org, b.ada, now),
			"budget exceeded: the organisation's monthly limit of $0.20 is spent ($0.20 in 2026-03, UTC)")
		require.Len(t, counter.Statements(), 2, counter.Statements())
		for _, q := range counter.Statements() {
			require.NotContains(t, q, "model_calls")
		}
	})
}
