package auth

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/toolgate/toolgate/ent"
	"github.com/toolgate/toolgate/ent/apitoken"
	"github.com/toolgate/toolgate/ent/tenancy"
	"github.com/toolgate/toolgate/ent/user"
)

// Authenticator resolves bearer tokens to viewers. It reads as the system
// (tenancy.System): it runs before there is a viewer to scope by.
type Authenticator struct {
	client *ent.Client
	// Scope resolves a turn's scope token; nil until the runtime provides one.
	Scope func(ctx context.Context, token string) (*Viewer, error)
	// Clock tells the time for expiry and last use; nil is time.Now.
	Clock func() time.Time
	// OIDC verifies an OpenID Connect issuer's JWTs; nil accepts none.
	OIDC *OIDC
	// Sessions, when set, also accepts a session cookie (session.go).
	Sessions *Sessions
	// Limit wraps what runs once a request's token is accepted (the rate
	// limits), before anything of its body is read; nil: nothing.
	Limit func(http.Handler) http.Handler
	log   *slog.Logger

	mu      sync.Mutex
	touched map[string]time.Time // token hash → last write of last_used_at
}

// NewAuthenticator returns an Authenticator reading tokens with client.
func NewAuthenticator(client *ent.Client, log *slog.Logger) *Authenticator {
	return &Authenticator{client: client, log: log, touched: map[string]time.Time{}}
}

// Resolve returns the viewer a token belongs to, or ErrNotFound.
func (a *Authenticator) Resolve(ctx context.Context, token string) (*Viewer, error) {
	if a.OIDC != nil && LooksLikeJWT(token) {
		return a.OIDC.Resolve(ctx, token)
	}
	if a.Scope != nil && !hasAPIPrefix(token) {
		return a.Scope(ctx, token)
	}
	if !hasAPIPrefix(token) {
		return nil, ErrNotFound
	}
	// One statement: the user that holds a live token with this hash.
	hash := HashToken(token)
	now := a.now()
	u, err := a.client.User.Query().
		Where(user.DeactivatedAtIsNil(), user.HasTokensWith(apitoken.Hash(hash), apitoken.RevokedAtIsNil(),
			apitoken.Or(apitoken.ExpiresAtIsNil(), apitoken.ExpiresAtGT(now)))).
		Only(tenancy.System(ctx))
	if ent.IsNotFound(err) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("look up token: %w", err)
	}
	a.touch(ctx, hash, now)
	return &Viewer{OrganizationID: u.OrganizationID, UserID: u.ID, Admin: u.Admin}, nil
}

// touchEvery is how stale a token's last_used_at may get: writing it on
// every request would turn each read into a write.
const touchEvery = time.Minute

// touch records that the token was used, at most once a minute per token
// from this process, and never more than once a minute across processes.
func (a *Authenticator) touch(ctx context.Context, hash []byte, now time.Time) {
	key := string(hash)
	a.mu.Lock()
	if last, ok := a.touched[key]; ok && now.Sub(last) < touchEvery {
		a.mu.Unlock()
		return
	}
	if len(a.touched) > 10_000 {
		clear(a.touched)
	}
	a.touched[key] = now
	a.mu.Unlock()
	err := a.client.APIToken.Update().
		Where(apitoken.Hash(hash), apitoken.Or(apitoken.LastUsedAtIsNil(), apitoken.LastUsedAtLT(now.Add(-touchEvery)))).
		SetLastUsedAt(now).Exec(tenancy.System(ctx)) // no viewer yet
	if err != nil {
		// The request goes on: when a token was last used is for people
		// reading a list, not a reason to refuse.
		a.log.WarnContext(ctx, "record token use", "err", err)
	}
}

func (a *Authenticator) now() time.Time {
	if a.Clock != nil {
		return a.Clock()
	}
	return time.Now()
}

func hasAPIPrefix(token string) bool {
	return len(token) > len(TokenPrefix) && token[:len(TokenPrefix)] == TokenPrefix
}

// Unauthenticated is the one answer, word for word, to a request whose
// token is missing, malformed, expired or revoked: nothing is learned about
// tokens from it.
const Unauthenticated = `{"errors":[{"message":"unauthenticated: send Authorization: Bearer TOKEN with a live token","extensions":{"code":"UNAUTHENTICATED"}}]}`

// Middleware puts the viewer of the request's bearer token in its context.
// A request without a live token is refused with 401 from its headers,
// its body neither read nor awaited (leaveBody). A websocket authenticates in its connection_init message
// instead, and a CORS preflight carries no credentials.
func (a *Authenticator) Middleware(next http.Handler) http.Handler {
	admitted := next
	if a.Limit != nil {
		admitted = a.Limit(next)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodOptions || isWebsocket(r) {
			next.ServeHTTP(w, a.Sessions.forSocket(r))
			return
		}
		header := r.Header.Get("Authorization")
		token, ok := Bearer(header)
		cookie := false
		if header == "" {
			token, ok = a.Sessions.fromCookie(r)
			cookie = ok
		}
		if !ok {
			refuse(w, r)
			return
		}
		v, err := a.Resolve(r.Context(), token)
		switch {
		case err == nil && cookie && !checkCSRF(r, token):
			refuseCSRF(w)
		case err == nil:
			admitted.ServeHTTP(w, r.WithContext(WithViewer(r.Context(), v)))
		case errors.Is(err, ErrNotFound):
			refuse(w, r)
		default:
			a.log.ErrorContext(r.Context(), "authenticate", "err", err)
			leaveBody(w, r)
			http.Error(w, `{"errors":[{"message":"temporarily unavailable"}]}`, http.StatusServiceUnavailable)
		}
	})
}

// leaveBody answers without waiting for the request's body. net/http
// reads what is left of an unread body (up to 256 KiB) before it writes
// the answer on a connection kept alive, and again as the request ends,
// for as long as the client takes to send it (the server's ReadTimeout):
// a caller without a token could hold a connection by sending a body
// slowly. So the connection closes after the answer, which is written at
// once, and what the client still sends is read and dropped for
// lingerFor at most: a connection closed with data unread resets, and the
// client could lose the answer.
func leaveBody(w http.ResponseWriter, r *http.Request) {
	if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
		return
	}
	if r.ProtoMajor == 1 {
		w.Header().Set("Connection", "close")
	}
	_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(lingerFor))
}

// lingerFor is how long a refused request's connection may still read
// after its answer: net/http waits as long (its rstAvoidanceDelay) when it
// closes a connection on a body it did not read.
const lingerFor = 500 * time.Millisecond

func refuse(w http.ResponseWriter, r *http.Request) {
	leaveBody(w, r)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("WWW-Authenticate", `Bearer realm="toolgate"`)
	w.WriteHeader(http.StatusUnauthorized)
	_, _ = io.WriteString(w, Unauthenticated)
}

func isWebsocket(r *http.Request) bool {
	return r.Method == http.MethodGet && strings.EqualFold(r.Header.Get("Upgrade"), "websocket")
}
