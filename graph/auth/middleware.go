package auth

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"

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
	log   *slog.Logger
}

// NewAuthenticator returns an Authenticator reading tokens with client.
func NewAuthenticator(client *ent.Client, log *slog.Logger) *Authenticator {
	return &Authenticator{client: client, log: log}
}

// Resolve returns the viewer a token belongs to, or ErrNotFound.
func (a *Authenticator) Resolve(ctx context.Context, token string) (*Viewer, error) {
	if a.Scope != nil && !hasAPIPrefix(token) {
		return a.Scope(ctx, token)
	}
	if !hasAPIPrefix(token) {
		return nil, ErrNotFound
	}
	// One statement: the user that holds a live token with this hash.
	u, err := a.client.User.Query().
		Where(user.HasTokensWith(apitoken.Hash(HashToken(token)), apitoken.RevokedAtIsNil())).
		Only(tenancy.System(ctx))
	if ent.IsNotFound(err) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("look up token: %w", err)
	}
	return &Viewer{OrganizationID: u.OrganizationID, UserID: u.ID, Admin: u.Admin}, nil
}

func hasAPIPrefix(token string) bool {
	return len(token) > len(TokenPrefix) && token[:len(TokenPrefix)] == TokenPrefix
}

// Middleware puts the viewer of the request's bearer token in its context.
// A request without a valid token goes on without one: what it asks for is
// then not found, word for word as for an object out of scope.
func (a *Authenticator) Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token, ok := Bearer(r.Header.Get("Authorization"))
		if !ok {
			next.ServeHTTP(w, r)
			return
		}
		v, err := a.Resolve(r.Context(), token)
		switch {
		case err == nil:
			next.ServeHTTP(w, r.WithContext(WithViewer(r.Context(), v)))
		case errors.Is(err, ErrNotFound):
			next.ServeHTTP(w, r)
		default:
			a.log.ErrorContext(r.Context(), "authenticate", "err", err)
			http.Error(w, `{"errors":[{"message":"temporarily unavailable"}]}`, http.StatusServiceUnavailable)
		}
	})
}
