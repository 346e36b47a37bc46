// Package budget is the Budget family: monthly spending limits in USD that
// admins set for the organisation and for single users, what has been
// spent against them in the calendar month (UTC), the budget_check tool,
// and the check that refuses or stops a turn once a limit is spent.
//
// Limits are exact (integer micro-dollars); spend is the sum of the model
// calls' costs started in the month, in UTC: a call at 23:30 on the 31st
// in UTC−5 is already the 1st in UTC and counts in the next month. The sum
// is kept as a running total (ent.MonthlySpend), added to in the
// transaction that records each model call, so what a check reads does
// not grow with the month's calls.
package budget

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/toolgate/toolgate/db"
	"github.com/toolgate/toolgate/ent"
	entbudget "github.com/toolgate/toolgate/ent/budget"
	"github.com/toolgate/toolgate/ent/monthlyspend"
	"github.com/toolgate/toolgate/ent/schematype"
	"github.com/toolgate/toolgate/ent/tenancy"
)

// Micros is an exact amount of USD, the data model's money type.
type Micros = schematype.Micros

// MaxLimit is the largest monthly limit an admin may set, in USD.
const MaxLimit = 1_000_000_000

// Month returns the calendar month, in UTC, that t falls in: [start, end).
func Month(t time.Time) (start, end time.Time) {
	u := t.UTC()
	start = time.Date(u.Year(), u.Month(), 1, 0, 0, 0, 0, time.UTC)
	return start, start.AddDate(0, 1, 0)
}

// Spending is what an organisation's users spent in one UTC month.
type Spending struct {
	ByUser map[int]Micros
	// Total is the organisation's: every user's.
	Total Micros
}

// Of is what user spent; user 0 is the whole organisation.
func (s Spending) Of(user int) Micros {
	if user == 0 {
		return s.Total
	}
	return s.ByUser[user]
}

// SpentIn reads what org's users spent in the UTC month of now: the
// running totals each model call adds to (db), one statement of a row
// per user who spent and one for the organisation, however many calls the
// month had. It reads as the system: the organisation's total is part of
// what a member is told (budget_check).
func SpentIn(ctx context.Context, c *ent.Client, org int, now time.Time) (Spending, error) {
	rows, err := c.MonthlySpend.Query().
		Where(monthlyspend.OrganizationID(org), monthlyspend.Month(monthOf(now))).
		All(tenancy.System(ctx))
	if err != nil {
		return Spending{}, fmt.Errorf("read spend: %w", err)
	}
	return spending(rows), nil
}

// monthOf is the key of now's month in the running totals.
func monthOf(now time.Time) string { return now.UTC().Format(db.SpendMonth) }

func spending(rows []*ent.MonthlySpend) Spending {
	s := Spending{ByUser: make(map[int]Micros, len(rows))}
	for _, r := range rows {
		if r.UserID == 0 {
			s.Total = r.CostMicros
			continue
		}
		s.ByUser[r.UserID] = r.CostMicros
	}
	return s
}

// spentBy reads the totals of org and its user in the UTC month of now:
// two rows at most.
func spentBy(ctx context.Context, c *ent.Client, org, user int, now time.Time) (Spending, error) {
	rows, err := c.MonthlySpend.Query().
		Where(monthlyspend.OrganizationID(org), monthlyspend.Month(monthOf(now)), monthlyspend.UserIDIn(0, user)).
		All(tenancy.System(ctx))
	if err != nil {
		return Spending{}, fmt.Errorf("read spend: %w", err)
	}
	return spending(rows), nil
}

// Spent is what org's user (0: the whole organisation) spent in the UTC
// month of now.
func Spent(ctx context.Context, c *ent.Client, org, user int, now time.Time) (Micros, error) {
	s, err := SpentIn(ctx, c, org, now)
	return s.Of(user), err
}

// Line is one limit and what was spent against it this month.
type Line struct {
	// Limit is nil when no limit is set.
	Limit *Micros
	Spent Micros
}

// Left is what remains of the limit (never below zero), nil without one.
func (l Line) Left() *Micros {
	if l.Limit == nil {
		return nil
	}
	left := max(*l.Limit-l.Spent, 0)
	return &left
}

// Over reports whether the limit is spent.
func (l Line) Over() bool { return l.Limit != nil && l.Spent >= *l.Limit }

// Status is the month's spend and limits of one user and their organisation.
type Status struct {
	// Month is YYYY-MM in UTC.
	Month        string
	User         Line
	Organization Line
}

