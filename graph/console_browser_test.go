package graph_test

import (
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/db/dbtest"
)

// Where the console's screenshots go: TOOLGATE_SCREENSHOTS, or a temporary
// folder the test logs. TOOLGATE_UPDATE_DOCS=1 also writes the README's
// screenshots under docs/.
func screenshotDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("TOOLGATE_SCREENSHOTS")
	if dir == "" {
		dir = t.TempDir()
	}
	require.NoError(t, os.MkdirAll(dir, 0o755))
	t.Logf("screenshots in %s", dir)
	return dir
}

// TestAdminConsoleInBrowser drives Chromium, with the network cut but for
// the server, through the admin console: the sign-in (a refused token stays
// out, a good one gets in, #token= signs in and leaves the address bar),
// the catalogue against the ceilings, the cost of a seeded month by day and
// by model, agent and user, the budgets, the turns, a transcript and a
// stored result read in windows; then a member's view of the same month.
// Nothing breaks the page's Content-Security-Policy and nothing but the
// server is asked for anything.
func TestAdminConsoleInBrowser(t *testing.T) {
	t.Parallel()
	exe := browser(t)
	b := setup(t, dbtest.Open(t, dbtest.SQLite))
	s := seedConsole(t, b)
	origin, err := url.Parse(b.srv.URL)
	require.NoError(t, err)
	dir := screenshotDir(t)

	p := openPage(t, exe, origin.Hostname(), 120*time.Second,
		chromedp.Flag("lang", "en-GB"),
		chromedp.Env("TZ=UTC"),
		chromedp.WindowSize(1360, 900),
	)
	ctx := p.ctx
	admin := b.srv.URL + "/admin"
	do, eval, count, wait := p.do, p.eval, p.count, p.wait
	// hash moves within the page, as a link does.
	hash := func(h string) {
		t.Helper()
		eval(`(location.hash = ` + quote(h) + `, '')`)
	}
	shot := func(name string, full bool) []byte {
		t.Helper()
		// Let the last frame paint.
		do(chromedp.Sleep(150 * time.Millisecond))
		var png []byte
		var err error
		if full {
			png, err = chromedp.Run(ctx, chromedp.FullScreenshot(100))
		} else {
			png, err = chromedp.Run(ctx, chromedp.CaptureScreenshot())
		}
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), png, 0o644))
		return png
	}

	// No token: the sign-in. A refused token: the sign-in again, saying so.
	do(chromedp.Navigate(admin), chromedp.WaitVisible(`#signin`))
	shot("01-sign-in.png", false)
	do(chromedp.SendKeys(`#token`, "tg_not_a_token"), chromedp.Click(`#signin`))
	wait(`#signin-message`, "refused")
	require.Empty(t, eval(`sessionStorage.getItem('toolgate.admin.token') || ''`), "a refused token is not kept")

	// A good token: the catalogue of the first agent, against both ceilings.
	do(chromedp.SendKeys(`#token`, b.alice.Token), chromedp.Click(`#signin`))
	wait(`#viewer`, "Alice")
	wait(`#catalogue`, "Widest catalogue")
	wait(`#tool-chart`, "run_code")
	require.Equal(t, 2, count(`#ceiling-chart .limit line`), "the two ceilings drawn as lines")
	require.Equal(t, 3, count(`#ceiling-chart text.row-label`), "always paid, the agent's deck, the widest")
	require.Greater(t, count(`#ceiling-chart rect.segment`), 6, "bars stacked by family")
	require.Greater(t, count(`#tool-chart .tool-row`), 20, "every tool, grouped by family")
	require.Greater(t, count(`#tool-chart .family`), 5)
	require.Contains(t, eval(`document.querySelector('#catalogue').textContent`), "Headroom")
	require.Contains(t, eval(`document.querySelector('#tool-chart').textContent`), "not offered: the agent binds no published skill",
		"a tool not offered says why")
	require.NotContains(t, eval(`document.querySelector('#tool-chart').textContent`), "not offered: not in the agent's tools",
		"what the dimmed row says is not spelt out")
	require.Equal(t, s.researcher, eval(`document.querySelector('#agent').value`))
	catalogue := shot("02-catalogue.png", false)
	shot("02-catalogue-whole.png", true)

	// The seeded month: cost by day stacked by model, tokens by day, the
	// breakdowns, budgets near and over, the UTC months said on the page.
	hash("#/cost/" + consoleMonth)
	wait(`#utc-note`, "UTC")
	wait(`#utc-note`, "March 2026")
	wait(`#cost-by-day`, "Cost by day")
	require.Equal(t, consoleMonth, eval(`document.querySelector('#month').value`))
	require.Equal(t, 31, count(`#cost-chart g.column`), "a column for every day of March")
	require.Greater(t, count(`#cost-chart g.column rect:not(.hit)`), 50, "days stacked by model")
	require.Greater(t, count(`#token-chart g.column rect:not(.hit)`), 100, "days stacked by kind of token")
	legend := eval(`document.querySelector('#cost-by-day .legend').textContent`)
	for _, m := range []string{"gpt-4.1", "claude-sonnet-4-5", "gpt-4.1-mini"} {
		require.Contains(t, legend, m)
	}
	wait(`#breakdown-agent`, "Research assistant")
	wait(`#breakdown-user`, "Bob")
	wait(`#budgets`, "The organisation")
	require.Equal(t, 1, count(`#budgets .budget.over`), "Bob is over his limit")
	require.Equal(t, 1, count(`#budgets .budget.near`), "Alice is near hers")
	cost := shot("03-cost.png", true)
	do(chromedp.Click(`#by-user`))
	wait(`#cost-by-day .legend`, "Alice")
	shot("04-cost-by-user.png", false)
	do(chromedp.Click(`#next-month`))
	wait(`#usage`, "No model calls in April 2026")
	require.Contains(t, eval(`location.hash`), "2026-04")

	// The turns, then a transcript and a stored result read in windows.
	do(chromedp.Click(`#nav-turns`))
	wait(`#turns`, "Quarterly numbers")
	require.Greater(t, count(`#turns .chip.hits`), 0)
	shot("05-turns.png", false)
	hash("#/conversations/" + s.aliceConv)
	wait(`#turn-1`, "20% markup")
	for _, outcome := range []string{"hits", "absence", "refused", "outage", "error"} {
		require.Greater(t, count(`#turn-1 .chip.`+outcome), 0, outcome)
	}
	wait(`#turn-1`, "res-march-report")
	require.Equal(t, "turn-1", eval(`document.querySelector('article.turn').id`), "turns in order of their numbers")
	shot("06-transcript.png", false)
	do(chromedp.Click(`#turn-1 button.read`))
	wait(`#result-window`, "row 1: region")
	wait(`#window-range`, "characters 0–4,000 of")
	shot("07-stored-result.png", false)
	do(chromedp.Click(`#window-next`))
	wait(`#window-range`, "characters 4,000–8,000 of")

	// Sign out; #token= signs in and leaves nothing in the address bar.
	do(chromedp.Click(`#result-window button[aria-label=Close]`))
	// A conversation that is not there (or not the token's): the error state.
	hash("#/conversations/tg0000000000000")
	wait(`.state.error`, "not found")
	require.Equal(t, 1, count(`.state.error button`), "with a way to try again")
	do(chromedp.Click(`#signout`), chromedp.WaitVisible(`#signin`))
	require.Empty(t, eval(`sessionStorage.getItem('toolgate.admin.token') || ''`), "signing out forgets the token")
	do(chromedp.Navigate("about:blank"), chromedp.Navigate(admin+"#token="+b.bob.Token))
	wait(`#viewer`, "Bob")
	require.Equal(t, admin, eval(`location.href`), "the token left the address bar")
	require.NotContains(t, eval(`JSON.stringify(history.state) + document.referrer`), b.bob.Token)
	require.Equal(t, b.bob.Token, eval(`sessionStorage.getItem('toolgate.admin.token')`))
	require.NotContains(t, eval(`localStorage.length + document.cookie`), "tg_", "nothing outside the tab's session")
	// A member sees their own usage only.
	hash("#/cost/" + consoleMonth)
	wait(`#utc-note`, "your own usage")
	wait(`#breakdown-user`, "Bob")
	require.NotContains(t, eval(`document.querySelector('#breakdown-user').textContent`), "Alice")

	// A token that stops working sends the page back to the sign-in.
	do(chromedp.Navigate("about:blank"), chromedp.Navigate(admin+"#token=tg_revoked_or_expired"))
	wait(`#signin-message`, "refused")

	require.Equal(t, "[]", eval(`JSON.stringify(window.cspViolations)`), "nothing broke the Content-Security-Policy")
	p.onlyServer(b.srv.URL)

	if os.Getenv("TOOLGATE_UPDATE_DOCS") != "" {
		require.NoError(t, os.WriteFile("../docs/admin.png", cost, 0o644))
		require.NoError(t, os.WriteFile("../docs/admin-catalogue.png", catalogue, 0o644))
	}
}

// quote is a JavaScript string literal of s.
func quote(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}
