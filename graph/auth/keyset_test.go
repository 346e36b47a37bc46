package auth

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/stretchr/testify/require"
)

// jwksServer publishes keys as an issuer's jwks_uri does, counting fetches.
func jwksServer(t *testing.T, keys ...jose.JSONWebKey) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		n.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: keys})
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

func sign(t *testing.T, alg jose.SignatureAlgorithm, key any, kid string) string {
	t.Helper()
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: alg, Key: key}, (&jose.SignerOptions{}).WithHeader("kid", kid))
	require.NoError(t, err)
	obj, err := s.Sign([]byte(`{"sub":"x"}`))
	require.NoError(t, err)
	out, err := obj.CompactSerialize()
	require.NoError(t, err)
	return out
}

// A key that names its algorithm verifies that one only; symmetric keys
// and HMAC tokens never verify, even with the key's public bytes as the
// secret; an unknown key id fetches the set again at most every
// refreshEvery.
func TestKeySetAlgorithmIsTheKeys(t *testing.T) {
	t.Parallel()
	priv, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	pub := jose.JSONWebKey{Key: &priv.PublicKey, KeyID: "k1", Algorithm: "RS256", Use: "sig"}
	secret := []byte("a shared secret of thirty-two bytes!")
	oct := jose.JSONWebKey{Key: secret, KeyID: "k2", Algorithm: "HS256", Use: "sig"}
	srv, fetches := jwksServer(t, pub, oct)
	ks := &keySet{url: srv.URL, client: srv.Client(), refreshEvery: time.Hour, maxAge: time.Hour, now: time.Now}
	ctx := context.Background()

	_, err = ks.VerifySignature(ctx, sign(t, jose.RS256, priv, "k1"))
	require.NoError(t, err)
	_, err = ks.VerifySignature(ctx, sign(t, jose.RS384, priv, "k1"))
	require.ErrorContains(t, err, "its key is for RS256")
	_, err = ks.VerifySignature(ctx, sign(t, jose.PS256, priv, "k1"))
	require.Error(t, err)
	_, err = ks.VerifySignature(ctx, sign(t, jose.HS256, secret, "k2"))
	require.Error(t, err, "HMAC is never accepted")
	_, err = ks.VerifySignature(ctx, sign(t, jose.HS256, priv.N.Bytes(), "k1"))
	require.Error(t, err, "the public key's bytes are no HMAC secret")
	require.EqualValues(t, 1, fetches.Load())

	for range 5 {
		_, err = ks.VerifySignature(ctx, sign(t, jose.RS256, priv, "unknown"))
		require.ErrorIs(t, err, errNoKey)
	}
	require.EqualValues(t, 1, fetches.Load(), "made-up key ids do not fetch within refreshEvery")
}
