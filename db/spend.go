package db

import (
	"context"
	"fmt"

	"github.com/toolgate/toolgate/ent"
	"github.com/toolgate/toolgate/ent/hook"
	"github.com/toolgate/toolgate/ent/modelcall"
	"github.com/toolgate/toolgate/ent/monthlyspend"
	"github.com/toolgate/toolgate/ent/schematype"
	"github.com/toolgate/toolgate/ent/setting"
	"github.com/toolgate/toolgate/ent/tenancy"
)

// SpendMonth is the key of a month's running totals: YYYY-MM in UTC.
const SpendMonth = "2006-01"

// addSpend adds a new model call's cost to its user's and its
// organisation's running total for the UTC month the call started in, in
// the transaction that inserts the call: one upsert of two rows, none for
// a call that cost nothing. Budgets read these totals, never the month's
// model calls.
func addSpend(next ent.Mutator) ent.Mutator {
	return hook.ModelCallFunc(func(ctx context.Context, m *ent.ModelCallMutation) (ent.Value, error) {
		v, err := next.Mutate(ctx, m)
		if err != nil || !m.Op().Is(ent.OpCreate) {
			return v, err
		}
		call, ok := v.(*ent.ModelCall)
		if !ok || call.CostMicros == 0 {
			return v, nil
		}
		month := call.StartedAt.UTC().Format(SpendMonth)
		c := m.Client().MonthlySpend
		err = c.CreateBulk(
			c.Create().SetOrganizationID(call.OrganizationID).SetUserID(0).SetMonth(month).SetCostMicros(call.CostMicros),
			c.Create().SetOrganizationID(call.OrganizationID).SetUserID(call.UserID).SetMonth(month).SetCostMicros(call.CostMicros),
		).
			OnConflictColumns(monthlyspend.FieldOrganizationID, monthlyspend.FieldMonth, monthlyspend.FieldUserID).
			Update(func(u *ent.MonthlySpendUpsert) { u.AddCostMicros(call.CostMicros) }).
			Exec(tenancy.System(ctx))
		if err != nil {
			return nil, fmt.Errorf("add to the month's spend: %w", err)
		}
		return v, nil
	})
}

// spendBuilt is the setting that says the running totals were built from
// the model calls recorded before they were kept.
const spendBuilt = "monthly_spend.built"

// backfillSpend builds the running totals, once, from the model calls
// recorded before they were kept (by an earlier version), in one
// transaction that marks them built: a database migrated again, or made
// new, is left as it is.
func (d *DB) backfillSpend(ctx context.Context) error {
	ctx = tenancy.System(ctx)
	if ok, err := d.Client().Setting.Query().Where(setting.Key(spendBuilt)).Exist(ctx); err != nil || ok {
		if err != nil {
			return fmt.Errorf("read the months' spend: %w", err)
		}
		return nil
	}
	tx, err := d.Client().Tx(ctx)
	if err != nil {
		return err
	}
	if err := buildSpend(ctx, tx.Client()); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}

func buildSpend(ctx context.Context, c *ent.Client) error {
	if _, err := c.MonthlySpend.Delete().Exec(ctx); err != nil {
		return fmt.Errorf("clear the months' spend: %w", err)
	}
	type sum struct {
		org, user int
		month     string
	}
	sums := map[sum]int64{}
	// Once, on the first migration that keeps totals: every model call
	// with a cost, a page at a time.
	for after := 0; ; {
		rows, err := c.ModelCall.Query().Where(modelcall.CostMicrosNEQ(0), modelcall.IDGT(after)).
			Order(ent.Asc(modelcall.FieldID)).Limit(10_000).
			Select(modelcall.FieldOrganizationID, modelcall.FieldUserID, modelcall.FieldStartedAt, modelcall.FieldCostMicros).
			All(ctx)
		if err != nil {
			return fmt.Errorf("read earlier model calls' cost: %w", err)
		}
		if len(rows) == 0 {
			break
		}
		for _, r := range rows {
			month := r.StartedAt.UTC().Format(SpendMonth)
			sums[sum{r.OrganizationID, 0, month}] += int64(r.CostMicros)
			sums[sum{r.OrganizationID, r.UserID, month}] += int64(r.CostMicros)
		}
		after = rows[len(rows)-1].ID
	}
	creates := make([]*ent.MonthlySpendCreate, 0, len(sums))
	for k, v := range sums {
		creates = append(creates, c.MonthlySpend.Create().SetOrganizationID(k.org).SetUserID(k.user).SetMonth(k.month).SetCostMicros(schematype.Micros(v)))
	}
	for len(creates) > 0 {
		n := min(len(creates), 500)
		if err := c.MonthlySpend.CreateBulk(creates[:n]...).Exec(ctx); err != nil {
			return fmt.Errorf("record earlier months' spend: %w", err)
		}
		creates = creates[n:]
	}
	if err := c.Setting.Create().SetKey(spendBuilt).SetValue([]byte("1")).Exec(ctx); err != nil {
		return fmt.Errorf("mark the months' spend built: %w", err)
	}
	return nil
}
