package graph_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/db"
	"github.com/toolgate/toolgate/db/dbtest"
	"github.com/toolgate/toolgate/ent/tenancy"
	"github.com/toolgate/toolgate/ent/turn"
	"github.com/toolgate/toolgate/graph"
	"github.com/toolgate/toolgate/graph/auth"
)

func mustOrigins(t *testing.T, list string) *graph.OriginList {
	t.Helper()
	o, err := graph.ParseOrigins(list)
	require.NoError(t, err)
	return o
}

func TestParseOrigins(t *testing.T) {
	t.Parallel()
	l := mustOrigins(t, "http://localhost:3000, https://*.example.com,https://portal.example.org")
	for origin, want := range map[string]bool{
		"http://localhost:3000":          true,
		"http://localhost:3001":          false,
		"https://localhost:3000":         false,
		"https://a.example.com":          true,
		"https://a.b.example.com":        true,
		"https://example.com":            false,
		"http://a.example.com":           false,
		"https://a.example.com:8443":     false,
		"https://evilexample.com":        false,
		"https://portal.example.org":     true,
		"https://portal.example.org:443": true,
		"null":                           false,
		"":                               false,
	} {
		require.Equal(t, want, l.Allows(origin), origin)
	}
	for _, bad := range []string{"*", "localhost:3000", "https://example.com/path", "https://a.*.example.com", "https://*", "ftp://x.example.com"} {
		_, err := graph.ParseOrigins(bad)
		require.Error(t, err, bad)
	}
}

// CORS as the Fetch standard has it: a listed origin's preflight is
// answered with the methods, the headers GraphQL clients send and a
// max-age, its requests with the origin and credentials; an origin not
// listed gets no Access-Control-* header at all, and its websocket is
// refused with 403 while a listed one's is upgraded.
func TestCORS(t *testing.T) {
	t.Parallel()
	b := setupWith(t, dbtest.Open(t, dbtest.SQLite), func(c *graph.Config) {
		c.Portal.CORSOrigins = mustOrigins(t, "http://localhost:3000,https://*.example.com")
	})
	preflight := func(origin string) *http.Response {
		req, err := http.NewRequest(http.MethodOptions, b.srv.URL+"/graphql", nil)
		require.NoError(t, err)
		req.Header.Set("Origin", origin)
		req.Header.Set("Access-Control-Request-Method", "POST")
		req.Header.Set("Access-Control-Request-Headers", "authorization,content-type,x-apollo-operation-name")
		res, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		require.NoError(t, res.Body.Close())
		return res
	}
	for _, origin := range []string{"http://localhost:3000", "https://portal.example.com"} {
		res := preflight(origin)
		require.Equal(t, http.StatusNoContent, res.StatusCode)
		require.Equal(t, origin, res.Header.Get("Access-Control-Allow-Origin"))
		require.Equal(t, "true", res.Header.Get("Access-Control-Allow-Credentials"))
		require.Contains(t, res.Header.Get("Access-Control-Allow-Methods"), "POST")
		require.Equal(t, "authorization,content-type,x-apollo-operation-name", res.Header.Get("Access-Control-Allow-Headers"))
		require.Equal(t, "7200", res.Header.Get("Access-Control-Max-Age"))
		require.Contains(t, res.Header.Values("Vary"), "Origin, Access-Control-Request-Method, Access-Control-Request-Headers")
	}
	res := preflight("http://evil.test")
	for k := range res.Header {
		require.False(t, strings.HasPrefix(k, "Access-Control-"), k)
	}

	post := func(origin string) *http.Response {
		req, err := http.NewRequest(http.MethodPost, b.srv.URL+"/graphql", strings.NewReader(`{"query":"{ viewer { name } }"}`))
		require.NoError(t, err)
		req.Header.Set("Origin", origin)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+b.alice.Token)
		res, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		require.NoError(t, res.Body.Close())
		return res
	}
	res = post("http://localhost:3000")
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Equal(t, "http://localhost:3000", res.Header.Get("Access-Control-Allow-Origin"))
	require.Equal(t, "true", res.Header.Get("Access-Control-Allow-Credentials"))
	require.Contains(t, res.Header.Get("Access-Control-Expose-Headers"), "Retry-After")
	res = post("http://evil.test")
	require.Empty(t, res.Header.Get("Access-Control-Allow-Origin"))
	require.Empty(t, res.Header.Get("Access-Control-Allow-Credentials"))

	dial := func(origin string) (int, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		h := http.Header{}
		if origin != "" {
			h.Set("Origin", origin)
		}
		c, res, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(b.srv.URL, "http")+"/graphql",
			&websocket.DialOptions{Subprotocols: []string{"graphql-transport-ws"}, HTTPHeader: h})
		if c != nil {
			_ = c.CloseNow()
		}
		if res == nil {
			return 0, err
		}
		return res.StatusCode, err
	}
	for origin, want := range map[string]int{
		"http://localhost:3000":      http.StatusSwitchingProtocols,
		"https://portal.example.com": http.StatusSwitchingProtocols,
		b.srv.URL:                    http.StatusSwitchingProtocols, // the API's own pages
		"":                           http.StatusSwitchingProtocols, // not a browser
		"http://evil.test":           http.StatusForbidden,
		"http://localhost:3001":      http.StatusForbidden,
	} {
		got, _ := dial(origin)
		require.Equal(t, want, got, origin)
	}
}

