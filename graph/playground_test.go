package graph_test

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/db/dbtest"
	"github.com/toolgate/toolgate/graph/browsertest"
)

// browser returns the Chromium to drive (browsertest.Find).
func browser(t *testing.T) string { return browsertest.Find(t) }

// The playground loads with the network cut (every host but the server's
// refused), under its Content-Security-Policy, and runs a query.
func TestPlaygroundOffline(t *testing.T) {
	t.Parallel()
	exe := browser(t)
	b := setup(t, dbtest.Open(t, dbtest.SQLite))
	origin, err := url.Parse(b.srv.URL)
	require.NoError(t, err)

	res, err := http.Get(b.srv.URL + "/playground")
	require.NoError(t, err)
	page, _ := io.ReadAll(res.Body)
	res.Body.Close()
	require.Contains(t, res.Header.Get("Content-Security-Policy"), "script-src 'self' 'sha256-")
	require.NotContains(t, string(page), "cdn.")

	p := openPage(t, exe, origin.Hostname(), 60*time.Second)
	ctx := p.ctx

	const setEditors = `(() => {
		const editors = [...document.querySelectorAll('.CodeMirror')].map(e => e.CodeMirror);
		const query = document.querySelector('.graphiql-query-editor .CodeMirror').CodeMirror;
		query.setValue('{ viewer { name } }');
		const headers = editors.find(cm => cm.getValue().includes('Authorization'));
		headers.setValue(JSON.stringify({Authorization: 'Bearer ' + %q}));
		return true;
	})()`
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate(b.srv.URL+"/playground"),
		chromedp.WaitVisible(`.graphiql-execute-button`),
	))
	_, err = chromedp.Run(ctx, chromedp.Evaluate[bool](strings.Replace(setEditors, "%q", "'"+b.alice.Token+"'", 1)))
	require.NoError(t, err)
	require.NoError(t, chromedp.Do(ctx, chromedp.Click(`.graphiql-execute-button`)))
	answer, err := chromedp.Run(ctx, chromedp.Poll[string](
		`(() => { const r = document.querySelector('.result-window .CodeMirror'); return r && r.CodeMirror.getValue().includes('"name"') ? r.CodeMirror.getValue() : false })()`,
		chromedp.WithPollingTimeout(browserWait)))
	require.NoError(t, err)
	require.Contains(t, answer, `"name": "Alice"`)

	// A subscription goes over the websocket with the same headers: the
	// server reads the token from connection_init and answers the field
	// (this server runs no turns), rather than closing the socket 4401.
	_, err = chromedp.Run(ctx, chromedp.Evaluate[bool](`(() => {
		document.querySelector('.graphiql-query-editor .CodeMirror').CodeMirror.setValue('subscription { turnEvents(turnId: "dHVybjox") { kind } }');
		return true;
	})()`))
	require.NoError(t, err)
	require.NoError(t, chromedp.Do(ctx, chromedp.Click(`.graphiql-execute-button`)))
	sub, err := chromedp.Run(ctx, chromedp.Poll[string](
		`(() => { const r = document.querySelector('.result-window .CodeMirror'); const v = r && r.CodeMirror.getValue(); return v && !v.includes('"Alice"') ? v : false })()`,
		chromedp.WithPollingTimeout(browserWait)))
	require.NoError(t, err)
	t.Log(sub)
	require.NotContains(t, sub, "4401")
	require.NotContains(t, strings.ToLower(sub), "unauthenticated")
	require.Contains(t, sub, "errors")
	p.onlyServer(b.srv.URL)
}

// browserWait bounds a browser test's wait for the page to show what it
// should: a minute, since a loaded machine running the whole suite under
// the race detector has taken the half of it.
const browserWait = time.Minute
