package graph_test

import (
	"context"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/db/dbtest"
	"github.com/toolgate/toolgate/ent/schematype"
	"github.com/toolgate/toolgate/ent/tenancy"
	"github.com/toolgate/toolgate/ent/turn"
	"github.com/toolgate/toolgate/ent/turnrating"
	"github.com/toolgate/toolgate/graph/gid"
)

// TestConsoleTurnsAndEstimates drives the console's turns list past its
// first page of 50 and through its filters (status, a range of UTC days),
// checks the tool-call counts read as English ("2 hits", "1 absence"), and
// that a month with replayed calls says its cost is estimated, and that
// the Cost view's button downloads the month as CSV and its Ratings panel
// shows the month's ratings by agent and model; People & tokens
// deactivates, reactivates and promotes a person and revokes a token.
func TestConsoleTurnsAndEstimates(t *testing.T) {
	t.Parallel()
	exe := browser(t)
	b := setup(t, dbtest.Open(t, dbtest.SQLite))
	s := seedConsole(t, b)
	ctx := tenancy.System(context.Background())
	convID, err := gid.Decode(s.aliceConv)
	require.NoError(t, err)
	c := b.client.Conversation.GetX(ctx, convID)
	at := time.Date(2026, 3, 14, 12, 0, 0, 0, time.UTC)
	tu := b.client.Turn.Create().SetConversationID(convID).SetNumber(90).SetUserText("a replayed question").SetStartedAt(at).SaveX(ctx)
	b.client.ModelCall.Create().SetTurnID(tu.ID).SetOrganizationID(c.OrganizationID).SetAgentID(c.AgentID).SetUserID(c.UserID).
		SetProvider("replay").SetModel("replay").SetInputTokens(900).SetOutputTokens(40).SetCostMicros(schematype.Micros(2_120)).
		SetCost(schematype.Micros(2_120).USD()).SetStartedAt(at).ExecX(ctx)
	b.client.TurnRating.Create().SetOrganizationID(c.OrganizationID).SetUserID(c.UserID).SetTurnID(tu.ID).SetAgentID(c.AgentID).
		SetRating(turnrating.RatingDOWN).SetComment("The total was wrong.").SetCreatedAt(at).SetUpdatedAt(at).ExecX(ctx)
	total := b.client.Turn.Query().CountX(ctx)
	require.Greater(t, total, 50, "more turns than one page")

	origin, err := url.Parse(b.srv.URL)
	require.NoError(t, err)
	p := openPage(t, exe, origin.Hostname(), 90*time.Second, chromedp.Env("TZ=UTC"), chromedp.WindowSize(1360, 900))
	do, eval, wait := p.do, p.eval, p.wait
	rows := func() int {
		t.Helper()
		return p.count(`#turns-pages tr.turn-row`)
	}
	waitRows := func(n int) {
		t.Helper()
		require.Eventually(t, func() bool { return rows() == n }, 30*time.Second, 100*time.Millisecond, "%d rows", n)
	}
	// setValue changes a form field as a person does, so Preact hears it.
	setValue := func(sel, v string) {
		t.Helper()
		eval(`(() => { const e = document.querySelector(` + quote(sel) + `); e.value = ` + quote(v) + `; e.dispatchEvent(new Event('change', {bubbles: true})); return '' })()`)
	}

	do(chromedp.Navigate(b.srv.URL + "/admin#token=" + b.alice.Token))
	wait(`#viewer`, "Alice")
	eval(`(location.hash = '#/turns', '')`)
	wait(`#turns-count`, "turns of the organisation")
	require.Contains(t, eval(`document.querySelector('#turns-count').textContent`), strconv.Itoa(total)+" turns")
	waitRows(50)
	outcomes := eval(`document.querySelector('#turns').textContent`)
	require.Contains(t, outcomes, "2 hits")
	require.Contains(t, outcomes, "1 absence")
	require.NotContains(t, outcomes, "1 absences")

	// The next page, then the end.
	do(chromedp.Click(`#turns-more`))
	waitRows(total)
	require.Equal(t, "0", eval(`String(document.querySelectorAll('#turns-more').length)`), "no more pages")

	// Filters: a status, then a range of days.
	setValue(`#filter-status`, "RUNNING")
	wait(`#turns-count`, "1 turn of the organisation match the filters")
	waitRows(1)
	wait(`#turns`, "a replayed question")
	setValue(`#filter-status`, "")
	setValue(`#filter-from`, "2026-03-14")
	setValue(`#filter-to`, "2026-03-14")
	from := time.Date(2026, 3, 14, 0, 0, 0, 0, time.UTC)
	day := b.client.Turn.Query().Where(turn.StartedAtGTE(from), turn.StartedAtLT(from.AddDate(0, 0, 1))).CountX(ctx)
	require.Greater(t, day, 1)
	waitRows(day)
	require.Contains(t, eval(`document.querySelector('#turns-count').textContent`), "match the filters")

	// The month with a replayed call: its cost says it is estimated.
	eval(`(location.hash = '#/cost/2026-03', '')`)
	wait(`#estimated-note`, "estimates")
	wait(`#breakdown-model`, "replay (estimated)")
	// The month's ratings, by agent and model, with the comment.
	wait(`#ratings-by-agent`, "Research assistant")
	wait(`#ratings-by-model`, "replay")
	wait(`#ratings-comments`, "The total was wrong.")
	wait(`#ratings-total`, "0 ratings up, 1 down")

	// The month's usage as CSV, from the button: alice's conversation has
	// three models (gpt-4.1, claude-sonnet-4-5, replay), bob's one.
	do(chromedp.Click(`#export-csv`))
	wait(`#export-status`, "Downloaded toolgate-usage-2026-03.csv (4 rows: one per user, agent and model)")

	// A superseded turn says so in its transcript.
	b.client.Turn.UpdateOneID(tu.ID).SetSuperseded(true).ExecX(ctx)
	eval(`(location.hash = '#/conversations/` + s.aliceConv + `', '')`)
	wait(`#turn-90`, "superseded")

	// People & tokens: deactivate Bob and bring him back, make him an
	// admin, revoke his spare token.
	eval(`(location.hash = '#/access', '')`)
	wait(`#users`, "Bob")
	row := `#user-` + s.bob
	do(chromedp.Click(row + ` button.deactivate`))
	wait(`#access-message`, "Bob is deactivated")
	require.Equal(t, "UNAUTHENTICATED", b.do(t, b.bob.Token, `{ viewer { id } }`, nil).code(t))
	wait(row, "deactivated")
	do(chromedp.Click(row + ` button.reactivate`))
	wait(`#access-message`, "Bob is active again")
	require.Equal(t, s.bob, get(b.do(t, b.bob.Token, `{ viewer { id } }`, nil).ok(t), "viewer", "id"))
	// The list is read again after each change: click the row it shows
	// once it has, not the one it replaces.
	do(chromedp.WaitVisible(row + ` button.deactivate`))
	do(chromedp.Click(row + ` button.role`))
	wait(`#access-message`, "Bob is now an admin")
	require.Equal(t, true, get(b.do(t, b.bob.Token, `{ viewer { admin } }`, nil).ok(t), "viewer", "admin"))
	wait(row+` button.role`, "Make member")
	wait(`#token-list`, "spare")
	do(chromedp.Click(`#token-` + s.spareToken + ` button.revoke`))
	wait(`#access-message`, "“spare” is revoked")
	wait(`#token-`+s.spareToken, "revoked")
}
