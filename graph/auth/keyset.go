package auth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/go-jose/go-jose/v4"
)

// signingAlgs are the algorithms a token may be signed with: public-key
// signatures only. "none" and the HMAC algorithms (whose key would be a
// secret shared with the issuer) are never accepted.
var signingAlgs = []jose.SignatureAlgorithm{
	jose.RS256, jose.RS384, jose.RS512, jose.PS256, jose.PS384, jose.PS512,
	jose.ES256, jose.ES384, jose.ES512, jose.EdDSA,
}

// errNoKey is a token signed by a key the issuer does not publish.
var errNoKey = errors.New("no key of the issuer verifies the token")

// keySet is an issuer's JWKS, fetched from its jwks_uri and kept. A token
// signed with a key id not in the set fetches it again, at most once every
// refreshEvery (so tokens with made-up key ids cannot make the server hammer
// the issuer); a set older than maxAge is fetched again at the next token,
// so a key the issuer withdrew stops verifying. It implements go-oidc's
// KeySet: go-oidc checks the issuer, audience and algorithm list, this
// checks the signature with the one key the token names, under the
// algorithm that key is for.
type keySet struct {
	url          string
	client       *http.Client
	refreshEvery time.Duration
	maxAge       time.Duration
	now          func() time.Time

	mu      sync.Mutex
	keys    []jose.JSONWebKey
	fetched time.Time // last fetch that answered
	tried   time.Time // last fetch, answered or not
}

// maxJWKSBytes bounds what is read of an issuer's key set.
const maxJWKSBytes = 1 << 20

// VerifySignature returns the payload of a token whose signature one of the
// issuer's keys verifies.
func (k *keySet) VerifySignature(ctx context.Context, raw string) ([]byte, error) {
	jws, err := jose.ParseSignedCompact(raw, signingAlgs)
	if err != nil {
		return nil, fmt.Errorf("parse token: %w", err)
	}
	if len(jws.Signatures) != 1 {
		return nil, errors.New("a token has exactly one signature")
	}
	h := jws.Signatures[0].Header
	key, err := k.key(ctx, h.KeyID)
	if err != nil {
		return nil, err
	}
	// The key says what it signs with; a token claiming another algorithm
	// is refused even when the key's type could check it.
	if key.Algorithm != "" && key.Algorithm != h.Algorithm {
		return nil, fmt.Errorf("token signed with %s, its key is for %s", h.Algorithm, key.Algorithm)
	}
	return jws.Verify(key)
}

// key returns the signing key named kid (or the only one, when the token
// names none), fetching the set again when it is unknown or old.
func (k *keySet) key(ctx context.Context, kid string) (*jose.JSONWebKey, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	now := k.now()
	stale := k.fetched.IsZero() || now.Sub(k.fetched) > k.maxAge
	known := find(k.keys, kid)
	if known != nil && !stale {
		return known, nil
	}
	if now.Sub(k.tried) < k.refreshEvery {
		// Fetched a moment ago: an unknown key stays unknown, an old set
		// serves until the next fetch is due.
		if known != nil {
			return known, nil
		}
		return nil, errNoKey
	}
	k.tried = now
	keys, err := k.fetch(ctx)
	if err != nil {
		if known != nil {
			// The issuer is out of reach: the keys it published last
			// still verify.
			return known, nil
		}
		return nil, err
	}
	k.keys, k.fetched = keys, now
	if key := find(k.keys, kid); key != nil {
		return key, nil
	}
	return nil, errNoKey
}

// find returns the public signing key with the id, or the only one when
// kid is empty.
func find(keys []jose.JSONWebKey, kid string) *jose.JSONWebKey {
	var match *jose.JSONWebKey
	n := 0
	for i := range keys {
		key := &keys[i]
		if !key.IsPublic() || key.Use != "" && key.Use != "sig" {
			continue
		}
		if kid == "" {
			match, n = key, n+1
			continue
		}
		if key.KeyID == kid {
			return key
		}
	}
	if kid == "" && n == 1 {
		return match
	}
	return nil
}

// fetch reads the issuer's JWKS. Keys of a type go-jose does not know are
// passed over, as RFC 7517 asks; symmetric keys never verify (IsPublic).
func (k *keySet) fetch(ctx context.Context) ([]jose.JSONWebKey, error) {
	// The fetch is for every token waiting on it, not only this request.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, k.url, nil)
	if err != nil {
		return nil, fmt.Errorf("fetch issuer keys: %w", err)
	}
	req.Header.Set("Accept", "application/json")
	res, err := k.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("fetch issuer keys: %w", err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(io.LimitReader(res.Body, maxJWKSBytes))
	if err != nil {
		return nil, fmt.Errorf("fetch issuer keys: %w", err)
	}
	if res.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("fetch issuer keys: %s", res.Status)
	}
	var set struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(body, &set); err != nil {
		return nil, fmt.Errorf("fetch issuer keys: %w", err)
	}
	keys := make([]jose.JSONWebKey, 0, len(set.Keys))
	for _, raw := range set.Keys {
		var key jose.JSONWebKey
		if err := key.UnmarshalJSON(raw); err != nil {
			continue
		}
		keys = append(keys, key)
	}
	return keys, nil
}
