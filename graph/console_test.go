package graph_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/db"
	"github.com/toolgate/toolgate/db/dbtest"
	"github.com/toolgate/toolgate/ent/schematype"
	"github.com/toolgate/toolgate/ent/tenancy"
	"github.com/toolgate/toolgate/ent/turn"
	"github.com/toolgate/toolgate/graph/console"
	"github.com/toolgate/toolgate/graph/gid"
)

// consoleMonth is the month the console's seed spends in.
const consoleMonth = "2026-03"

// consoleSeed is what seedConsole made: global ids for the console to open.
type consoleSeed struct {
	researcher, seller string // agents
	aliceConv, bobConv string // conversations
	ref                string // a stored result of aliceConv, longer than one window
	bob                string // Bob's user id
	spareToken         string // an API token of Bob's, for the console to revoke
}

// seedConsole gives the organisation a month of spend (consoleMonth) by
// two users, two agents and three models, some spend this month against
// budgets (the organisation within, Alice near, Bob over), and a
// conversation whose first turn made calls of every outcome with a stored
// result.
func seedConsole(t testing.TB, b *testBundle) consoleSeed {
	t.Helper()
	ctx := tenancy.System(context.Background())
	var s consoleSeed
	s.researcher = b.createAgentWith(t, b.alice.Token, "Research assistant", []any{"run_code", "search_tools", "list_tools", "get_tool_schema"})
	s.seller = b.createAgentWith(t, b.alice.Token, "Sales helper", []any{"update_tasks"})
	s.aliceConv = b.startConversation(t, b.alice.Token, s.researcher, "Quarterly numbers")
	s.bobConv = b.startConversation(t, b.bob.Token, s.seller, "Pipeline review")

	month, err := time.Parse("2006-01", consoleMonth)
	require.NoError(t, err)
	type spender struct {
		conv   string
		models []string
		scale  int64
	}
	spenders := []spender{
		{conv: s.aliceConv, models: []string{"gpt-4.1", "claude-sonnet-4-5"}, scale: 3},
		{conv: s.bobConv, models: []string{"gpt-4.1-mini"}, scale: 2},
	}
	for _, sp := range spenders {
		convID, err := gid.Decode(sp.conv)
		require.NoError(t, err)
		c := b.client.Conversation.GetX(ctx, convID)
		for day := 1; day <= 31; day++ {
			if (day+int(sp.scale))%7 == 0 {
				continue // a quiet day
			}
			at := month.AddDate(0, 0, day-1).Add(time.Duration(9+day%8) * time.Hour)
			tu := b.client.Turn.Create().SetConversationID(convID).SetNumber(day + 1).SetUserText(fmt.Sprintf("question of %s", at.Format(time.DateOnly))).
				SetAnswer("an answer").SetStatus(turn.StatusCOMPLETED).SetStartedAt(at).SetFinishedAt(at.Add(time.Duration(2+day%5) * time.Second)).SaveX(ctx)
			for i, m := range sp.models {
				weight := sp.scale * int64(1+(day*(i+3))%5)
				input := 1200 * weight
				b.client.ModelCall.Create().SetTurnID(tu.ID).SetOrganizationID(c.OrganizationID).SetAgentID(c.AgentID).SetUserID(c.UserID).
					SetStep(i).SetProvider("openai").SetModel(m).SetInputTokens(input).SetCacheReadTokens(4 * input).
					SetCacheWriteTokens(input / 2).SetPrefixTokens(3 * input).SetOutputTokens(300 * weight).SetCostMicros(schematype.Micros(9_000 * weight * int64(i+1))).
					SetCost(schematype.Micros(9_000 * weight * int64(i+1)).USD()).SetStartedAt(at.Add(time.Duration(i) * time.Second)).ExecX(ctx)
			}
		}
	}

	// This month: budgets with something spent against them.
	now := time.Now()
	for _, sp := range []struct {
		conv   string
		micros schematype.Micros
	}{{s.aliceConv, 8_500_000}, {s.bobConv, 1_200_000}} {
		convID, err := gid.Decode(sp.conv)
		require.NoError(t, err)
		c := b.client.Conversation.GetX(ctx, convID)
		tu := b.client.Turn.Create().SetConversationID(convID).SetNumber(40).SetUserText("this month").
			SetStatus(turn.StatusCOMPLETED).SetStartedAt(now).SetFinishedAt(now.Add(1500 * time.Millisecond)).SaveX(ctx)
		b.client.ModelCall.Create().SetTurnID(tu.ID).SetOrganizationID(c.OrganizationID).SetAgentID(c.AgentID).SetUserID(c.UserID).
			SetProvider("openai").SetModel("gpt-4.1").SetInputTokens(1000).SetCostMicros(sp.micros).SetCost(sp.micros.USD()).SetStartedAt(now).ExecX(ctx)
		for i, o := range []schematype.Outcome{schematype.OutcomeHits, schematype.OutcomeHits, schematype.OutcomeAbsence} {
			tc := b.client.ToolCall.Create().SetTurnID(tu.ID).SetPosition(i).SetName("calculator").SetArguments(`{"expression":"1+1"}`).
				SetOutcome(o).SetAttempts(1).SaveX(ctx)
			if i == 0 {
				// A call a person approved, for the console's approvals.
				b.client.Approval.Create().SetConversationID(convID).SetTurnID(tu.ID).SetToolCallID(tc.ID).SetTool("calculator").
					SetArguments(tc.Arguments).SetPolicy(schematype.ApprovalAlways).SetDecision(schematype.DecisionApprove).
					SetDecidedByID(c.UserID).SetDecidedAt(now).SetExpiresAt(now.Add(time.Hour)).ExecX(ctx)
			}
		}
	}
	setBudget := `mutation($in: SetBudgetInput!) { setBudget(input: $in) { id } }`
	for _, in := range []map[string]any{
		{"monthlyLimitAmount": map[string]any{"amount": "50"}},
		{"userId": gidOf(t, b, "User", b.alice.UserID), "monthlyLimitAmount": map[string]any{"amount": "10"}},
		{"userId": gidOf(t, b, "User", b.bob.UserID), "monthlyLimitAmount": map[string]any{"amount": "1"}},
	} {
		b.do(t, b.alice.Token, setBudget, map[string]any{"in": in}).ok(t)
	}

	// The first turn: a call of every outcome, one with a long stored result.
	convID, err := gid.Decode(s.aliceConv)
	require.NoError(t, err)
	start := month.AddDate(0, 0, 13).Add(10 * time.Hour)
	tu := b.client.Turn.Create().SetConversationID(convID).SetNumber(1).SetUserText("What do 1,200 and 850 come to with a 20% markup? And what did the March report say?").
		SetAnswer("With a 20% markup, 1,200 and 850 come to 2,460. The March report's table is in the stored result.").
		SetStatus(turn.StatusCOMPLETED).SetTimeZone("Europe/Paris").SetStartedAt(start).SetFinishedAt(start.Add(4200 * time.Millisecond)).SaveX(ctx)
	var report strings.Builder
	for i := 1; report.Len() < 9000; i++ {
		fmt.Fprintf(&report, "row %d: region %c, revenue %d, margin %d%%\n", i, 'A'+rune(i%5), 1000+i*37, 10+i%13)
	}
	s.ref = "res-march-report"
	sr := b.client.StoredResult.Create().SetConversationID(convID).SetRef(s.ref).SetKind(schematype.KindText).
		SetContent([]byte(report.String())).SetChars(int64(report.Len())).SetBytes(int64(report.Len())).SetItems(1).SaveX(ctx)
	calls := []struct {
		name, args string
		outcome    schematype.Outcome
		failures   []schematype.ItemFailure
		message    string
	}{
		{name: "calculator", args: `{"expression":"(1200+850)*1.2"}`, outcome: schematype.OutcomeHits},
		{name: "run_code", args: `{"code":"console.log(toolResults[0].split('\\n').length)","toolResults":["res-march-report"]}`, outcome: schematype.OutcomeHits},
		{name: "search_tools", args: `{"queries":["march report","spreadsheet"]}`, outcome: schematype.OutcomeAbsence,
			failures: []schematype.ItemFailure{{Item: 1, Input: "spreadsheet", Kind: schematype.FailureAbsence, Message: "no tool matches"}}},
		{name: "research_web", args: `{"queries":["march report"]}`, outcome: schematype.OutcomeRefused, message: "research_web is not offered in this turn"},
		{name: "knowledge_search", args: `{"queries":["march report"]}`, outcome: schematype.OutcomeOutage,
			failures: []schematype.ItemFailure{{Item: 0, Input: "march report", Kind: schematype.FailureOutage, Message: "the embedding service did not answer"}},
			message:  "the search never ran: try again later"},
		{name: "calculator", args: `{"expression":"2460/0"}`, outcome: schematype.OutcomeError, message: "division by zero"},
	}
	for i, c := range calls {
		create := b.client.ToolCall.Create().SetTurnID(tu.ID).SetPosition(i).SetName(c.name).SetArguments(c.args).
			SetOutcome(c.outcome).SetAttempts(1).SetStartedAt(start.Add(time.Duration(i) * time.Second)).
			SetFinishedAt(start.Add(time.Duration(i)*time.Second + 300*time.Millisecond))
		if c.failures != nil {
			create.SetFailures(c.failures)
		}
		if c.message != "" {
			create.SetMessage(c.message)
		}
		if i == 1 {
			create.SetRef(s.ref).SetResultID(sr.ID)
		}
		create.ExecX(ctx)
	}
	b.client.ModelCall.Create().SetTurnID(tu.ID).SetOrganizationID(b.alice.OrganizationID).SetAgentID(gidInt(t, s.researcher)).
		SetUserID(b.alice.UserID).SetProvider("openai").SetModel("gpt-4.1").SetInputTokens(2400).SetOutputTokens(180).
		SetCostMicros(6_240).SetCost(0.00624).SetStartedAt(start).ExecX(ctx)
	s.bob = get(b.do(t, b.bob.Token, `{ viewer { id } }`, nil).ok(t), "viewer", "id").(string)
	s.spareToken = get(b.do(t, b.bob.Token, `mutation { createAPIToken(input: {name: "spare"}) { apiToken { id } } }`, nil).ok(t),
		"createAPIToken", "apiToken", "id").(string)
	return s
}

