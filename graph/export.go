package graph

import (
	"cmp"
	"context"
	"encoding/csv"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/toolgate/toolgate/ent"
	"github.com/toolgate/toolgate/ent/agent"
	"github.com/toolgate/toolgate/ent/modelcall"
	"github.com/toolgate/toolgate/ent/schematype"
	"github.com/toolgate/toolgate/ent/user"
)

// UsageCSVPath is where a month's usage downloads as CSV.
const UsageCSVPath = "/usage.csv"

// usageCSVColumns are the export's columns, in order.
var usageCSVColumns = []string{"month", "user_id", "user", "department", "agent_id", "agent", "model", "estimated",
	"model_calls", "input_tokens", "cache_read_tokens", "cache_write_tokens", "output_tokens", "cost", "currency"}

// monthRange is the calendar month in UTC that month names ("YYYY-MM"; nil:
// the one now is in), as [start, end).
func monthRange(month *string, now time.Time) (time.Time, time.Time, error) {
	now = now.UTC()
	start := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC)
	if month != nil {
		m, err := time.Parse("2006-01", strings.TrimSpace(*month))
		if err != nil {
			return start, start, inputErrorf("month %q: want YYYY-MM, e.g. 2026-11", *month)
		}
		start = m
	}
	return start, start.AddDate(0, 1, 0), nil
}

// usageCSVHandler serves GET /usage.csv?month=YYYY-MM: a month's model calls
// summed per user, agent and model, one row each, within the reach of the
// usage query (an admin's API token: the organisation; a member's: their
// own calls; a turn's scope token: nothing, answered as not found). Its
// figures are the usage query's: the rows of a user add up to its byUser
// totals, and so on for agents, models and the month.
func usageCSVHandler(client *ent.Client, log *slog.Logger, now func() time.Time) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		ctx := r.Context()
		if _, err := apiViewer(ctx); err != nil {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(notFoundBody))
			return
		}
		var month *string
		if m := r.URL.Query().Get("month"); m != "" {
			month = &m
		}
		start, end, err := monthRange(month, now())
		if err != nil {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			_, _ = fmt.Fprintf(w, `{"errors":[{"message":%q,"extensions":{"code":"BAD_USER_INPUT"}}]}`, err.Error())
			return
		}
		rows, err := usageCSV(ctx, client, start, end)
		if err != nil {
			log.ErrorContext(ctx, "usage export", "err", err)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = w.Write([]byte(`{"errors":[{"message":"internal error","extensions":{"code":"INTERNAL"}}]}`))
			return
		}
		h := w.Header()
		h.Set("Content-Type", "text/csv; charset=utf-8")
		h.Set("Content-Disposition", `attachment; filename="toolgate-usage-`+start.Format("2006-01")+`.csv"`)
		h.Set("Cache-Control", "private, no-store")
		h.Set("X-Content-Type-Options", "nosniff")
		cw := csv.NewWriter(w)
		_ = cw.Write(usageCSVColumns)
		_ = cw.WriteAll(rows) // WriteAll flushes
	})
}

// usageCSV is the export's rows: the month's model calls grouped by user,
// agent and model, ordered by user name, agent name and model.
func usageCSV(ctx context.Context, client *ent.Client, start, end time.Time) ([][]string, error) {
	var groups []usageRow
	err := client.ModelCall.Query().
		Where(modelcall.StartedAtGTE(start), modelcall.StartedAtLT(end)).
		GroupBy(modelcall.FieldUserID, modelcall.FieldAgentID, modelcall.FieldModel).
		Aggregate(
			ent.As(ent.Sum(modelcall.FieldInputTokens), "input"),
			ent.As(ent.Sum(modelcall.FieldCacheReadTokens), "cache_read"),
			ent.As(ent.Sum(modelcall.FieldCacheWriteTokens), "cache_write"),
			ent.As(ent.Sum(modelcall.FieldOutputTokens), "output"),
			ent.As(ent.Sum(modelcall.FieldCostMicros), "cost"),
			ent.As(ent.Sum(modelcall.FieldPrefixTokens), "prefix"),
			ent.As(ent.Count(), "calls"),
		).Scan(ctx, &groups)
	if err != nil {
		return nil, fmt.Errorf("usage by user, agent and model: %w", err)
	}
	var userIDs, agentIDs []int
	for _, g := range groups {
		userIDs, agentIDs = append(userIDs, g.UserID), append(agentIDs, g.AgentID)
	}
	users, err := client.User.Query().Where(user.IDIn(userIDs...)).All(ctx)
	if err != nil {
		return nil, fmt.Errorf("usage users: %w", err)
	}
	agents, err := client.Agent.Query().Where(agent.IDIn(agentIDs...)).All(ctx)
	if err != nil {
		return nil, fmt.Errorf("usage agents: %w", err)
	}
	userByID := byID(users, func(u *ent.User) int { return u.ID })
	agentByID := byID(agents, func(a *ent.Agent) int { return a.ID })
	month := start.Format("2006-01")
	rows := make([][]string, 0, len(groups))
	for _, g := range groups {
		userName, department, agentName := "", "", ""
		if u := userByID[g.UserID]; u != nil {
			userName, department = u.Name, u.Department
		}
		if a := agentByID[g.AgentID]; a != nil {
			agentName = a.Name
		}
		rows = append(rows, []string{month, EncodeID(g.UserID), cell(userName), cell(department), EncodeID(g.AgentID), cell(agentName),
			cell(g.Model), strconv.FormatBool(estimatedModel(g.Model)), strconv.FormatInt(g.Calls, 10),
			strconv.FormatInt(g.Input, 10), strconv.FormatInt(g.CacheRead, 10), strconv.FormatInt(g.CacheWrite, 10),
			strconv.FormatInt(g.Output, 10), schematype.Micros(g.Cost).Amount(), "USD"})
	}
	slices.SortFunc(rows, func(a, b []string) int {
		return cmp.Or(strings.Compare(a[2], b[2]), strings.Compare(a[1], b[1]), strings.Compare(a[5], b[5]),
			strings.Compare(a[4], b[4]), strings.Compare(a[6], b[6]))
	})
	return rows, nil
}

// cell keeps a name from reading as a formula in a spreadsheet: one that
// starts with = + - @ (or a tab or carriage return) gets a leading quote.
func cell(s string) string {
	if s != "" && strings.ContainsRune("=+-@\t\r", rune(s[0])) {
		return "'" + s
	}
	return s
}
