package graph_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/coder/websocket/wsjson"
	"github.com/go-jose/go-jose/v4"
	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/db"
	"github.com/toolgate/toolgate/db/dbtest"
	"github.com/toolgate/toolgate/ent/tenancy"
	"github.com/toolgate/toolgate/ent/user"
	"github.com/toolgate/toolgate/graph"
	"github.com/toolgate/toolgate/graph/auth"
)

// apiResource is the audience toolgate's tokens are issued for.
const apiResource = "https://toolgate.test/api"

// idp is a running oidc-provider (testdata/oidc/provider.js).
type idp struct {
	issuer string
}

func startIDP(t *testing.T) *idp {
	t.Helper()
	dir := npmPackage(t, "oidc")
	return &idp{issuer: startNode(t, dir, "provider.js", fmt.Sprint(freePort(t)))}
}

// token asks the provider for a JWT access token by the client credentials
// grant, for resource (the audience), standing for the person params name
// (test_sub, test_name, test_department, test_org, test_nbf, test_iat).
func (p *idp) token(t *testing.T, resource string, params map[string]string) string {
	t.Helper()
	form := url.Values{"grant_type": {"client_credentials"}, "scope": {"api"}, "resource": {resource}}
	for k, v := range params {
		form.Set(k, v)
	}
	req, err := http.NewRequest(http.MethodPost, p.issuer+"/token", strings.NewReader(form.Encode()))
	require.NoError(t, err)
	req.SetBasicAuth("portal", "portal-secret")
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, res.StatusCode, string(body))
	var tok struct {
		AccessToken string `json:"access_token"`
	}
	require.NoError(t, json.Unmarshal(body, &tok))
	require.True(t, auth.LooksLikeJWT(tok.AccessToken), tok.AccessToken)
	return tok.AccessToken
}

// person is a token for a person of the organisation.
func (p *idp) person(t *testing.T, sub, name, dept, org string) string {
	t.Helper()
	return p.token(t, apiResource, map[string]string{"test_sub": sub, "test_name": name, "test_department": dept, "test_org": org})
}

// rotate replaces the provider's signing keys; keep publishes the old ones
// beside the new.
func (p *idp) rotate(t *testing.T, keep bool) {
	t.Helper()
	res, err := http.Post(p.issuer+"/__rotate", "application/json", strings.NewReader(fmt.Sprintf(`{"keep": %t}`, keep)))
	require.NoError(t, err)
	require.NoError(t, res.Body.Close())
	require.Equal(t, http.StatusOK, res.StatusCode)
}

// jwksCounter counts the fetches of the issuer's key set.
type jwksCounter struct{ n atomic.Int32 }

func (c *jwksCounter) RoundTrip(r *http.Request) (*http.Response, error) {
	if strings.HasSuffix(r.URL.Path, "/jwks") {
		c.n.Add(1)
	}
	return http.DefaultTransport.RoundTrip(r)
}

// oidcServer is a server accepting the provider's tokens, the organisation
// named by the "organization" claim.
func oidcServer(t *testing.T, d *db.DB, p *idp, clock func() time.Time, fetches *jwksCounter, configure func(*auth.OIDCConfig)) *testBundle {
	t.Helper()
	return setupWith(t, d, func(c *graph.Config) {
		oc := auth.OIDCConfig{Issuer: p.issuer, Audience: apiResource, OrgClaim: "organization", Clock: clock,
			RefreshEvery: 300 * time.Millisecond, Client: &http.Client{Transport: fetches, Timeout: 10 * time.Second}}
		if configure != nil {
			configure(&oc)
		}
		o, err := auth.NewOIDC(d.Client(), nil, oc)
		require.NoError(t, err)
		c.Portal.OIDC = o
	})
}

// claimsOf decodes a JWT's payload, unverified.
func claimsOf(t *testing.T, token string) map[string]any {
	t.Helper()
	b, err := base64.RawURLEncoding.DecodeString(strings.Split(token, ".")[1])
	require.NoError(t, err)
	var c map[string]any
	require.NoError(t, json.Unmarshal(b, &c))
	return c
}

func headerOf(t *testing.T, token string) map[string]any {
	t.Helper()
	b, err := base64.RawURLEncoding.DecodeString(strings.Split(token, ".")[0])
	require.NoError(t, err)
	var h map[string]any
	require.NoError(t, json.Unmarshal(b, &h))
	return h
}

// resign signs claims with a key of the test's own, under the key id kid.
func resign(t *testing.T, claims map[string]any, kid string) string {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: key},
		(&jose.SignerOptions{}).WithType("at+jwt").WithHeader("kid", kid))
	require.NoError(t, err)
	payload, err := json.Marshal(claims)
	require.NoError(t, err)
	obj, err := signer.Sign(payload)
	require.NoError(t, err)
	s, err := obj.CompactSerialize()
	require.NoError(t, err)
	return s
}