func gidInt(t testing.TB, id string) int {
	t.Helper()
	n, err := gid.Decode(id)
	require.NoError(t, err)
	return n
}

// gidOf is the global id of a row the test knows by its database id.
func gidOf(t testing.TB, b *testBundle, typ string, id int) string {
	t.Helper()
	d := b.do(t, b.alice.Token, `{ users { id name } }`, nil).ok(t)
	for _, u := range get(d, "users").([]any) {
		if n := gidInt(t, get(u, "id").(string)); n == id {
			return get(u, "id").(string)
		}
	}
	t.Fatalf("no %s %d", typ, id)
	return ""
}

// consoleVariables are the variables the test runs each console document
// with; a document missing here fails TestConsoleOperations.
func consoleVariables(s consoleSeed, l lifecycleSeed) map[string]map[string]any {
	return map[string]map[string]any{
		"turn_filters":          {"admin": true},
		"turn_ratings":          {"id": s.aliceConv},
		"knowledge":             nil,
		"update_agent":          {"input": map[string]any{"id": l.agent, "name": "Renamed agent", "tools": []any{"calculator"}}},
		"archive_agent":         {"id": l.agent, "archived": true},
		"delete_agent":          {"id": l.agent},
		"delete_document":       {"id": l.doc},
		"delete_knowledge_base": {"id": l.kb},
		"delete_skill":          {"id": l.skill},
		"viewer":                nil,
		"agents":                nil,
		"catalogue":             {"agentId": s.researcher},
		"usage":                 {"month": consoleMonth},
		"budgets":               nil,
		"turns":                 nil,
		"approvals":             nil,
		"ratings":               {"month": consoleMonth},
		"access":                {"admin": true},
		"revoke_token":          {"id": s.spareToken},
		"set_role":              {"id": s.bob, "admin": false},
		"deactivate_user":       {"id": s.bob},
		"reactivate_user":       {"id": s.bob},
		"transcript":            {"id": s.aliceConv},
		"read_result":           {"conversationId": s.aliceConv, "ref": s.ref, "offset": 0, "maxChars": 4000},
	}
}

