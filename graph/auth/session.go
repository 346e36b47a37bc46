package auth

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/toolgate/toolgate/ent"
	"github.com/toolgate/toolgate/ent/apitoken"
	"github.com/toolgate/toolgate/ent/tenancy"
)

// Cookie sessions, for a portal on the same site as the API (the
// backend-for-frontend way): the page never holds a token. An OpenID
// Connect sign-in is exchanged once for an HTTP-only cookie; every later
// request carries the cookie, and every request that is not a GET also
// carries the session's CSRF token in X-CSRF-Token, which only a page that
// read it from the API (same origin, or an origin CORS lists) can have.
//
// A session is an API token of the user named SessionTokenName, expiring
// after the session's time: it is listed, revoked and ended with the
// user's deactivation like any other token.

// SessionCookie is the session cookie's name.
const SessionCookie = "toolgate_session"

// CSRFHeader carries a cookie session's CSRF token.
const CSRFHeader = "X-CSRF-Token"

// SessionTokenName is the name of the API tokens that back sessions.
const SessionTokenName = "browser session"

// DefaultSessionTTL is how long a session lasts when nothing else is said.
const DefaultSessionTTL = 8 * time.Hour

// Sessions makes and ends cookie sessions from OpenID Connect sign-ins.
type Sessions struct {
	oidc   *OIDC
	client *ent.Client
	ttl    time.Duration
	log    *slog.Logger
}

// NewSessions returns the sessions of the issuer's sign-ins, each lasting
// ttl (0: DefaultSessionTTL).
func NewSessions(client *ent.Client, o *OIDC, ttl time.Duration, log *slog.Logger) (*Sessions, error) {
	if o == nil {
		return nil, errors.New("sessions are made from OpenID Connect sign-ins: configure an issuer")
	}
	if ttl <= 0 {
		ttl = DefaultSessionTTL
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Sessions{oidc: o, client: client, ttl: ttl, log: log}, nil
}

// CSRFToken is the CSRF token of the session whose cookie holds token: a
// keyed hash of it, so it reveals nothing of the cookie and needs no row.
func CSRFToken(token string) string {
	m := hmac.New(sha256.New, []byte(token))
	_, _ = io.WriteString(m, "toolgate csrf")
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// checkCSRF reports whether a request authenticated by its cookie may go
// on: a GET or HEAD (which change nothing; gqlgen refuses mutations over
// GET) always, anything else with the session's CSRF token.
func checkCSRF(r *http.Request, token string) bool {
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		return true
	}
	got := r.Header.Get(CSRFHeader)
	return got != "" && hmac.Equal([]byte(got), []byte(CSRFToken(token)))
}

func refuseCSRF(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusForbidden)
	_, _ = io.WriteString(w, `{"errors":[{"message":"a request with the session cookie needs the session's CSRF token in X-CSRF-Token","extensions":{"code":"CSRF"}}]}`)
}

// fromCookie is the session token of the request's cookie.
func (s *Sessions) fromCookie(r *http.Request) (string, bool) {
	if s == nil {
		return "", false
	}
	c, err := r.Cookie(SessionCookie)
	if err != nil || c.Value == "" {
		return "", false
	}
	return c.Value, true
}

type sessionKey struct{}

// forSocket keeps a websocket's session cookie for its connection_init: a
// socket's origin is checked at the upgrade (withCORS), so a page of
// another site cannot open one with the cookie.
func (s *Sessions) forSocket(r *http.Request) *http.Request {
	token, ok := s.fromCookie(r)
	if !ok || !isWebsocket(r) {
		return r
	}
	return r.WithContext(context.WithValue(r.Context(), sessionKey{}, token))
}

// SessionToken is the session cookie's token of the websocket whose
// context ctx is, or "".
func SessionToken(ctx context.Context) string {
	t, _ := ctx.Value(sessionKey{}).(string)
	return t
}

// session is what the session endpoint answers.
type session struct {
	CSRFToken string    `json:"csrfToken"`
	ExpiresAt time.Time `json:"expiresAt"`
}

