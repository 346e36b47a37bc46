package graph_test

import (
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/db/dbtest"
	"github.com/toolgate/toolgate/graph/browsertest"
)

// The playground signs in from /playground#token=…: the token lands in the
// Headers pane and leaves the address bar, the schema is fetched with it
// (and not before: a page without a token asks for none), and the headers
// survive a reload.
func TestPlaygroundTokenFromAddress(t *testing.T) {
	t.Parallel()
	exe := browser(t)
	b := setup(t, dbtest.Open(t, dbtest.SQLite))
	origin, err := url.Parse(b.srv.URL)
	require.NoError(t, err)

	var (
		mu             sync.Mutex
		introspections []string // the Authorization header of each schema fetch
	)
	ctx := browsertest.Start(t, exe, origin.Hostname(), 90*time.Second, func(ev any) {
		e, ok := ev.(*network.EventRequestWillBeSent)
		if !ok || !strings.HasSuffix(e.Request.URL, "/graphql") {
			return
		}
		var body strings.Builder
		for _, p := range e.Request.PostDataEntries {
			body.Write(p.Bytes)
		}
		if !strings.Contains(body.String(), "IntrospectionQuery") {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		auth := ""
		for k, v := range e.Request.Headers {
			if strings.EqualFold(k, "Authorization") {
				auth, _ = v.(string)
			}
		}
		introspections = append(introspections, auth)
	})
	fetched := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), introspections...)
	}
	headersText := `(() => { const cm = [...document.querySelectorAll('.CodeMirror')].map(e => e.CodeMirror).find(cm => cm.getValue().includes('Authorization')); return cm ? cm.getValue() : '' })()`

	_, err = chromedp.Call(ctx, network.Enable, network.EnableParams{})
	require.NoError(t, err)
	// Without a token: the page waits, and asks for no schema.
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(b.srv.URL+"/playground"), chromedp.WaitVisible(`.graphiql-execute-button`)))
	state, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById('graphiql').dataset.schema`))
	require.NoError(t, err)
	require.Equal(t, "waiting", state)
	time.Sleep(time.Second)
	time.Sleep(2 * time.Second)
	require.Empty(t, fetched(), "no schema fetch without a token")

	// With #token=: signed in, the token out of the address bar, the schema fetched with it.
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(b.srv.URL+"/playground#token="+b.alice.Token), chromedp.WaitVisible(`.graphiql-execute-button`)))
	loc, err := chromedp.Run(ctx, chromedp.Evaluate[string](`location.href`))
	require.NoError(t, err)
	require.Equal(t, b.srv.URL+"/playground", loc)
	require.Eventually(t, func() bool { return len(fetched()) > 0 }, 30*time.Second, 100*time.Millisecond)
	require.Equal(t, "Bearer "+b.alice.Token, fetched()[0])
	text, err := chromedp.Run(ctx, chromedp.Evaluate[string](headersText))
	require.NoError(t, err)
	require.Contains(t, text, "Bearer "+b.alice.Token)

	// A reload keeps the headers, and fetches the schema again with them.
	n := len(fetched())
	require.NoError(t, chromedp.Do(ctx, chromedp.Reload(), chromedp.WaitVisible(`.graphiql-execute-button`)))
	require.Eventually(t, func() bool { return len(fetched()) > n }, 30*time.Second, 100*time.Millisecond)
	require.Equal(t, "Bearer "+b.alice.Token, fetched()[n])
	text, err = chromedp.Run(ctx, chromedp.Evaluate[string](headersText))
	require.NoError(t, err)
	require.Contains(t, text, "Bearer "+b.alice.Token)
}
