package scope_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/runtime/scope"
)

var (
	secret = []byte("0123456789abcdef0123456789abcdef")
	start  = time.Date(2026, 3, 14, 15, 9, 26, 0, time.UTC)
)

const ttl = 10 * time.Minute

type testBundle struct {
	signer *scope.Signer
	// now is what the signer's clock reads; tests move it.
	now    time.Time
	claims scope.Claims
}

func setup(t *testing.T) *testBundle {
	t.Helper()
	b := &testBundle{
		now: start,
		claims: scope.Claims{
			OrganizationID: 1,
			UserID:         2,
			AgentID:        3,
			ConversationID: 4,
			TurnID:         5,
			Tools:          []string{"calculator", "read_tool_result", "crm__find_contact"},
		},
	}
	signer, err := scope.NewSigner(secret, func() time.Time { return b.now }, ttl)
	require.NoError(t, err)
	b.signer = signer
	return b
}

func (b *testBundle) mint(t *testing.T) string {
	t.Helper()
	token, err := b.signer.Mint(b.claims)
	require.NoError(t, err)
	return token
}

func TestRoundTrip(t *testing.T) {
	t.Parallel()
	b := setup(t)
	token := b.mint(t)
	require.True(t, scope.IsScopeToken(token))

	got, err := b.signer.Verify(token)
	require.NoError(t, err)
	want := b.claims
	want.IssuedAt = start
	want.ExpiresAt = start.Add(ttl)
	require.Equal(t, want, got)
	require.True(t, got.Offers("crm__find_contact"))
	require.False(t, got.Offers("run_code"))
}

func TestMintStampsTimesToTheSecond(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.now = start.Add(700 * time.Millisecond)
	b.claims.IssuedAt = start.Add(-time.Hour)
	b.claims.ExpiresAt = start.Add(time.Hour * 24)
	got, err := b.signer.Verify(b.mint(t))
	require.NoError(t, err)
	require.Equal(t, start, got.IssuedAt)
	require.Equal(t, start.Add(ttl), got.ExpiresAt)
}

func TestMintRefusesMissingIDs(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		give func(*scope.Claims)
		want string
	}{
		{"organization", func(c *scope.Claims) { c.OrganizationID = 0 }, "organization id 0"},
		{"user", func(c *scope.Claims) { c.UserID = -1 }, "user id -1"},
		{"agent", func(c *scope.Claims) { c.AgentID = 0 }, "agent id 0"},
		{"conversation", func(c *scope.Claims) { c.ConversationID = 0 }, "conversation id 0"},
		{"turn", func(c *scope.Claims) { c.TurnID = 0 }, "turn id 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			tt.give(&b.claims)
			_, err := b.signer.Mint(b.claims)
			require.ErrorContains(t, err, tt.want)
		})
	}
}

// flip changes one character of s at i to another character of the
// base64url alphabet.
func flip(s string, i int) string {
	c := byte('A')
	if s[i] == 'A' {
		c = 'B'
	}
	return s[:i] + string(c) + s[i+1:]
}

func TestVerifyRefuses(t *testing.T) {
	t.Parallel()
	b := setup(t)
	token := b.mint(t)
	dot := strings.LastIndexByte(token, '.')
	signed, sig := token[:dot], token[dot+1:]

	otherSigner, err := scope.NewSigner([]byte(strings.Repeat("k", 32)), func() time.Time { return start }, ttl)
	require.NoError(t, err)
	otherToken, err := otherSigner.Mint(b.claims)
	require.NoError(t, err)

	// A forger who knows the format rewrites the payload to reach another
	// conversation and keeps the old signature.
	widened := b.claims
	widened.ConversationID = 99
	forgedSigner, err := scope.NewSigner([]byte(strings.Repeat("x", 32)), func() time.Time { return start }, ttl)
	require.NoError(t, err)
	forged, err := forgedSigner.Mint(widened)
	require.NoError(t, err)
	forgedPayload := forged[:strings.LastIndexByte(forged, '.')]

	tests := []struct {
		name string
		give string
	}{
		{"empty", ""},
		{"prefix only", scope.Prefix},
		{"garbage", "tgs_not a token at all"},
		{"no signature", signed},
		{"empty signature", signed + "."},
		{"wrong prefix", "tgx_" + token[len(scope.Prefix):]},
		{"api token shape", "tga_" + token[len(scope.Prefix):]},
		{"tampered payload", flip(token, len(scope.Prefix)+3)},
		{"widened payload", forgedPayload + "." + sig},
		{"tampered signature", flip(token, dot+5)},
		{"truncated signature", token[:len(token)-1]},
		{"extended signature", token + "A"},
		{"padded signature", token + "="},
		{"signature only", scope.Prefix + "." + sig},
		{"other secret", otherToken},
		{"extra dot", signed + ".." + sig},
		{"payload not base64", scope.Prefix + "!!!." + sig},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := b.signer.Verify(tt.give)
			require.ErrorIs(t, err, scope.ErrInvalid)
			require.Equal(t, scope.ErrInvalid, err)
			require.Zero(t, got)
		})
	}
}

// handSign signs an arbitrary payload with the test secret, to reach the
// checks Verify makes after the signature.
func handSign(encoded string) string {
	signed := scope.Prefix + encoded
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte(signed))
	return signed + "." + base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