// TestConsoleOperations runs every GraphQL document of the admin console,
// byte for byte as the browser sends it, against the real server: a schema
// change that breaks the console fails here.
func TestConsoleOperations(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, d *db.DB) {
		b := setup(t, d)
		s := seedConsole(t, b)
		vars := consoleVariables(s, seedLifecycle(t, b))
		ops := console.Operations()
		require.Len(t, vars, len(ops), "every document has its variables here")
		for name, doc := range ops {
			v, ok := vars[name]
			require.True(t, ok, "variables for %s", name)
			if strings.Contains(doc, "\nmutation ") {
				continue // below, in order
			}
			data := b.do(t, b.alice.Token, doc, v).ok(t)
			require.NotEmpty(t, data, name)
		}
		// The console's mutations, in an order that leaves Bob an active member.
		for _, name := range []string{"revoke_token", "set_role", "deactivate_user", "reactivate_user",
			"update_agent", "archive_agent", "delete_agent", "delete_document", "delete_knowledge_base", "delete_skill"} {
			require.NotEmpty(t, b.do(t, b.alice.Token, ops[name], vars[name]).ok(t), name)
		}

		usage := get(b.do(t, b.alice.Token, ops["usage"], vars["usage"]).ok(t), "usage")
		days := get(usage, "days").([]any)
		require.Len(t, days, 31, "every day of March")
		require.Equal(t, "2026-03-01", get(days, 0, "date"))
		require.Equal(t, "2026-03-31", get(days, 30, "date"))
		var sum, calls float64
		for _, day := range days {
			sum += get(day, "totals", "cost", "micros").(float64)
			calls += get(day, "totals", "modelCalls").(float64)
			var byModel float64
			for _, m := range get(day, "byModel").([]any) {
				byModel += get(m, "totals", "cost", "micros").(float64)
			}
			require.Equal(t, get(day, "totals", "cost", "micros"), byModel, "a day's models add up to the day")
		}
		require.Equal(t, get(usage, "totals", "cost", "micros"), sum, "the days add up to the month")
		require.Equal(t, get(usage, "totals", "modelCalls"), calls)
		require.Len(t, get(days, 3, "byUser").([]any), 1, "4 March: only Bob spent ((4+3)%7 == 0 for Alice)")
		require.Equal(t, "Bob", get(days, 3, "byUser", 0, "user", "name"))

		read := get(b.do(t, b.alice.Token, ops["read_result"], vars["read_result"]).ok(t), "toolResults", "reads", 0)
		require.EqualValues(t, 4000, get(read, "nextOffset"), "a window of 4,000 with more to read")
	})
}