// unsigned is claims under alg "none".
func unsigned(t *testing.T, claims map[string]any, kid string) string {
	t.Helper()
	h, err := json.Marshal(map[string]any{"alg": "none", "typ": "at+jwt", "kid": kid})
	require.NoError(t, err)
	p, err := json.Marshal(claims)
	require.NoError(t, err)
	return base64.RawURLEncoding.EncodeToString(h) + "." + base64.RawURLEncoding.EncodeToString(p) + "."
}

// A real OpenID provider's tokens sign people in: the first sign-in makes
// the person in the organisation the token names, later ones update their
// name and department; API tokens keep working beside them; and every token
// that fails a check (audience, issuer, expiry, nbf, iat, alg none, a
// signature of another key, a payload changed after signing, an
// organisation that does not exist or is not the person's) gets the one
// 401 every bad token gets.
func TestOIDCSignIn(t *testing.T) {
	t.Parallel()
	p := startIDP(t)
	other := startIDP(t) // another issuer, with keys of its own
	dbtest.Each(t, func(t *testing.T, d *db.DB) {
		ctx := tenancy.System(context.Background())
		var offset atomic.Int64
		clock := func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }
		b := oidcServer(t, d, p, clock, &jwksCounter{}, nil)
		const q = `{ viewer { id name department organizationName admin } }`
		missing := b.do(t, "", q, nil)
		require.Equal(t, http.StatusUnauthorized, missing.Status)

		ada := p.person(t, "ada-1815", "Ada Lovelace", "Analytical Engines", "Acme")
		v := b.do(t, ada, q, nil).ok(t)
		require.Equal(t, "Ada Lovelace", get(v, "viewer", "name"))
		require.Equal(t, "Analytical Engines", get(v, "viewer", "department"))
		require.Equal(t, "Acme", get(v, "viewer", "organizationName"))
		require.Equal(t, false, get(v, "viewer", "admin"), "a person signing in is a member; admins are made by admins")
		id := get(v, "viewer", "id")
		u := b.client.User.Query().Where(user.OidcSubject("ada-1815")).OnlyX(ctx)
		require.Equal(t, p.issuer, *u.OidcIssuer)
		require.Equal(t, b.alice.OrganizationID, u.OrganizationID)
		// She reaches what a member of Acme reaches, through the API.
		agentID := b.createAgent(t, ada, "Ada's")
		b.startConversation(t, ada, agentID, "notes")

		// A later sign-in: the same person, renamed and moved.
		ada2 := p.person(t, "ada-1815", "Ada King", "Mathematics", "Acme")
		v = b.do(t, ada2, q, nil).ok(t)
		require.Equal(t, id, get(v, "viewer", "id"))
		require.Equal(t, "Ada King", get(v, "viewer", "name"))
		require.Equal(t, "Mathematics", get(v, "viewer", "department"))

		// Someone named like an existing person is a person of their own.
		alice := p.person(t, "alice-other", "Alice", "Legal", "Acme")
		v = b.do(t, alice, q, nil).ok(t)
		require.NotEqual(t, graph.EncodeID(b.alice.UserID), get(v, "viewer", "id"))
		require.Equal(t, "Alice (alice-other)", get(v, "viewer", "name"))

		// API tokens still work.
		require.Equal(t, "Alice", get(b.do(t, b.alice.Token, q, nil).ok(t), "viewer", "name"))

		claims := claimsOf(t, ada)
		kid := headerOf(t, ada)["kid"].(string)
		tampered := strings.Split(ada, ".")
		changed := claimsOf(t, ada)
		changed["sub"] = "someone-else"
		raw, err := json.Marshal(changed)
		require.NoError(t, err)
		tampered[1] = base64.RawURLEncoding.EncodeToString(raw)
		refused := map[string]string{
			"wrong audience":     p.token(t, "https://other.test/api", map[string]string{"test_sub": "ada-1815", "test_org": "Acme"}),
			"wrong issuer":       other.person(t, "ada-1815", "Ada Lovelace", "", "Acme"),
			"alg none":           unsigned(t, claims, kid),
			"re-signed":          resign(t, claims, kid),
			"tampered":           strings.Join(tampered, "."),
			"not yet valid":      p.token(t, apiResource, map[string]string{"test_sub": "ada-1815", "test_org": "Acme", "test_nbf": "600"}),
			"issued in future":   p.token(t, apiResource, map[string]string{"test_sub": "ada-1815", "test_org": "Acme", "test_iat": "600"}),
			"no organisation":    p.person(t, "nobody-1", "Nobody", "", "Nowhere Ltd"),
			"another org of his": p.person(t, "ada-1815", "Ada King", "", "Evil"),
			"garbage":            "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJ4In0.c2ln",
		}
		for name, tok := range refused {
			r := b.do(t, tok, q, nil)
			require.Equal(t, http.StatusUnauthorized, r.Status, name)
			require.Equal(t, string(missing.Raw), string(r.Raw), name)
		}
		require.False(t, b.client.User.Query().Where(user.OidcSubject("nobody-1")).ExistX(ctx), "no organisation is made from a claim")

		// Within the skew a token is good; past it, refused.
		skewed := p.token(t, apiResource, map[string]string{"test_sub": "ada-1815", "test_org": "Acme", "test_nbf": "20"})
		b.do(t, skewed, q, nil).ok(t)
		offset.Store(int64(5*time.Minute + 30*time.Second)) // 300 s tokens, 60 s skew
		b.do(t, ada2, q, nil).ok(t)
		offset.Store(int64(6*time.Minute + 30*time.Second))
		expired := b.do(t, ada2, q, nil)
		require.Equal(t, http.StatusUnauthorized, expired.Status)
		require.Equal(t, string(missing.Raw), string(expired.Raw))
		offset.Store(0)

		// A deactivated person's tokens stop at once.
		b.do(t, b.alice.Token, `mutation($id: ID!) { deactivateUser(input: {id: $id}) { user { id } } }`, map[string]any{"id": id}).ok(t)
		require.Equal(t, http.StatusUnauthorized, b.do(t, ada2, q, nil).Status)
	})
}

