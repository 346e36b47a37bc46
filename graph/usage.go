package graph

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/toolgate/toolgate/ent"
	"github.com/toolgate/toolgate/ent/agent"
	"github.com/toolgate/toolgate/ent/modelcall"
	"github.com/toolgate/toolgate/ent/user"
	"github.com/toolgate/toolgate/graph/model"
)

// usageDays sums a month's model calls day by day (UTC): one statement per
// day grouped by model, agent and user, through the same privacy policy as
// the month's figures, plus one each for the agents' and users' names.
// Grouping by a day in SQL would need each dialect's date functions; a
// month has at most 31 days, each an index range.
func (r *Resolver) usageDays(ctx context.Context, u *model.Usage) ([]*model.UsageDay, error) {
	start, err := time.Parse("2006-01", u.Month)
	if err != nil {
		return nil, fmt.Errorf("usage days: month %q: %w", u.Month, err)
	}
	end := start.AddDate(0, 1, 0)
	type day struct {
		date string
		rows []usageRow
	}
	var days []day
	agentIDs, userIDs := map[int]bool{}, map[int]bool{}
	for d := start; d.Before(end); d = d.AddDate(0, 0, 1) {
		var rows []usageRow
		err := r.Client.ModelCall.Query().
			Where(modelcall.StartedAtGTE(d), modelcall.StartedAtLT(d.AddDate(0, 0, 1))).
			GroupBy(modelcall.FieldModel, modelcall.FieldAgentID, modelcall.FieldUserID).
			Aggregate(
				ent.As(ent.Sum(modelcall.FieldInputTokens), "input"),
				ent.As(ent.Sum(modelcall.FieldCacheReadTokens), "cache_read"),
				ent.As(ent.Sum(modelcall.FieldCacheWriteTokens), "cache_write"),
				ent.As(ent.Sum(modelcall.FieldOutputTokens), "output"),
				ent.As(ent.Sum(modelcall.FieldCostMicros), "cost"),
				ent.As(ent.Sum(modelcall.FieldPrefixTokens), "prefix"),
				ent.As(ent.Count(), "calls"),
			).Scan(ctx, &rows)
		if err != nil {
			return nil, fmt.Errorf("usage of %s: %w", d.Format(time.DateOnly), err)
		}
		for _, row := range rows {
			agentIDs[row.AgentID], userIDs[row.UserID] = true, true
		}
		days = append(days, day{date: d.Format(time.DateOnly), rows: rows})
	}
	var agentByID map[int]*ent.Agent
	if len(agentIDs) > 0 {
		agents, err := r.Client.Agent.Query().Where(agent.IDIn(slices.Sorted(maps.Keys(agentIDs))...)).All(ctx)
		if err != nil {
			return nil, fmt.Errorf("usage days: agents: %w", err)
		}
		agentByID = byID(agents, func(a *ent.Agent) int { return a.ID })
	}
	var userByID map[int]*ent.User
	if len(userIDs) > 0 {
		users, err := r.Client.User.Query().Where(user.IDIn(slices.Sorted(maps.Keys(userIDs))...)).All(ctx)
		if err != nil {
			return nil, fmt.Errorf("usage days: users: %w", err)
		}
		userByID = byID(users, func(u *ent.User) int { return u.ID })
	}
	out := make([]*model.UsageDay, len(days))
	for i, d := range days {
		all := &model.UsageTotals{}
		byModel, byAgent, byUser := map[string]*model.UsageTotals{}, map[int]*model.UsageTotals{}, map[int]*model.UsageTotals{}
		for _, row := range d.rows {
			t := row.totals()
			addTotals(all, t)
			addTotals(totalsOf(byModel, row.Model), t)
			addTotals(totalsOf(byAgent, row.AgentID), t)
			addTotals(totalsOf(byUser, row.UserID), t)
		}
		day := &model.UsageDay{Date: d.date, Totals: all,
			ByModel: []*model.ModelUsage{}, ByAgent: []*model.AgentUsage{}, ByUser: []*model.UserUsage{}}
		for _, name := range slices.Sorted(maps.Keys(byModel)) {
			t := byModel[name]
			day.ByModel = append(day.ByModel, &model.ModelUsage{Model: name, Estimated: estimatedModel(name), Totals: t, InputTokens: int(t.InputTokens),
				CacheReadTokens: int(t.CacheReadTokens), CacheWriteTokens: int(t.CacheWriteTokens), OutputTokens: int(t.OutputTokens),
				Cost: t.Cost.USD(), ModelCalls: int(t.ModelCalls)})
		}
		for _, id := range slices.Sorted(maps.Keys(byAgent)) {
			t := byAgent[id]
			day.ByAgent = append(day.ByAgent, &model.AgentUsage{Agent: agentByID[id], Totals: t, InputTokens: int(t.InputTokens),
				CacheReadTokens: int(t.CacheReadTokens), CacheWriteTokens: int(t.CacheWriteTokens), OutputTokens: int(t.OutputTokens),
				Cost: t.Cost.USD(), ModelCalls: int(t.ModelCalls)})
		}
		for _, id := range slices.Sorted(maps.Keys(byUser)) {
			t := byUser[id]
			day.ByUser = append(day.ByUser, &model.UserUsage{User: userByID[id], Totals: t, InputTokens: int(t.InputTokens),
				CacheReadTokens: int(t.CacheReadTokens), CacheWriteTokens: int(t.CacheWriteTokens), OutputTokens: int(t.OutputTokens),
				Cost: t.Cost.USD(), ModelCalls: int(t.ModelCalls)})
		}
		out[i] = day
	}
	return out, nil
}

// addTotals adds t to sum.
func addTotals(sum, t *model.UsageTotals) {
	sum.InputTokens += t.InputTokens
	sum.CacheReadTokens += t.CacheReadTokens
	sum.CacheWriteTokens += t.CacheWriteTokens
	sum.OutputTokens += t.OutputTokens
	sum.PrefixTokens += t.PrefixTokens
	sum.ModelCalls += t.ModelCalls
	sum.Cost += t.Cost
}

// totalsOf returns the totals of key in m, made on first use.
func totalsOf[K cmp.Ordered](m map[K]*model.UsageTotals, key K) *model.UsageTotals {
	t, ok := m[key]
	if !ok {
		t = &model.UsageTotals{}
		m[key] = t
	}
	return t
}
