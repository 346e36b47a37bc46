package graph

import (
	"context"
	"math"
	"time"

	"github.com/toolgate/toolgate/ent"
	"github.com/toolgate/toolgate/graph/auth"
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
	if math.IsNaN(in.MonthlyLimit) || in.MonthlyLimit < 0 || in.MonthlyLimit > budget.MaxLimit {
		return nil, inputErrorf("monthlyLimit: want 0 to %d USD", budget.MaxLimit)
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
	return budget.Set(ctx, c, v.OrganizationID, user, budget.FromUSD(in.MonthlyLimit))
}

// budgetSpent is what the budget's user (or organisation) spent this month.
func (r *Resolver) budgetSpent(ctx context.Context, b *ent.Budget) (budget.Micros, error) {
	user := 0
	if b.UserID != nil {
		user = *b.UserID
	}
	return budget.Spent(ctx, r.Client, b.OrganizationID, user, r.now())
}

// budgetCheck answers budget_check for the caller: with a scope token,
// only when the turn was offered it.
func (r *Resolver) budgetCheck(ctx context.Context, conversationID *int) (*model.BudgetStatus, error) {
	v, err := auth.FromContext(ctx)
	if err != nil {
		return nil, err
	}
	if v.Scoped() {
		if _, err := r.toolConversation(ctx, budget.Check.Name, conversationID); err != nil {
			return nil, err
		}
	}
	s, err := budget.StatusOf(ctx, r.Client, v.OrganizationID, v.UserID, r.now())
	if err != nil {
		return nil, err
	}
	line := func(l budget.Line) *model.BudgetLine {
		out := &model.BudgetLine{Spent: l.Spent.USD()}
		if l.Limit != nil {
			out.MonthlyLimit = ptr(l.Limit.USD())
			out.Left = ptr(l.Left().USD())
		}
		return out
	}
	return &model.BudgetStatus{Month: s.Month, User: line(s.User), Organization: line(s.Organization)}, nil
}