func TestVerifyRefusesSignedGarbage(t *testing.T) {
	t.Parallel()
	b := setup(t)
	enc := base64.RawURLEncoding.EncodeToString
	tests := []struct {
		name string
		give string
	}{
		{"payload not base64", handSign("!!!")},
		{"payload padded", handSign(base64.URLEncoding.EncodeToString([]byte(`{"org":1}`)))},
		{"payload not json", handSign(enc([]byte("[1,2")))},
		{"payload wrong types", handSign(enc([]byte(`{"org":"1","iat":0,"exp":99999999999}`)))},
		{"no lifetime", handSign(enc([]byte(`{"org":1,"usr":2,"agt":3,"cnv":4,"trn":5}`)))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := b.signer.Verify(tt.give)
			require.Equal(t, scope.ErrInvalid, err)
		})
	}

	// The hand-signed control passes, so the cases above fail for their
	// payloads and not for the signing.
	iat := start.Unix()
	got, err := b.signer.Verify(handSign(enc([]byte(fmt.Sprintf(`{"org":1,"usr":2,"agt":3,"cnv":4,"trn":5,"iat":%d,"exp":%d}`, iat, iat+60)))))
	require.NoError(t, err)
	require.Equal(t, 4, got.ConversationID)
}

func TestVerifyLifetime(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		give time.Duration // how long after minting the token is verified
		want error
	}{
		{"fresh", 0, nil},
		{"just before expiry", ttl - time.Second, nil},
		{"expired within skew", ttl + scope.Skew - time.Second, nil},
		{"expired past skew", ttl + scope.Skew, scope.ErrInvalid},
		{"long expired", 24 * time.Hour, scope.ErrInvalid},
		{"verifier clock behind within skew", -scope.Skew, nil},
		{"issued in the future", -scope.Skew - time.Second, scope.ErrInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			token := b.mint(t)
			b.now = start.Add(tt.give)
			_, err := b.signer.Verify(token)
			require.Equal(t, tt.want, err)
		})
	}
}

func TestNewSignerRefuses(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		giveSecret []byte
		giveTTL    time.Duration
		want       string
	}{
		{"short secret", secret[:31], ttl, "secret has 31 bytes"},
		{"no secret", nil, ttl, "secret has 0 bytes"},
		{"no ttl", secret, 0, "ttl 0s is under a second"},
		{"negative ttl", secret, -time.Minute, "ttl -1m0s is under a second"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := scope.NewSigner(tt.giveSecret, nil, tt.giveTTL)
			require.ErrorContains(t, err, tt.want)
		})
	}
}

func TestSignerKeepsItsOwnSecret(t *testing.T) {
	t.Parallel()
	key := []byte(string(secret))
	signer, err := scope.NewSigner(key, func() time.Time { return start }, ttl)
	require.NoError(t, err)
	token, err := signer.Mint(setup(t).claims)
	require.NoError(t, err)
	// The caller reusing its buffer must not change what the signer accepts.
	key[0] ^= 0xff
	_, err = signer.Verify(token)
	require.NoError(t, err)
}

func TestGenerateSecret(t *testing.T) {
	t.Parallel()
	a, err := scope.GenerateSecret()
	require.NoError(t, err)
	b, err := scope.GenerateSecret()
	require.NoError(t, err)
	require.Len(t, a, scope.MinSecretLen)
	require.NotEqual(t, a, b)
	_, err = scope.NewSigner(a, nil, ttl)
	require.NoError(t, err)
}

func TestIsScopeToken(t *testing.T) {
	t.Parallel()
	tests := []struct {
		give string
		want bool
	}{
		{"tgs_abc.def", true},
		{"tgs_", true},
		{"tga_abc", false},
		{"Bearer tgs_abc", false},
		{"", false},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, scope.IsScopeToken(tt.give), tt.give)
	}
}

func FuzzVerify(f *testing.F) {
	signer, err := scope.NewSigner(secret, func() time.Time { return start }, ttl)
	require.NoError(f, err)
	for _, c := range []scope.Claims{
		{OrganizationID: 1, UserID: 2, AgentID: 3, ConversationID: 4, TurnID: 5},
		{OrganizationID: 7, UserID: 7, AgentID: 7, ConversationID: 7, TurnID: 7, Tools: []string{}},
		{OrganizationID: 1, UserID: 1, AgentID: 1, ConversationID: 1, TurnID: 1, Tools: []string{"calculator", "crm__find"}},
	} {
		token, err := signer.Mint(c)
		require.NoError(f, err)
		f.Add(token)
		f.Add(flip(token, len(token)-2))
	}
	f.Add("")
	f.Add("tgs_.")
	f.Add("tgs_e30.AAAA")

	f.Fuzz(func(t *testing.T, token string) {
		claims, err := signer.Verify(token)
		if err != nil {
			require.Equal(t, scope.ErrInvalid, err)
			require.Zero(t, claims)
			return
		}
		// Minting is deterministic at a fixed clock, so a token the signer
		// made is exactly what minting its claims again produces.
		again, err := signer.Mint(claims)
		require.NoError(t, err)
		require.Equal(t, again, token)
	})
}

func BenchmarkMint(b *testing.B) {
	signer, err := scope.NewSigner(secret, nil, ttl)
	require.NoError(b, err)
	c := scope.Claims{OrganizationID: 1, UserID: 2, AgentID: 3, ConversationID: 4, TurnID: 5, Tools: []string{"calculator", "read_tool_result", "read_transcript", "clarify", "suggest_next_actions"}}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := signer.Mint(c); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkVerify(b *testing.B) {
	signer, err := scope.NewSigner(secret, nil, ttl)
	require.NoError(b, err)
	c := scope.Claims{OrganizationID: 1, UserID: 2, AgentID: 3, ConversationID: 4, TurnID: 5, Tools: []string{"calculator", "read_tool_result", "read_transcript", "clarify", "suggest_next_actions"}}
	token, err := signer.Mint(c)
	require.NoError(b, err)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := signer.Verify(token); err != nil {
			b.Fatal(err)
		}
	}
}
