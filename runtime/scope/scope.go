// Package scope mints and verifies the short-lived signed tokens a turn's tool
// calls carry. A token names the organisation, user, agent, conversation and
// turn it was minted for and the tools offered that turn; resolvers reach
// nothing else with it.
package scope

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Prefix starts every scope token, so the auth middleware can tell one from
// an API token without trying to verify it.
const Prefix = "tgs_"

// MinSecretLen is the shortest secret a Signer accepts: HMAC-SHA256 gains
// nothing from more than 32 bytes and loses strength with fewer.
const MinSecretLen = 32

// Skew is how far the clocks of the replica that minted a token and the one
// that verifies it may disagree.
const Skew = 30 * time.Second

// maxTokenLen bounds the work Verify does on hostile input; a turn offering
// every tool of the widest catalogue stays far below it.
const maxTokenLen = 16 << 10

// ErrInvalid is the one error Verify returns, whatever was wrong with the
// token, so that no caller can tell a forgery from an expired token.
var ErrInvalid = errors.New("invalid scope token")

// Claims are what a scope token grants.
type Claims struct {
	OrganizationID int
	UserID         int
	AgentID        int
	ConversationID int
	TurnID         int
	// Tools are the names offered to the model this turn.
	Tools []string
	// IssuedAt and ExpiresAt are set by Mint, to the second.
	IssuedAt  time.Time
	ExpiresAt time.Time
}

// Offers reports whether the turn offered the tool.
func (c Claims) Offers(tool string) bool {
	return slices.Contains(c.Tools, tool)
}

// payload is the signed JSON; short keys keep the Authorization header small.
type payload struct {
	Org   int      `json:"org"`
	User  int      `json:"usr"`
	Agent int      `json:"agt"`
	Conv  int      `json:"cnv"`
	Turn  int      `json:"trn"`
	Tools []string `json:"tools"`
	Iat   int64    `json:"iat"`
	Exp   int64    `json:"exp"`
}

// Signer mints and verifies scope tokens with one server secret.
type Signer struct {
	secret []byte
	now    func() time.Time
	ttl    time.Duration
}

// NewSigner returns a Signer whose tokens live for ttl. The secret must be at
// least MinSecretLen bytes; now is the clock, time.Now when nil.
func NewSigner(secret []byte, now func() time.Time, ttl time.Duration) (*Signer, error) {
	if len(secret) < MinSecretLen {
		return nil, fmt.Errorf("new signer: secret has %d bytes, want at least %d", len(secret), MinSecretLen)
	}
	if ttl < time.Second {
		return nil, fmt.Errorf("new signer: ttl %s is under a second", ttl)
	}
	if now == nil {
		now = time.Now
	}
	return &Signer{secret: bytes.Clone(secret), now: now, ttl: ttl}, nil
}

// GenerateSecret returns a fresh random secret of MinSecretLen bytes, for a
// server that has no TOOLGATE_SECRET and none stored yet.
func GenerateSecret() ([]byte, error) {
	secret := make([]byte, MinSecretLen)
	if _, err := rand.Read(secret); err != nil {
		return nil, fmt.Errorf("generate secret: %w", err)
	}
	return secret, nil
}

// IsScopeToken reports whether s has the shape of a scope token, not whether
// it is valid.
func IsScopeToken(s string) bool {
	return strings.HasPrefix(s, Prefix)
}

// Mint signs c, stamping IssuedAt and ExpiresAt from the signer's clock and
// ttl; the values c carries for them are ignored.
func (s *Signer) Mint(c Claims) (string, error) {
	for _, id := range []struct {
		name string
		v    int
	}{
		{"organization", c.OrganizationID},
		{"user", c.UserID},
		{"agent", c.AgentID},
		{"conversation", c.ConversationID},
		{"turn", c.TurnID},
	} {
		if id.v <= 0 {
			return "", fmt.Errorf("mint scope token: %s id %d is not positive", id.name, id.v)
		}
	}
	now := s.now().Unix()
	raw, err := json.Marshal(payload{
		Org:   c.OrganizationID,
		User:  c.UserID,
		Agent: c.AgentID,
		Conv:  c.ConversationID,
		Turn:  c.TurnID,
		Tools: c.Tools,
		Iat:   now,
		Exp:   now + int64(s.ttl/time.Second),
	})
	if err != nil {
		return "", fmt.Errorf("mint scope token: %w", err)
	}
	signed := Prefix + base64.RawURLEncoding.EncodeToString(raw)
	if len(signed) > maxTokenLen-44 {
		return "", fmt.Errorf("mint scope token: %d tools make the token too long", len(c.Tools))
	}
	return signed + "." + s.sign(signed), nil
}

// Verify checks the token's signature and lifetime and returns its claims.
// Every failure is ErrInvalid.
func (s *Signer) Verify(token string) (Claims, error) {
	if len(token) > maxTokenLen || !IsScopeToken(token) {
		return Claims{}, ErrInvalid
	}
	dot := strings.LastIndexByte(token, '.')
	if dot < 0 {
		return Claims{}, ErrInvalid
	}
	signed, sig := token[:dot], token[dot+1:]
	// Comparing the encoded signature, not decoded bytes, leaves exactly one
	// accepted spelling of each token.
	if !hmac.Equal([]byte(sig), []byte(s.sign(signed))) {
		return Claims{}, ErrInvalid
	}
	raw, err := base64.RawURLEncoding.DecodeString(signed[len(Prefix):])
	if err != nil {
		return Claims{}, ErrInvalid
	}
	var p payload
	if err := json.Unmarshal(raw, &p); err != nil {
		return Claims{}, ErrInvalid
	}
	now := s.now()
	issued, expires := time.Unix(p.Iat, 0).UTC(), time.Unix(p.Exp, 0).UTC()
	if !now.Before(expires.Add(Skew)) || now.Add(Skew).Before(issued) {
		return Claims{}, ErrInvalid
	}
	return Claims{
		OrganizationID: p.Org,
		UserID:         p.User,
		AgentID:        p.Agent,
		ConversationID: p.Conv,
		TurnID:         p.Turn,
		Tools:          p.Tools,
		IssuedAt:       issued,
		ExpiresAt:      expires,
	}, nil
}

// sign returns the base64url HMAC-SHA256 of the prefix and encoded payload.
func (s *Signer) sign(signed string) string {
	mac := hmac.New(sha256.New, s.secret)
	mac.Write([]byte(signed))
	return base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}
