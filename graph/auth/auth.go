// Package auth says who is calling and what they may reach.
//
// Every request carries a bearer token. The middleware turns it into a
// Viewer; the scope interceptors (Scope) then add the viewer's reach to every
// query the API's ent client runs, so a row outside it is simply not there.
// A missing token, a bad one, an id of another organisation and an id of
// nothing all end in the same ErrNotFound.
package auth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
)

// ErrNotFound is the one answer for an object the caller cannot reach, for
// whatever reason: no token, a bad token, another organisation's object, or
// no object at all.
var ErrNotFound = errors.New("not found")

// ErrForbidden is returned for an operation the caller's kind of token may
// not perform on objects it can see (an admin-only mutation, say).
var ErrForbidden = errors.New("not permitted")

// Viewer is the caller, resolved from the token.
type Viewer struct {
	OrganizationID int
	UserID         int
	// Admin viewers reach every conversation of their organisation.
	Admin bool
	// ConversationID is set for a turn's scope token: it reaches that
	// conversation only.
	ConversationID int
	// TurnID is set for a turn's scope token.
	TurnID int
	// Tools are the tools a scope token was offered.
	Tools []string
}

// Scoped reports whether the viewer holds a turn's scope token rather than
// an API token.
func (v *Viewer) Scoped() bool { return v.TurnID != 0 }

// Offers reports whether a scope token was offered the tool. API tokens
// may drive every tool by hand (the playground).
func (v *Viewer) Offers(tool string) bool {
	if !v.Scoped() {
		return true
	}
	for _, t := range v.Tools {
		if t == tool {
			return true
		}
	}
	return false
}

type viewerKey struct{}

// WithViewer returns a context that carries the viewer.
func WithViewer(ctx context.Context, v *Viewer) context.Context {
	return context.WithValue(ctx, viewerKey{}, v)
}

// FromContext returns the viewer, or ErrNotFound when the request carried
// no valid token.
func FromContext(ctx context.Context) (*Viewer, error) {
	v, ok := ctx.Value(viewerKey{}).(*Viewer)
	if !ok || v == nil {
		return nil, ErrNotFound
	}
	return v, nil
}

// TokenPrefix starts every API token, so a leaked one is easy to find.
const TokenPrefix = "tg_"

// NewToken returns a new API token and the hash to store for it.
func NewToken() (token string, hash []byte, err error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", nil, err
	}
	token = TokenPrefix + base64.RawURLEncoding.EncodeToString(b)
	return token, HashToken(token), nil
}

// HashToken is what is stored for a token. The token carries 256 random
// bits, so a fast hash is enough: nothing can be guessed from it.
func HashToken(token string) []byte {
	h := sha256.Sum256([]byte(token))
	return h[:]
}

// Hint is the part of a token kept in the clear, to tell tokens apart.
func Hint(token string) string {
	if len(token) > 10 {
		return token[:10]
	}
	return token
}

// Bearer extracts the token from an Authorization header value.
func Bearer(header string) (string, bool) {
	scheme, token, ok := strings.Cut(strings.TrimSpace(header), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}

// IdempotencyScope is where the viewer's Idempotency-Keys mean something: a
// turn's conversation for a scope token, the user for an API token.
func (v *Viewer) IdempotencyScope() string {
	if v.Scoped() {
		return fmt.Sprintf("conversation:%d", v.ConversationID)
	}
	return fmt.Sprintf("user:%d", v.UserID)
}