// Without TOOLGATE_CORS_ORIGINS no other origin is allowed anything.
func TestCORSOff(t *testing.T) {
	t.Parallel()
	b := setup(t, dbtest.Open(t, dbtest.SQLite))
	req, err := http.NewRequest(http.MethodOptions, b.srv.URL+"/graphql", nil)
	require.NoError(t, err)
	req.Header.Set("Origin", "http://localhost:3000")
	req.Header.Set("Access-Control-Request-Method", "POST")
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	require.NoError(t, res.Body.Close())
	require.Empty(t, res.Header.Get("Access-Control-Allow-Origin"))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, wres, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(b.srv.URL, "http")+"/graphql",
		&websocket.DialOptions{HTTPHeader: http.Header{"Origin": {"http://localhost:3000"}}})
	require.Error(t, err)
	require.Equal(t, http.StatusForbidden, wres.StatusCode)
}

// Requests a second per person: past the limit 429 with Retry-After and
// RATE_LIMITED, worded by the error presenter, then served again once the
// wait is over; another person is not held back; an admin sets the
// organisation's own limits, and turns at once are refused the same way.
func TestRateLimits(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, d *db.DB) {
		b := setupWith(t, d, func(c *graph.Config) {
			c.Portal.RequestsPerSecond = 3
			c.Portal.TurnsAtOnce = 1
		})
		const q = `{ viewer { name } }`
		var limited *response
		var res *http.Response
		for range 20 {
			res, limited = b.rawPost(t, b.bob.Token, q)
			if limited.Status == http.StatusTooManyRequests {
				break
			}
		}
		require.Equal(t, http.StatusTooManyRequests, limited.Status, "20 requests in a row pass a limit of 3 a second")
		require.Equal(t, "RATE_LIMITED", limited.code(t))
		retry, err := strconv.Atoi(res.Header.Get("Retry-After"))
		require.NoError(t, err)
		require.GreaterOrEqual(t, retry, 1)
		require.EqualValues(t, retry, limited.Errors[0].Extensions["retryAfter"])
		require.Contains(t, limited.Errors[0].Message, "3 requests a second")
		// Alice is someone else.
		b.do(t, b.alice.Token, q, nil).ok(t)
		time.Sleep(time.Duration(retry) * time.Second)
		b.do(t, b.bob.Token, q, nil).ok(t)

		// The organisation's own limits.
		set := b.do(t, b.alice.Token, `mutation { setRateLimits(input: {requestsPerSecond: 50, turnsAtOnce: 2}) { rateLimits { requestsPerSecond turnsAtOnce requestsPerSecondDefault turnsAtOnceDefault } } }`, nil).ok(t)
		require.EqualValues(t, 50, get(set, "setRateLimits", "rateLimits", "requestsPerSecond"))
		require.EqualValues(t, 2, get(set, "setRateLimits", "rateLimits", "turnsAtOnce"))
		require.Equal(t, false, get(set, "setRateLimits", "rateLimits", "requestsPerSecondDefault"))
		require.Equal(t, "FORBIDDEN", b.do(t, b.bob.Token, `mutation { setRateLimits(input: {requestsPerSecond: 1000}) { id } }`, nil).code(t))
		require.Equal(t, "BAD_USER_INPUT", b.do(t, b.alice.Token, `mutation { setRateLimits(input: {requestsPerSecond: -1}) { id } }`, nil).code(t))
		for range 12 {
			b.do(t, b.bob.Token, q, nil).ok(t) // 12 at once: within 50 a second
		}
		back := b.do(t, b.alice.Token, `mutation { setRateLimits(input: {requestsPerSecond: 0, turnsAtOnce: 0}) { rateLimits { requestsPerSecond turnsAtOnce requestsPerSecondDefault turnsAtOnceDefault } } }`, nil).ok(t)
		require.EqualValues(t, 3, get(back, "setRateLimits", "rateLimits", "requestsPerSecond"))
		require.Equal(t, true, get(back, "setRateLimits", "rateLimits", "turnsAtOnceDefault"))
		time.Sleep(1100 * time.Millisecond)

		// Turns at once: one, with no runner the first stays RUNNING.
		agent := b.createAgent(t, b.bob.Token, "Limited")
		first := b.startConversation(t, b.bob.Token, agent, "one")
		second := b.startConversation(t, b.bob.Token, agent, "two")
		time.Sleep(1100 * time.Millisecond)
		const send = `mutation($c: ID!) { sendMessage(input: {conversationId: $c, text: "hi"}) { id status } }`
		b.do(t, b.bob.Token, send, map[string]any{"c": first}).ok(t)
		res, over := b.rawPostVars(t, b.bob.Token, send, map[string]any{"c": second})
		require.Equal(t, http.StatusTooManyRequests, over.Status, string(over.Raw))
		require.Equal(t, "RATE_LIMITED", over.code(t))
		require.NotEmpty(t, res.Header.Get("Retry-After"))
		require.Contains(t, over.Errors[0].Message, "at most 1 at once")
		ctx := tenancy.System(context.Background())
		b.client.Turn.Update().Where(turn.StatusEQ(turn.StatusRUNNING)).SetStatus(turn.StatusCOMPLETED).ExecX(ctx)
		b.do(t, b.bob.Token, send, map[string]any{"c": second}).ok(t)
	})
}

