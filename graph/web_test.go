package graph_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/db"
	"github.com/toolgate/toolgate/db/dbtest"
	"github.com/toolgate/toolgate/graph"
	"github.com/toolgate/toolgate/runtime/retry"
	"github.com/toolgate/toolgate/tools/web"
)

// withWeb returns the bundle served again by a server with a SearXNG
// provider (on loopback, as are the pages it finds).
func (b *testBundle) withWeb(t *testing.T) *testBundle {
	t.Helper()
	pages := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/robots.txt" {
			http.NotFound(w, r)
			return
		}
		_, _ = io.WriteString(w, `<html><head><title>Tides</title></head><body><article><h1>Tides</h1><p>`+
			`Tides are the rise and fall of sea levels caused by the Moon and the Sun. `+
			`Most places see two high tides and two low tides each day, a little later each day.</p></article></body></html>`)
	}))
	t.Cleanup(pages.Close)
	searx := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]any{"query": r.URL.Query().Get("q"), "results": []map[string]any{
			{"url": pages.URL + "/tides", "title": "Tides", "content": "rise and fall", "engine": "brave"},
		}})
	}))
	t.Cleanup(searx.Close)
	svc, err := web.New(web.Config{Provider: web.SearXNG, URL: searx.URL, AllowPrivate: "127.0.0.1/32", Client: searx.Client()})
	require.NoError(t, err)
	wb := *b
	wb.srv = httptest.NewServer(graph.NewServer(graph.Config{DB: b.db, Signer: b.signer, Web: svc}))
	t.Cleanup(wb.srv.Close)
	return &wb
}

const offeredQuery = `query($a: ID) { catalogue(agentId: $a) { tools { name offered } } }`

func offeredWeb(t *testing.T, b *testBundle, token, agent string) []bool {
	t.Helper()
	var out []bool
	for _, tool := range get(b.do(t, token, offeredQuery, map[string]any{"a": agent}).ok(t), "catalogue", "tools").([]any) {
		m := tool.(map[string]any)
		if m["name"] == "research_web" || m["name"] == "read_page" {
			out = append(out, m["offered"].(bool))
		}
	}
	return out
}

// TestWebOfferedOnlyWhenEnabled: the web tools are offered when the server
// has a provider AND the organisation's admin enabled it, and only to
// agents that list them; only an admin turns it on, for their own
// organisation only; a call where it is off is refused.
func TestWebOfferedOnlyWhenEnabled(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, d *db.DB) {
		plain := setup(t, d)
		b := plain.withWeb(t)
		researcher := b.createAgentWith(t, b.alice.Token, "Researcher", []any{"research_web", "read_page"})
		bare := b.createAgentWith(t, b.alice.Token, "Bare", []any{})
		conv := b.startConversation(t, b.alice.Token, researcher, "tides")
		const update = `mutation($on: Boolean) { updateOrganization(input: {webResearch: $on}) { name webResearch } }`

		// Off by default: not offered, and a call is refused.
		require.Equal(t, []bool{false, false}, offeredWeb(t, b, b.alice.Token, researcher))
		off := b.call(t, b.alice.Token, "research_web", conv, map[string]any{"queries": []string{"tides"}})
		require.Equal(t, "BAD_USER_INPUT", off.code(t))
		require.Contains(t, string(off.Raw), "web research is not enabled for this organisation")

		// A member may not turn it on; the admin may.
		require.Equal(t, "FORBIDDEN", b.do(t, b.bob.Token, update, map[string]any{"on": true}).code(t))
		require.Equal(t, map[string]any{"name": "Acme", "webResearch": true},
			get(b.do(t, b.alice.Token, update, map[string]any{"on": true}).ok(t), "updateOrganization"))
		require.Equal(t, []bool{true, true}, offeredWeb(t, b, b.bob.Token, researcher))
		require.Equal(t, []bool{false, false}, offeredWeb(t, b, b.alice.Token, bare), "the allowlist still decides")
		// The same organisation on a server with no provider: not offered.
		require.Equal(t, []bool{false, false}, offeredWeb(t, plain, b.alice.Token, researcher))

		// Another organisation's switch is its own.
		evilAgent := b.createAgentWith(t, b.eve.Token, "Researcher", []any{"research_web", "read_page"})
		require.Equal(t, []bool{false, false}, offeredWeb(t, b, b.eve.Token, evilAgent))

		// On: the tools run, by hand with an API token and through a turn's scope token.
		res := get(b.call(t, b.alice.Token, "research_web", conv, map[string]any{"queries": []string{"tides"}, "maxPages": 1}).ok(t), "researchWeb").(map[string]any)
		require.Empty(t, res["failures"])
		page := get(res, "results", 0, "pages", 0).(map[string]any)
		require.Contains(t, page["text"], "Most places see two high tides")
		scoped := b.scopeToken(t, conv, "research_web", "read_page")
		read := get(b.call(t, scoped, "read_page", conv, map[string]any{"url": page["url"], "maxChars": 500}).ok(t), "readPage").(map[string]any)
		require.Equal(t, page["url"], read["url"])
		require.Equal(t, false, read["truncated"])
		refused := b.call(t, scoped, "read_page", conv, map[string]any{"url": "http://169.254.169.254/latest/meta-data/"})
		require.Equal(t, "BAD_USER_INPUT", refused.code(t))
		require.Contains(t, string(refused.Raw), "refused by rule no private addresses")

		// Eve cannot read through Alice's conversation: not found, as if it never was.
		foreign := b.call(t, b.eve.Token, "read_page", conv, map[string]any{"url": page["url"]})
		require.Equal(t, "NOT_FOUND", foreign.code(t))

		// Turned off again mid-conversation: refused, even with a scope token.
		b.do(t, b.alice.Token, update, map[string]any{"on": false}).ok(t)
		again := b.call(t, scoped, "read_page", conv, map[string]any{"url": page["url"]})
		require.Contains(t, string(again.Raw), "web research is not enabled")
	})
}

