package graph_test

import (
	"context"
	"encoding/csv"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/db"
	"github.com/toolgate/toolgate/db/dbtest"
	"github.com/toolgate/toolgate/ent/schematype"
	"github.com/toolgate/toolgate/ent/tenancy"
	"github.com/toolgate/toolgate/graph/gid"
)

// seedSpend records n model calls of model in the conversation (a global
// id) at at, each with the given tokens and cost.
func seedSpend(t *testing.T, b *testBundle, conv, modelName string, at time.Time, n int, tokens int64, micros schematype.Micros) {
	t.Helper()
	ctx := tenancy.System(context.Background())
	convID, err := gid.Decode(conv)
	require.NoError(t, err)
	c := b.client.Conversation.GetX(ctx, convID)
	tu := b.client.Turn.Create().SetConversationID(convID).SetNumber(int(at.Unix()%100000) + n).SetUserText("spend").SetStartedAt(at).SaveX(ctx)
	for i := range n {
		b.client.ModelCall.Create().SetTurnID(tu.ID).SetOrganizationID(c.OrganizationID).SetAgentID(c.AgentID).SetUserID(c.UserID).
			SetStep(i).SetProvider("openai").SetModel(modelName).SetInputTokens(tokens).SetCacheReadTokens(2 * tokens).
			SetCacheWriteTokens(tokens / 2).SetOutputTokens(tokens / 4).SetCostMicros(micros).SetCost(micros.USD()).
			SetStartedAt(at.Add(time.Duration(i) * time.Second)).ExecX(ctx)
	}
}