// StatusOf reads the limits of org and user and what both spent in the UTC
// month of now.
func StatusOf(ctx context.Context, c *ent.Client, org, user int, now time.Time) (*Status, error) {
	s, err := limitsOf(ctx, c, org, user, now)
	if err != nil {
		return nil, err
	}
	return s, s.readSpend(ctx, c, org, user, now)
}

// limitsOf reads the limits of org and user, the spend not yet.
func limitsOf(ctx context.Context, c *ent.Client, org, user int, now time.Time) (*Status, error) {
	rows, err := c.Budget.Query().
		Where(entbudget.OrganizationID(org), entbudget.Or(entbudget.UserIDIsNil(), entbudget.UserID(user))).
		All(tenancy.System(ctx))
	if err != nil {
		return nil, fmt.Errorf("load budgets: %w", err)
	}
	start, _ := Month(now)
	s := &Status{Month: start.Format("2006-01")}
	for _, b := range rows {
		limit := b.MonthlyLimitMicros
		if b.UserID == nil {
			s.Organization.Limit = &limit
		} else {
			s.User.Limit = &limit
		}
	}
	return s, nil
}

func (s *Status) readSpend(ctx context.Context, c *ent.Client, org, user int, now time.Time) error {
	spent, err := spentBy(ctx, c, org, user, now)
	if err != nil {
		return err
	}
	s.User.Spent, s.Organization.Spent = spent.Of(user), spent.Total
	return nil
}

// ExceededError says which monthly limit is spent. Clients read it with
// extensions.code BUDGET_EXCEEDED; a turn that crosses it fails with its
// message as the reason.
type ExceededError struct {
	// Organization is true for the organisation's limit, false for the user's.
	Organization bool
	Limit, Spent Micros
	Month        string
}

func (e *ExceededError) Error() string {
	whose := "your"
	if e.Organization {
		whose = "the organisation's"
	}
	return fmt.Sprintf("budget exceeded: %s monthly limit of %s is spent (%s in %s, UTC)", whose, e.Limit, e.Spent, e.Month)
}

// Enforce returns an ExceededError when the user's or the organisation's
// limit is spent this UTC month (the user's named first), nil otherwise.
//
// Without a limit it reads nothing more than the limits: no spend.
func Enforce(ctx context.Context, c *ent.Client, org, user int, now time.Time) error {
	s, err := limitsOf(ctx, c, org, user, now)
	if err != nil {
		return err
	}
	if s.User.Limit == nil && s.Organization.Limit == nil {
		return nil
	}
	if err := s.readSpend(ctx, c, org, user, now); err != nil {
		return err
	}
	switch {
	case s.User.Over():
		return &ExceededError{Limit: *s.User.Limit, Spent: s.User.Spent, Month: s.Month}
	case s.Organization.Over():
		return &ExceededError{Organization: true, Limit: *s.Organization.Limit, Spent: s.Organization.Spent, Month: s.Month}
	}
	return nil
}

// Set sets the monthly limit of org's user (0: the organisation's own),
// replacing the one there was. c is the caller's client: an admin's.
func Set(ctx context.Context, c *ent.Client, org, user int, limit Micros) (*ent.Budget, error) {
	q := c.Budget.Query().Where(entbudget.OrganizationID(org))
	if user == 0 {
		q = q.Where(entbudget.UserIDIsNil())
	} else {
		q = q.Where(entbudget.UserID(user))
	}
	b, err := q.First(ctx)
	switch {
	case err == nil:
		return b.Update().SetMonthlyLimitMicros(limit).Save(ctx)
	case !ent.IsNotFound(err):
		return nil, fmt.Errorf("load budget: %w", err)
	}
	create := c.Budget.Create().SetOrganizationID(org).SetMonthlyLimitMicros(limit)
	if user != 0 {
		create.SetUserID(user)
	}
	return create.Save(ctx)
}

// Stopper answers the turn runtime's question after each step: the reason
// a turn stops (a spent limit, in words a user may read), or an error when
// the limits could not be read.
func Stopper(c *ent.Client) func(ctx context.Context, org, user int, now time.Time) (string, error) {
	return func(ctx context.Context, org, user int, now time.Time) (string, error) {
		err := Enforce(ctx, c, org, user, now)
		var ex *ExceededError
		if errors.As(err, &ex) {
			return ex.Error(), nil
		}
		return "", err
	}
}