// TestConsoleUsageStaysScoped: what the console shows is what the API lets
// the token reach. A member's token sees only their own usage, by day as by
// month, and only the budgets that are theirs or the organisation's; an
// admin's sees the organisation's; another organisation sees nothing.
func TestConsoleUsageStaysScoped(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, d *db.DB) {
		b := setup(t, d)
		s := seedConsole(t, b)
		ops := console.Operations()
		users := func(token string) (month, byDay []string) {
			u := get(b.do(t, token, ops["usage"], map[string]any{"month": consoleMonth}).ok(t), "usage")
			for _, g := range get(u, "byUser").([]any) {
				month = append(month, get(g, "user", "name").(string))
			}
			seen := map[string]bool{}
			for _, day := range get(u, "days").([]any) {
				for _, g := range get(day, "byUser").([]any) {
					if n := get(g, "user", "name").(string); !seen[n] {
						seen[n] = true
						byDay = append(byDay, n)
					}
				}
			}
			return month, byDay
		}
		month, byDay := users(b.alice.Token)
		require.ElementsMatch(t, []string{"Alice", "Bob"}, month, "an admin sees the organisation")
		require.ElementsMatch(t, []string{"Alice", "Bob"}, byDay)
		month, byDay = users(b.bob.Token)
		require.Equal(t, []string{"Bob"}, month, "a member sees their own usage only")
		require.Equal(t, []string{"Bob"}, byDay, "by day too")
		month, byDay = users(b.eve.Token)
		require.Empty(t, month, "another organisation sees nothing of it")
		require.Empty(t, byDay)

		bobTotal := get(b.do(t, b.bob.Token, ops["usage"], map[string]any{"month": consoleMonth}).ok(t), "usage", "totals", "cost", "micros")
		var bobByUser float64
		for _, g := range get(b.do(t, b.alice.Token, ops["usage"], map[string]any{"month": consoleMonth}).ok(t), "usage", "byUser").([]any) {
			if get(g, "user", "name") == "Bob" {
				bobByUser = get(g, "totals", "cost", "micros").(float64)
			}
		}
		require.Equal(t, bobByUser, bobTotal, "a member's totals are their own spend")

		whose := func(token string) []string {
			var out []string
			for _, bu := range get(b.do(t, token, ops["budgets"], nil).ok(t), "budgets").([]any) {
				if u, _ := get(bu, "user").(map[string]any); u != nil {
					out = append(out, u["name"].(string))
				} else {
					out = append(out, "organisation")
				}
			}
			return out
		}
		require.ElementsMatch(t, []string{"organisation", "Alice", "Bob"}, whose(b.alice.Token))
		require.ElementsMatch(t, []string{"organisation", "Bob"}, whose(b.bob.Token))
		require.Empty(t, whose(b.eve.Token))

		// Alice's conversation is not Bob's to read, nor its stored results.
		r := b.do(t, b.bob.Token, ops["transcript"], map[string]any{"id": s.aliceConv})
		require.Equal(t, "NOT_FOUND", r.code(t))
		r = b.do(t, b.bob.Token, ops["read_result"], map[string]any{"conversationId": s.aliceConv, "ref": s.ref})
		require.Equal(t, "NOT_FOUND", r.code(t))
		titles := func(token string) map[string]bool {
			seen := map[string]bool{}
			for _, e := range get(b.do(t, token, ops["turns"], nil).ok(t), "turns", "edges").([]any) {
				seen[get(e, "node", "conversation", "title").(string)] = true
			}
			return seen
		}
		require.Equal(t, map[string]bool{"Pipeline review": true}, titles(b.bob.Token), "a member's turns are their own")
		require.Len(t, titles(b.alice.Token), 2, "an admin's are the organisation's")
		require.Empty(t, titles(b.eve.Token), "another organisation's are none")
	})
}

