package graph

import (
	"context"
	"math"
	"time"

	"github.com/toolgate/toolgate/ent"
	"github.com/toolgate/toolgate/ent/schematype"
	"github.com/toolgate/toolgate/graph/auth"
	"github.com/toolgate/toolgate/graph/loader"
	"github.com/toolgate/toolgate/graph/model"
	"github.com/toolgate/toolgate/tools/budget"
)

// now is the server's clock: the runner's when there is one, so tests that
// move it move budgets' months too.
func (r *Resolver) now() time.Time {
	if r.Runner != nil {
		return r.Runner.Now()
	}
	return time.Now()
}

func (r *Resolver) setBudget(ctx context.Context, in model.SetBudgetInput) (*ent.Budget, error) {
	v, err := auth.FromContext(ctx)
	if err != nil {
		return nil, err
	}
	if v.Scoped() || !v.Admin {
		return nil, auth.ErrForbidden
	}
	limit, err := monthlyLimit(in)
	if err != nil {
		return nil, err
	}
	c := r.client(ctx)
	user := 0
	if in.UserID != nil {
		// Another organisation's user is not found, like a made-up one.
		u, err := c.User.Get(ctx, *in.UserID)
		if err != nil {
			return nil, err
		}
		user = u.ID
	}
	return budget.Set(ctx, c, v.OrganizationID, user, limit)
}

// monthlyLimit reads the one limit setBudget was given, exactly when it
// came as MoneyInput.
func monthlyLimit(in model.SetBudgetInput) (budget.Micros, error) {
	var limit budget.Micros
	switch {
	case (in.MonthlyLimit == nil) == (in.MonthlyLimitAmount == nil):
		return 0, inputErrorf("give monthlyLimitAmount (or the deprecated monthlyLimit), exactly one of them")
	case in.MonthlyLimitAmount != nil:
		a := in.MonthlyLimitAmount
		if a.Currency != schematype.Currency {
			return 0, inputErrorf("monthlyLimitAmount.currency %q: prices are in %s, the one currency accepted", a.Currency, schematype.Currency)
		}
		m, err := schematype.ParseMicros(a.Amount)
		if err != nil {
			return 0, inputErrorf("monthlyLimitAmount.amount %q: %v", a.Amount, err)
		}
		limit = m
	default:
		usd := *in.MonthlyLimit
		if math.IsNaN(usd) || usd < 0 || usd > budget.MaxLimit {
			return 0, inputErrorf("monthlyLimit: want 0 to %d USD", budget.MaxLimit)
		}
		limit = schematype.MicrosFromUSD(usd)
	}
	if limit > budget.MaxLimit*1_000_000 {
		return 0, inputErrorf("monthlyLimitAmount: want 0 to %d USD", budget.MaxLimit)
	}
	return limit, nil
}

// budgetSpent is what the budget's user (or organisation) spent this
// month; every budget of a response shares one statement.
func (r *Resolver) budgetSpent(ctx context.Context, b *ent.Budget) (budget.Micros, error) {
	user := 0
	if b.UserID != nil {
		user = *b.UserID
	}
	start, _ := budget.Month(r.now())
	s, err := loader.For(ctx).Spending.Load(ctx, loader.SpendingKey{Organization: b.OrganizationID, Month: start.Format("2006-01")})()
	return s.Of(user), err
}

// budgetCheck answers budget_check for the caller: with a scope token,
// only when the turn was offered it.
func (r *Resolver) budgetCheck(ctx context.Context, conversationID *int) (*model.BudgetStatus, error) {
	v, err := auth.FromContext(ctx)
	if err != nil {
		return nil, err
	}
	if v.Scoped() {
		if err := r.toolAllowed(ctx, budget.Check.Name, conversationID); err != nil {
			return nil, err
		}
	}
	s, err := budget.StatusOf(ctx, r.Client, v.OrganizationID, v.UserID, r.now())
	if err != nil {
		return nil, err
	}
	line := func(l budget.Line) *model.BudgetLine {
		out := &model.BudgetLine{Spent: l.Spent.USD(), SpentAmount: l.Spent}
		if l.Limit != nil {
			out.MonthlyLimit = ptr(l.Limit.USD())
			out.Left = ptr(l.Left().USD())
			out.MonthlyLimitAmount, out.LeftAmount = l.Limit, l.Left()
		}
		return out
	}
	return &model.BudgetStatus{Month: s.Month, User: line(s.User), Organization: line(s.Organization)}, nil
}