// Handler serves /auth/session: POST with Authorization: Bearer ID_TOKEN
// (a JWT of the issuer) signs in and sets the cookie; GET answers the
// current session's CSRF token; DELETE (with the CSRF token) signs out.
func (s *Sessions) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case http.MethodPost:
			s.signIn(w, r)
		case http.MethodGet:
			s.current(w, r)
		case http.MethodDelete:
			s.signOut(w, r)
		default:
			w.Header().Set("Allow", "GET, POST, DELETE")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		}
	})
}

func (s *Sessions) signIn(w http.ResponseWriter, r *http.Request) {
	raw, ok := Bearer(r.Header.Get("Authorization"))
	if !ok || !LooksLikeJWT(raw) {
		refuse(w, r)
		return
	}
	u, err := s.oidc.SignIn(r.Context(), raw)
	if errors.Is(err, ErrNotFound) {
		refuse(w, r)
		return
	}
	if err != nil {
		s.log.ErrorContext(r.Context(), "sign in", "err", err)
		http.Error(w, `{"errors":[{"message":"temporarily unavailable"}]}`, http.StatusServiceUnavailable)
		return
	}
	token, hash, err := NewToken()
	if err != nil {
		http.Error(w, `{"errors":[{"message":"temporarily unavailable"}]}`, http.StatusServiceUnavailable)
		return
	}
	expires := time.Now().Add(s.ttl).UTC().Truncate(time.Second)
	if err := s.client.APIToken.Create().SetUserID(u.ID).SetName(SessionTokenName).SetHash(hash).
		SetHint(Hint(token)).SetExpiresAt(expires).Exec(tenancy.System(r.Context())); err != nil {
		s.log.ErrorContext(r.Context(), "store session", "err", err)
		http.Error(w, `{"errors":[{"message":"temporarily unavailable"}]}`, http.StatusServiceUnavailable)
		return
	}
	http.SetCookie(w, &http.Cookie{
		Name: SessionCookie, Value: token, Path: "/", Expires: expires, MaxAge: int(s.ttl / time.Second),
		HttpOnly: true, Secure: true, SameSite: http.SameSiteStrictMode,
	})
	writeJSON(w, http.StatusOK, session{CSRFToken: CSRFToken(token), ExpiresAt: expires})
}

func (s *Sessions) live(r *http.Request) (*ent.APIToken, string, bool) {
	token, ok := s.fromCookie(r)
	if !ok {
		return nil, "", false
	}
	t, err := s.client.APIToken.Query().
		Where(apitoken.Hash(HashToken(token)), apitoken.RevokedAtIsNil(), apitoken.ExpiresAtGT(time.Now())).
		Only(tenancy.System(r.Context()))
	if err != nil {
		return nil, "", false
	}
	return t, token, true
}

func (s *Sessions) current(w http.ResponseWriter, r *http.Request) {
	t, token, ok := s.live(r)
	if !ok {
		refuse(w, r)
		return
	}
	writeJSON(w, http.StatusOK, session{CSRFToken: CSRFToken(token), ExpiresAt: *t.ExpiresAt})
}

func (s *Sessions) signOut(w http.ResponseWriter, r *http.Request) {
	t, token, ok := s.live(r)
	if !ok {
		refuse(w, r)
		return
	}
	if !checkCSRF(r, token) {
		refuseCSRF(w)
		return
	}
	if err := t.Update().SetRevokedAt(time.Now()).Exec(tenancy.System(r.Context())); err != nil {
		s.log.ErrorContext(r.Context(), "end session", "err", err)
		http.Error(w, `{"errors":[{"message":"temporarily unavailable"}]}`, http.StatusServiceUnavailable)
		return
	}
	http.SetCookie(w, &http.Cookie{Name: SessionCookie, Value: "", Path: "/", MaxAge: -1, HttpOnly: true, Secure: true, SameSite: http.SameSiteStrictMode})
	w.WriteHeader(http.StatusNoContent)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