// BenchmarkConsoleUsage: the console's month, as it asks for it (totals,
// the three breakdowns and every day of the month with theirs), on SQLite.
func BenchmarkConsoleUsage(b *testing.B) {
	tb := setup(b, dbtest.Open(b, dbtest.SQLite))
	seedConsole(b, tb)
	doc := console.Operations()["usage"]
	vars := map[string]any{"month": consoleMonth}
	for b.Loop() {
		tb.do(b, tb.alice.Token, doc, vars).ok(b)
	}
}

// TestLatestTurns: Query.turns lists the latest turns across conversations,
// newest first, pages on without repeating one, filters, and stays scoped.
func TestLatestTurns(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, d *db.DB) {
		b := setup(t, d)
		seedConsole(t, b)
		const q = `query($first: Int, $after: Cursor, $where: TurnWhereInput) {
			turns(first: $first, after: $after, where: $where) {
				totalCount
				pageInfo { hasNextPage endCursor }
				edges { node { id startedAt status conversation { title } } }
			}
		}`
		type row struct {
			id      string
			started time.Time
			status  string
		}
		walk := func(token string, where map[string]any) (rows []row, total float64) {
			var after any
			for {
				conn := get(b.do(t, token, q, map[string]any{"first": 7, "after": after, "where": where}).ok(t), "turns")
				total = get(conn, "totalCount").(float64)
				for _, e := range get(conn, "edges").([]any) {
					at, err := time.Parse(time.RFC3339Nano, get(e, "node", "startedAt").(string))
					require.NoError(t, err)
					rows = append(rows, row{get(e, "node", "id").(string), at, get(e, "node", "status").(string)})
				}
				if !get(conn, "pageInfo", "hasNextPage").(bool) {
					return rows, total
				}
				after = get(conn, "pageInfo", "endCursor")
			}
		}

		ctx := tenancy.System(t.Context())
		all := b.client.Turn.Query().AllX(ctx)
		rows, total := walk(b.alice.Token, nil)
		require.Len(t, rows, len(all), "an admin walks every turn of the organisation")
		require.EqualValues(t, len(all), total)
		seen := map[string]bool{}
		for i, r := range rows {
			require.False(t, seen[r.id], "no turn twice across pages")
			seen[r.id] = true
			if i > 0 {
				require.False(t, r.started.After(rows[i-1].started), "newest first: %v after %v", r.started, rows[i-1].started)
			}
		}

		bob, _ := walk(b.bob.Token, nil)
		require.NotEmpty(t, bob)
		require.Less(t, len(bob), len(rows), "a member walks their own turns only")
		eve, eveTotal := walk(b.eve.Token, nil)
		require.Empty(t, eve, "another organisation sees none")
		require.Zero(t, eveTotal)

		running, _ := walk(b.alice.Token, map[string]any{"status": "RUNNING"})
		for _, r := range running {
			require.Equal(t, "RUNNING", r.status)
		}
		completed, _ := walk(b.alice.Token, map[string]any{"status": "COMPLETED"})
		require.NotEmpty(t, completed)
		other := 0
		for _, r := range rows {
			if r.status != "RUNNING" && r.status != "COMPLETED" {
				other++
			}
		}
		require.Len(t, rows, len(running)+len(completed)+other, "where filters by status")

		over := b.do(t, b.alice.Token, `{ turns(first: 101) { totalCount } }`, nil)
		like := b.do(t, b.alice.Token, `{ conversations(first: 101) { totalCount } }`, nil)
		require.NotEmpty(t, over.code(t), "a page is at most 100")
		require.Equal(t, like.code(t), over.code(t), "refused as every connection refuses it")
	})
}