func (b *testBundle) rawPost(t *testing.T, token, query string) (*http.Response, *response) {
	t.Helper()
	return b.rawPostVars(t, token, query, nil)
}

// rawPostVars is do, with the HTTP response's headers.
func (b *testBundle) rawPostVars(t *testing.T, token, query string, vars map[string]any) (*http.Response, *response) {
	t.Helper()
	body, err := json.Marshal(map[string]any{"query": query, "variables": vars})
	require.NoError(t, err)
	req, err := http.NewRequest(http.MethodPost, b.srv.URL+"/graphql", bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	r := &response{Status: res.StatusCode, Raw: raw}
	require.NoError(t, json.Unmarshal(raw, r), string(raw))
	return res, r
}

// The schema is served without a token when its switch is on, and is
// what `toolgate schema` prints; off, the path is not there.
func TestSchemaEndpoint(t *testing.T) {
	t.Parallel()
	d := dbtest.Open(t, dbtest.SQLite)
	on := setupWith(t, d, func(c *graph.Config) { c.Portal.SchemaEndpoint = true })
	res, err := http.Get(on.srv.URL + "/graphql/schema.graphql")
	require.NoError(t, err)
	body, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	require.NoError(t, res.Body.Close())
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Equal(t, graph.SDL(), string(body))
	for _, want := range []string{"type Query", "type Mutation", "type Subscription", "sendMessage(", "turnEvents(", "setRateLimits("} {
		require.Contains(t, string(body), want)
	}
	require.NotContains(t, string(body), "@goField", "code generation's own directives are not the API's")
	off := setup(t, d)
	res, err = http.Get(off.srv.URL + "/graphql/schema.graphql")
	require.NoError(t, err)
	require.NoError(t, res.Body.Close())
	require.Equal(t, http.StatusNotFound, res.StatusCode)
}

// A cookie session made from an OpenID Connect sign-in: HTTP-only, Secure,
// SameSite=Strict; queries over GET pass with the cookie alone, a POST
// needs the session's CSRF token; signing out ends it.
func TestCookieSession(t *testing.T) {
	t.Parallel()
	p := startIDP(t)
	dbtest.Each(t, func(t *testing.T, d *db.DB) {
		b := setupWith(t, d, func(c *graph.Config) {
			o, err := auth.NewOIDC(d.Client(), nil, auth.OIDCConfig{Issuer: p.issuer, Audience: apiResource, OrgClaim: "organization"})
			require.NoError(t, err)
			c.Portal.OIDC = o
			c.Portal.Sessions, err = auth.NewSessions(d.Client(), o, time.Hour, nil)
			require.NoError(t, err)
		})
		call := func(method, path string, body io.Reader, header http.Header) (*http.Response, []byte) {
			req, err := http.NewRequest(method, b.srv.URL+path, body)
			require.NoError(t, err)
			for k, v := range header {
				req.Header[k] = v
			}
			res, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			defer res.Body.Close()
			raw, err := io.ReadAll(res.Body)
			require.NoError(t, err)
			return res, raw
		}
		// An API token is not a sign-in.
		res, _ := call(http.MethodPost, "/auth/session", nil, http.Header{"Authorization": {"Bearer " + b.alice.Token}})
		require.Equal(t, http.StatusUnauthorized, res.StatusCode)

		idToken := p.person(t, "hedy", "Hedy Lamarr", "Radio", "Acme")
		res, raw := call(http.MethodPost, "/auth/session", nil, http.Header{"Authorization": {"Bearer " + idToken}})
		require.Equal(t, http.StatusOK, res.StatusCode, string(raw))
		var s struct {
			CSRFToken string    `json:"csrfToken"`
			ExpiresAt time.Time `json:"expiresAt"`
		}
		require.NoError(t, json.Unmarshal(raw, &s))
		require.NotEmpty(t, s.CSRFToken)
		require.WithinDuration(t, time.Now().Add(time.Hour), s.ExpiresAt, time.Minute)
		cookies := res.Cookies()
		require.Len(t, cookies, 1)
		c := cookies[0]
		require.Equal(t, auth.SessionCookie, c.Name)
		require.True(t, c.HttpOnly)
		require.True(t, c.Secure)
		require.Equal(t, http.SameSiteStrictMode, c.SameSite)
		require.NotContains(t, string(raw), c.Value, "the page never sees the cookie's token")
		cookie := http.Header{"Cookie": {c.Name + "=" + c.Value}}

		res, raw = call(http.MethodGet, "/graphql?query="+`%7B%20viewer%20%7B%20name%20%7D%20%7D`, nil, cookie)
		require.Equal(t, http.StatusOK, res.StatusCode, string(raw))
		require.Contains(t, string(raw), "Hedy Lamarr")

		mutation := `{"query":"mutation { createAgent(input: {name: \"Hedy's\"}) { id } }"}`
		jsonCookie := cookie.Clone()
		jsonCookie.Set("Content-Type", "application/json")
		res, raw = call(http.MethodPost, "/graphql", strings.NewReader(mutation), jsonCookie)
		require.Equal(t, http.StatusForbidden, res.StatusCode, string(raw))
		require.Contains(t, string(raw), `"CSRF"`)
		wrong := jsonCookie.Clone()
		wrong.Set(auth.CSRFHeader, "forged")
		res, _ = call(http.MethodPost, "/graphql", strings.NewReader(mutation), wrong)
		require.Equal(t, http.StatusForbidden, res.StatusCode)
		good := jsonCookie.Clone()
		good.Set(auth.CSRFHeader, s.CSRFToken)
		res, raw = call(http.MethodPost, "/graphql", strings.NewReader(mutation), good)
		require.Equal(t, http.StatusOK, res.StatusCode, string(raw))
		require.NotContains(t, string(raw), "errors")

		// The page asks for its CSRF token again after a reload.
		res, raw = call(http.MethodGet, "/auth/session", nil, cookie)
		require.Equal(t, http.StatusOK, res.StatusCode)
		require.Contains(t, string(raw), s.CSRFToken)

		// Signing out needs the CSRF token too, then the cookie is dead.
		res, _ = call(http.MethodDelete, "/auth/session", nil, cookie)
		require.Equal(t, http.StatusForbidden, res.StatusCode)
		csrf := cookie.Clone()
		csrf.Set(auth.CSRFHeader, s.CSRFToken)
		res, _ = call(http.MethodDelete, "/auth/session", nil, csrf)
		require.Equal(t, http.StatusNoContent, res.StatusCode)
		res, _ = call(http.MethodGet, "/graphql?query="+`%7B%20viewer%20%7B%20name%20%7D%20%7D`, nil, cookie)
		require.Equal(t, http.StatusUnauthorized, res.StatusCode)
	})
}
