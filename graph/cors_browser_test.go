package graph_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/db/dbtest"
	"github.com/toolgate/toolgate/graph"
	"github.com/toolgate/toolgate/graph/browsertest"
	"github.com/toolgate/toolgate/graph/gid"
	"github.com/toolgate/toolgate/runtime/loop"
)

// portalPage is a portal's page: with the API's address, a token and a
// conversation, it runs a query, a mutation (sendMessage) and a
// subscription over graphql-transport-ws and over Server-Sent Events (the
// turn's events), as a portal would from its own origin, and reports what
// each got or how it failed.
const portalPage = `<!doctype html><meta charset="utf-8"><title>portal</title><script>
window.runPortal = async (api, token, conversationId) => {
  const out = {};
  const gql = async (query, variables) => {
    const r = await fetch(api + '/graphql', {method: 'POST', headers: {'Content-Type': 'application/json', 'Authorization': 'Bearer ' + token}, body: JSON.stringify({query, variables})});
    const body = await r.json();
    if (body.errors) throw new Error(body.errors[0].message);
    return body.data;
  };
  try { out.query = (await gql('{ viewer { name } }')).viewer.name; } catch (e) { out.query = 'error: ' + e.message; }
  let turnId = 'VHVybjox';
  try {
    const t = (await gql('mutation($c: ID!) { sendMessage(input: {conversationId: $c, text: "from the portal"}) { id status } }', {c: conversationId})).sendMessage;
    turnId = t.id;
    out.mutation = t.status;
  } catch (e) { out.mutation = 'error: ' + e.message; }
  out.subscription = await new Promise((resolve) => {
    const ws = new WebSocket(api.replace(/^http/, 'ws') + '/graphql', 'graphql-transport-ws');
    const timer = setTimeout(() => { resolve('error: timed out'); ws.close(); }, 10000);
    ws.onopen = () => ws.send(JSON.stringify({type: 'connection_init', payload: {Authorization: 'Bearer ' + token}}));
    ws.onmessage = (m) => {
      const msg = JSON.parse(m.data);
      if (msg.type === 'connection_ack') {
        ws.send(JSON.stringify({id: '1', type: 'subscribe', payload: {query: 'subscription($t: ID!) { turnEvents(turnId: $t) { kind turn { status } } }', variables: {t: turnId}}}));
      } else if (msg.type === 'next') {
        clearTimeout(timer);
        resolve(msg.payload.data ? msg.payload.data.turnEvents.kind + ' ' + msg.payload.data.turnEvents.turn.status : 'error: ' + JSON.stringify(msg.payload.errors));
        ws.close();
      } else if (msg.type === 'error') {
        clearTimeout(timer);
        resolve('error: ' + JSON.stringify(msg.payload));
        ws.close();
      }
    };
    ws.onclose = (e) => { clearTimeout(timer); resolve('error: closed ' + e.code); };
  });
  // The same subscription over Server-Sent Events (graphql-sse's
  // distinct connections mode): one POST whose answer is the event stream.
  try {
    const ctrl = new AbortController();
    const timer = setTimeout(() => ctrl.abort(), 10000);
    const r = await fetch(api + '/graphql', {method: 'POST', signal: ctrl.signal, headers: {'Content-Type': 'application/json', 'Accept': 'text/event-stream', 'Authorization': 'Bearer ' + token},
      body: JSON.stringify({query: 'subscription($t: ID!) { turnEvents(turnId: $t) { kind turn { status } } }', variables: {t: turnId}})});
    const reader = r.body.pipeThrough(new TextDecoderStream()).getReader();
    let buf = '';
    out.sse = 'error: no event';
    for (;;) {
      const {value, done} = await reader.read();
      if (done) break;
      buf += value;
      const m = buf.match(/^data: ?(.*)$/m);
      if (m) {
        const e = JSON.parse(m[1]);
        out.sse = e.data ? e.data.turnEvents.kind + ' ' + e.data.turnEvents.turn.status : 'error: ' + JSON.stringify(e.errors);
        break;
      }
    }
    clearTimeout(timer);
    ctrl.abort();
  } catch (e) { out.sse = 'error: ' + e.message; }
  return out;
};
</script><p>portal</p>`

// A page served from another origin, in headless Chromium, runs a query, a
// mutation and a subscription against the API when the API lists its
// origin, and fails at all of them when it does not: the browser keeps the
// answers from the page (the event stream's too), and the websocket is
// refused.
func TestCORSInBrowser(t *testing.T) {
	t.Parallel()
	exe := browser(t)
	page := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = io.WriteString(w, portalPage)
	}))
	t.Cleanup(page.Close)
	d := dbtest.Open(t, dbtest.SQLite)
	// A runner that is never opened: turns stay RUNNING, and their events
	// are served.
	runner, err := loop.New(loop.Config{Client: d.Client(), Queue: d.Queue(), EncodeID: gid.Encode})
	require.NoError(t, err)
	allowed := setupWith(t, d, func(c *graph.Config) {
		c.Runner = runner
		c.Portal.CORSOrigins = mustOrigins(t, page.URL)
	})
	refused := setupWith(t, d, func(c *graph.Config) {
		c.Runner = runner
		c.Portal.CORSOrigins = mustOrigins(t, "https://portal.example.com")
	})
	require.NotEqual(t, page.URL, allowed.srv.URL, "the page is of another origin than the API")

	ctx := browsertest.Start(t, exe, "127.0.0.1", 90*time.Second, nil)
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(page.URL)))

	run := func(b *testBundle) map[string]string {
		agent := b.createAgent(t, b.alice.Token, "Portal agent")
		conv := b.startConversation(t, b.alice.Token, agent, "from the browser")
		expr := `runPortal(` + jsString(b.srv.URL) + `, ` + jsString(b.alice.Token) + `, ` + jsString(conv) + `)`
		out, err := chromedp.Run(ctx, chromedp.Evaluate[map[string]string](expr, chromedp.EvalAwaitPromise))
		require.NoError(t, err)
		return out
	}
	got := run(allowed)
	require.Equal(t, map[string]string{"query": "Alice", "mutation": "RUNNING", "subscription": "STATUS RUNNING", "sse": "STATUS RUNNING"}, got)

	got = run(refused)
	t.Logf("refused origin: %v", got)
	require.True(t, strings.HasPrefix(got["query"], "error: "), got["query"])
	require.True(t, strings.HasPrefix(got["mutation"], "error: "), got["mutation"])
	require.True(t, strings.HasPrefix(got["subscription"], "error: closed"), got["subscription"])
	require.True(t, strings.HasPrefix(got["sse"], "error: "), got["sse"])
}

func jsString(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `'`, `\'`, "\n", `\n`, "<", `\x3c`)
	return "'" + r.Replace(s) + "'"
}