// TestReadPageTellsOutcomesAndAttempts: by hand, readPage of a site that
// answers 503 twice reads the page, the "attempts" extension saying it
// took three; a site that stays down is an OUTAGE error after four; a
// page that is not there an ABSENCE error, asked once.
func TestReadPageTellsOutcomesAndAttempts(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, d *db.DB) {
		b := setup(t, d)
		var down, asked atomic.Int32
		pages := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/robots.txt" {
				http.NotFound(w, r)
				return
			}
			asked.Add(1)
			switch {
			case down.Add(-1) >= 0:
				http.Error(w, "busy", http.StatusServiceUnavailable)
			case r.URL.Path == "/gone":
				http.NotFound(w, r)
			default:
				_, _ = io.WriteString(w, `<html><head><title>Tides</title></head><body><article><p>The tide comes in twice a day.</p></article></body></html>`)
			}
		}))
		t.Cleanup(pages.Close)
		svc, err := web.New(web.Config{Provider: web.SearXNG, URL: pages.URL, AllowPrivate: "127.0.0.1/32",
			Retry: retry.Backend(retry.Policy{Sleep: retry.NoWait})})
		require.NoError(t, err)
		b.srv = httptest.NewServer(graph.NewServer(graph.Config{DB: b.db, Signer: b.signer, Web: svc}))
		t.Cleanup(b.srv.Close)
		b.do(t, b.alice.Token, `mutation { updateOrganization(input: {webResearch: true}) { webResearch } }`, nil).ok(t)
		conv := b.startConversation(t, b.alice.Token, b.createAgentWith(t, b.alice.Token, "Researcher", []any{"read_page"}), "tides")
		attempts := func(r *response) any {
			var out struct {
				Extensions map[string]any `json:"extensions"`
			}
			require.NoError(t, json.Unmarshal(r.Raw, &out))
			return out.Extensions["attempts"]
		}
		tests := []struct {
			path      string
			down      int32
			code      string
			attempts  any
			wantAsked int32
		}{
			{"/tides", 2, "", 3.0, 3},
			{"/tides", 4, "OUTAGE", 4.0, 4},
			{"/gone", 0, "ABSENCE", nil, 1},
			{"/tides", 0, "", nil, 1},
		}
		for _, tt := range tests {
			down.Store(tt.down)
			asked.Store(0)
			r := b.call(t, b.alice.Token, "read_page", conv, map[string]any{"url": pages.URL + tt.path})
			if tt.code == "" {
				require.Contains(t, get(r.ok(t), "readPage", "text"), "twice a day")
			} else {
				require.Equal(t, tt.code, r.code(t), string(r.Raw))
			}
			require.Equal(t, tt.attempts, attempts(r), string(r.Raw))
			require.Equal(t, tt.wantAsked, asked.Load(), tt.path)
		}
	})
}
