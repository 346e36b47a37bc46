// Package auth says who is calling and what they may reach.
//
// Every request carries a bearer token. The middleware turns it into a
// Viewer; ent's privacy policies (ent/tenancy, declared per entity in
// ent/schema) then add the viewer's reach to every query and mutation, so a
// row outside it is simply not there.
// A missing token, a bad one, an id of another organisation and an id of
// nothing all end in the same ErrNotFound.
package auth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"strings"

	"github.com/toolgate/toolgate/ent/tenancy"
)

// ErrNotFound is the one answer for an object the caller cannot reach, for
// whatever reason: no token, a bad token, another organisation's object, or
// no object at all. It is the error ent's privacy policies refuse with.
var ErrNotFound = tenancy.ErrNotFound

// ErrForbidden is returned for an operation the caller's kind of token may
// not perform on objects it can see (an admin-only mutation, say).
var ErrForbidden = errors.New("not permitted")

// Viewer is the caller, resolved from the token. The type lives with the
// privacy policies that read it (ent/tenancy).
type Viewer = tenancy.Viewer

// WithViewer returns a context that carries the viewer: every query made
// with it reaches only the viewer's rows.
func WithViewer(ctx context.Context, v *Viewer) context.Context {
	return tenancy.WithViewer(ctx, v)
}

// FromContext returns the viewer, or ErrNotFound when the request carried
// no valid token.
func FromContext(ctx context.Context) (*Viewer, error) { return tenancy.FromContext(ctx) }

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