// TestConsoleCatalogueWithApplication: the console's catalogue document,
// as the browser sends it, shows an agent's application tools beside the
// built-in ones, measured from the application's own listing.
func TestConsoleCatalogueWithApplication(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, d *db.DB) {
		b := setup(t, d)
		b.withApps(t)
		url, _ := crmServer(t, 0)
		b.do(t, b.alice.Token, `mutation($u: String!) { registerApplication(input: {name: "crm", url: $u, allowedTools: ["lookup"]}) { id } }`,
			map[string]any{"u": url}).ok(t)
		agent := b.createAgentWith(t, b.alice.Token, "Finder", []any{"crm__lookup", "calculator"})
		c := get(b.do(t, b.alice.Token, console.Operations()["catalogue"], map[string]any{"agentId": agent}).ok(t), "catalogue")
		var app, web map[string]any
		for _, tool := range get(c, "tools").([]any) {
			switch get(tool, "name") {
			case "crm__lookup":
				app = tool.(map[string]any)
			case "research_web":
				web = tool.(map[string]any)
			}
		}
		require.NotNil(t, app, "the application's tool is listed")
		require.Nil(t, app["notOfferedReason"], "offered: no reason")
		require.Equal(t, "not in the agent's tools", web["notOfferedReason"], "the console shows why a tool is not offered")
		require.Equal(t, "application", app["family"])
		require.Equal(t, true, app["offered"])
		require.Positive(t, app["definitionChars"])
		require.Equal(t, app["definitionChars"], get(c, "applicationChars"), "the application's share is its tool's size")
		require.Positive(t, get(c, "applicationTokens"))
		require.Empty(t, get(c, "warnings"))
	})
}