// The issuer's keys are fetched once and kept; a token of a key id not
// published fetches them again at most once every RefreshEvery, so made-up
// key ids cannot make the server hammer the issuer; after a rotation the
// new key's tokens are accepted at once and the withdrawn key's refused.
func TestOIDCKeyRotation(t *testing.T) {
	t.Parallel()
	p := startIDP(t)
	{
		fetches := &jwksCounter{}
		b := oidcServer(t, dbtest.Open(t, dbtest.SQLite), p, nil, fetches, nil)
		const q = `{ viewer { name } }`
		old := p.person(t, "grace", "Grace Hopper", "Navy", "Acme")
		b.do(t, old, q, nil).ok(t)
		b.do(t, old, q, nil).ok(t)
		require.EqualValues(t, 1, fetches.n.Load(), "the key set is kept")

		// Made-up key ids: refused, and one fetch at most for them all.
		var madeUp []string
		for i := range 5 {
			madeUp = append(madeUp, resign(t, claimsOf(t, old), fmt.Sprintf("made-up-%d", i)))
		}
		for _, tok := range madeUp {
			require.Equal(t, http.StatusUnauthorized, b.do(t, tok, q, nil).Status)
		}
		require.LessOrEqual(t, fetches.n.Load(), int32(2))

		// Rotation, the old key kept published for a while: both work.
		time.Sleep(350 * time.Millisecond)
		p.rotate(t, true)
		fresh := p.person(t, "grace", "Grace Hopper", "Navy", "Acme")
		require.NotEqual(t, headerOf(t, old)["kid"], headerOf(t, fresh)["kid"])
		b.do(t, fresh, q, nil).ok(t)
		b.do(t, old, q, nil).ok(t)

		// The old key withdrawn: its token is refused once the set is
		// fetched again (a newer key's token fetches it).
		time.Sleep(350 * time.Millisecond)
		p.rotate(t, false)
		newest := p.person(t, "grace", "Grace Hopper", "Navy", "Acme")
		b.do(t, newest, q, nil).ok(t)
		require.Equal(t, http.StatusUnauthorized, b.do(t, old, q, nil).Status)
		require.Equal(t, http.StatusUnauthorized, b.do(t, fresh, q, nil).Status)
		b.do(t, newest, q, nil).ok(t)
	}
}

// With provisioning off, only people already known sign in; and an issuer's
// token opens a websocket as an API token does.
func TestOIDCNoProvisionAndWebsocket(t *testing.T) {
	t.Parallel()
	p := startIDP(t)
	d := dbtest.Open(t, dbtest.SQLite)
	open := oidcServer(t, d, p, nil, &jwksCounter{}, nil)
	known := p.person(t, "known", "Katherine Johnson", "Flight Research", "Acme")
	open.do(t, known, `{ viewer { name } }`, nil).ok(t)

	closed := oidcServer(t, d, p, nil, &jwksCounter{}, func(c *auth.OIDCConfig) { c.NoProvision = true })
	require.Equal(t, "Katherine Johnson", get(closed.do(t, known, `{ viewer { name } }`, nil).ok(t), "viewer", "name"))
	stranger := p.person(t, "stranger", "Someone", "", "Acme")
	require.Equal(t, http.StatusUnauthorized, closed.do(t, stranger, `{ viewer { name } }`, nil).Status)

	for token, want := range map[string]websocket.StatusCode{known: -1, stranger: 4401} {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(closed.srv.URL, "http")+"/graphql",
			&websocket.DialOptions{Subprotocols: []string{"graphql-transport-ws"}})
		require.NoError(t, err)
		require.NoError(t, wsjson.Write(ctx, c, map[string]any{"type": "connection_init", "payload": map[string]any{"Authorization": "Bearer " + token}}))
		var msg map[string]any
		err = wsjson.Read(ctx, c, &msg)
		if want == -1 {
			require.NoError(t, err)
			require.Equal(t, "connection_ack", msg["type"])
		} else {
			for err == nil {
				err = wsjson.Read(ctx, c, &msg)
			}
			require.Equal(t, want, websocket.CloseStatus(err), "%v", err)
		}
		_ = c.CloseNow()
		cancel()
	}
}