// TestUsageExportCSV: GET /usage.csv?month= answers a month's usage per
// user, agent and model, whose sums are the usage query's, within the same
// reach (an admin: the organisation; a member: their own; another
// organisation: its own); a scope token and a bad month are refused, and a
// name that would read as a spreadsheet formula is quoted.
func TestUsageExportCSV(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, d *db.DB) {
		b := setup(t, d)
		research := b.createAgentWith(t, b.alice.Token, "=Research", []any{"calculator"})
		sales := b.createAgentWith(t, b.alice.Token, "Sales", []any{"calculator"})
		aliceConv := b.startConversation(t, b.alice.Token, research, "a")
		aliceSales := b.startConversation(t, b.alice.Token, sales, "b")
		bobConv := b.startConversation(t, b.bob.Token, sales, "c")
		evil := b.createAgentWith(t, b.eve.Token, "Evil", []any{"calculator"})
		eveConv := b.startConversation(t, b.eve.Token, evil, "d")
		march := time.Date(2026, 3, 10, 9, 0, 0, 0, time.UTC)
		seedSpend(t, b, aliceConv, "gpt-4.1", march, 3, 1000, 12_345)
		seedSpend(t, b, aliceConv, "claude-sonnet-4-5", march.Add(time.Hour), 2, 700, 30_001)
		seedSpend(t, b, aliceSales, "gpt-4.1", march.Add(2*time.Hour), 1, 500, 7)
		seedSpend(t, b, bobConv, "gpt-4.1", march.Add(3*time.Hour), 4, 300, 999_999)
		seedSpend(t, b, eveConv, "gpt-4.1", march, 5, 100, 1)
		seedSpend(t, b, aliceConv, "gpt-4.1", time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC), 1, 1, 1) // April: not in March

		read := func(token, month string) (int, [][]string, http.Header) {
			status, h, body := b.download(t, token, "/usage.csv?month="+month, nil)
			if status != http.StatusOK {
				return status, nil, h
			}
			rows, err := csv.NewReader(strings.NewReader(string(body))).ReadAll()
			require.NoError(t, err, string(body))
			return status, rows, h
		}
		status, rows, h := read(b.alice.Token, "2026-03")
		require.Equal(t, http.StatusOK, status)
		require.Equal(t, "text/csv; charset=utf-8", h.Get("Content-Type"))
		require.Contains(t, h.Get("Content-Disposition"), `filename="toolgate-usage-2026-03.csv"`)
		require.Equal(t, []string{"month", "user_id", "user", "department", "agent_id", "agent", "model", "estimated",
			"model_calls", "input_tokens", "cache_read_tokens", "cache_write_tokens", "output_tokens", "cost", "currency"}, rows[0])
		require.Len(t, rows, 1+4, "alice: research × 2 models, sales; bob: sales")
		col := map[string]int{}
		for i, c := range rows[0] {
			col[c] = i
		}
		for _, r := range rows[1:] {
			require.Equal(t, "2026-03", r[col["month"]])
			require.Equal(t, "USD", r[col["currency"]])
			require.NotEqual(t, "=Research", r[col["agent"]], "a formula-like name is quoted")
		}
		require.Equal(t, "'=Research", rows[1][col["agent"]])

		// The sums are the usage query's, by user, agent and model.
		u := b.do(t, b.alice.Token, `{ usage(month: "2026-03") {
			totals { inputTokens cacheReadTokens cacheWriteTokens outputTokens modelCalls cost { micros } }
			byUser { user { id } totals { inputTokens modelCalls cost { micros } } }
			byAgent { agent { id } totals { outputTokens cost { micros } } }
			byModel { model totals { cacheReadTokens cost { micros } } } } }`, nil).ok(t)["usage"].(map[string]any)
		sum := func(key, match string, field string) int64 {
			var n int64
			for _, r := range rows[1:] {
				if key == "" || r[col[key]] == match {
					if field == "cost" {
						f, err := strconv.ParseFloat(r[col["cost"]], 64)
						require.NoError(t, err)
						n += int64(f*1e6 + 0.5)
						continue
					}
					v, err := strconv.ParseInt(r[col[field]], 10, 64)
					require.NoError(t, err)
					n += v
				}
			}
			return n
		}
		num := func(v any) int64 {
			switch x := v.(type) {
			case float64:
				return int64(x)
			case string:
				n, err := strconv.ParseInt(x, 10, 64)
				require.NoError(t, err)
				return n
			}
			t.Fatalf("not a number: %v", v)
			return 0
		}
		totals := u["totals"].(map[string]any)
		require.Equal(t, num(totals["inputTokens"]), sum("", "", "input_tokens"))
		require.Equal(t, num(totals["cacheReadTokens"]), sum("", "", "cache_read_tokens"))
		require.Equal(t, num(totals["cacheWriteTokens"]), sum("", "", "cache_write_tokens"))
		require.Equal(t, num(totals["outputTokens"]), sum("", "", "output_tokens"))
		require.Equal(t, num(totals["modelCalls"]), sum("", "", "model_calls"))
		require.Equal(t, num(totals["cost"].(map[string]any)["micros"]), sum("", "", "cost"))
		for _, g := range u["byUser"].([]any) {
			g := g.(map[string]any)
			id := g["user"].(map[string]any)["id"].(string)
			tt := g["totals"].(map[string]any)
			require.Equal(t, num(tt["inputTokens"]), sum("user_id", id, "input_tokens"))
			require.Equal(t, num(tt["modelCalls"]), sum("user_id", id, "model_calls"))
			require.Equal(t, num(tt["cost"].(map[string]any)["micros"]), sum("user_id", id, "cost"))
		}
		require.Len(t, u["byAgent"].([]any), 2)
		for _, g := range u["byAgent"].([]any) {
			g := g.(map[string]any)
			id := g["agent"].(map[string]any)["id"].(string)
			tt := g["totals"].(map[string]any)
			require.Equal(t, num(tt["outputTokens"]), sum("agent_id", id, "output_tokens"))
			require.Equal(t, num(tt["cost"].(map[string]any)["micros"]), sum("agent_id", id, "cost"))
		}
		for _, g := range u["byModel"].([]any) {
			g := g.(map[string]any)
			tt := g["totals"].(map[string]any)
			require.Equal(t, num(tt["cacheReadTokens"]), sum("model", g["model"].(string), "cache_read_tokens"))
			require.Equal(t, num(tt["cost"].(map[string]any)["micros"]), sum("model", g["model"].(string), "cost"))
		}

		// A member: their own calls only; another organisation: its own.
		_, rows, _ = read(b.bob.Token, "2026-03")
		require.Len(t, rows, 2)
		require.Equal(t, "4", rows[1][col["model_calls"]])
		require.Equal(t, "3.999996", rows[1][col["cost"]])
		_, rows, _ = read(b.eve.Token, "2026-03")
		require.Len(t, rows, 2)
		require.Equal(t, "Evil", rows[1][col["agent"]])
		// A quiet month: the header alone.
		_, rows, _ = read(b.alice.Token, "2026-05")
		require.Len(t, rows, 1)

		// Refusals: no token, a turn's scope token, a month that is not one.
		status, _, _ = read("", "2026-03")
		require.Equal(t, http.StatusUnauthorized, status)
		status, _, body := b.download(t, b.scopeToken(t, aliceConv, "calculator"), "/usage.csv?month=2026-03", nil)
		require.Equal(t, http.StatusNotFound, status)
		require.Contains(t, string(body), "NOT_FOUND")
		status, _, body = b.download(t, b.alice.Token, "/usage.csv?month=March", nil)
		require.Equal(t, http.StatusBadRequest, status)
		require.Contains(t, string(body), "want YYYY-MM")
	})
}
