package web_test

import (
	"context"
	"errors"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/tools/web"
)

// TestPolicyRefusesEmbeddedIPv4: an IPv6 address that carries an IPv4
// one (IPv4-compatible, mapped, translated, NAT64, 6to4, Teredo) or a zone
// is refused by the rule, naming what it carries, like any private
// address; public addresses pass.
func TestPolicyRefusesEmbeddedIPv4(t *testing.T) {
	t.Parallel()
	tests := []struct {
		addr string
		want string // "" passes
	}{
		{"::127.0.0.1", "::7f00:1 is an IPv4-compatible address (deprecated) (::/96), embedding 127.0.0.1, a loopback address (127.0.0.0/8)"},
		{"::10.0.0.1", "embedding 10.0.0.1, a private address (10.0.0.0/8)"},
		{"::8.8.8.8", "IPv4-compatible address (deprecated) (::/96), embedding 8.8.8.8"},
		{"::ffff:127.0.0.1", "127.0.0.1 is a loopback address (127.0.0.0/8)"},
		{"::ffff:169.254.169.254", "169.254.169.254 is a link-local or cloud metadata address"},
		{"::ffff:0:127.0.0.1", "IPv4-translated address (::ffff:0:0:0/96), embedding 127.0.0.1, a loopback address"},
		{"64:ff9b::127.0.0.1", "NAT64 address (64:ff9b::/96), embedding 127.0.0.1, a loopback address"},
		{"64:ff9b::192.168.1.1", "embedding 192.168.1.1, a private address (192.168.0.0/16)"},
		{"64:ff9b:1:a9fe:a9:fe00::", "local-use NAT64 address (64:ff9b:1::/48), embedding 169.254.169.254, a link-local or cloud metadata address"},
		{"2002:7f00:1::", "6to4 address (2002::/16), embedding 127.0.0.1, a loopback address"},
		{"2002:a00:1::1", "embedding 10.0.0.1, a private address"},
		{"2001:0:4136:e378:8000:63bf:80ff:fffe", "Teredo address (2001::/32), embedding 127.0.0.1, a loopback address"},
		{"::1", "::1 is a loopback address (::1/128)"},
		{"::", ":: is an unspecified address (::/128)"},
		{"::1%lo", "::1 is a loopback address (::1/128)"},
		{"fe80::1%eth0", "fe80::1 is a link-local address (fe80::/10)"},
		{"127.0.0.1", "127.0.0.1 is a loopback address"},
		{"93.184.215.14", ""},
		{"2606:2800:21f:cb07:6820:80da:af6b:8b2c", ""},
		{"::ffff:93.184.215.14", ""},
	}
	for _, tt := range tests {
		err := web.Policy{}.Check(netip.MustParseAddr(tt.addr))
		if tt.want == "" {
			require.NoError(t, err, tt.addr)
			continue
		}
		var refused *web.Refused
		require.True(t, errors.As(err, &refused), "%s: %v", tt.addr, err)
		require.Equal(t, "no private addresses", refused.Rule, tt.addr)
		require.Contains(t, refused.Reason, tt.want, tt.addr)
	}
}

// TestFetchRefusesIPv4CompatibleLiteral: http://[::127.0.0.1] is refused
// by the rule before anything is dialled, the way http://127.0.0.1 is, and
// so is a name that resolves to it.
func TestFetchRefusesIPv4CompatibleLiteral(t *testing.T) {
	t.Parallel()
	resolved := 0
	f := web.NewFetcher(web.FetcherConfig{Resolve: func(context.Context, string) ([]netip.Addr, error) {
		resolved++
		return []netip.Addr{netip.MustParseAddr("::127.0.0.1")}, nil
	}})
	for _, raw := range []string{"http://[::127.0.0.1]/", "http://[::127.0.0.1]:8080/admin", "http://[64:ff9b::7f00:1]/", "http://public.example/"} {
		u, err := web.ParseURL(raw)
		require.NoError(t, err, raw)
		_, err = f.Fetch(context.Background(), u)
		var perr *web.PageError
		require.True(t, errors.As(err, &perr), "%s: %T %v", raw, err, err)
		require.Equal(t, web.KindError, perr.Kind, raw)
		require.Contains(t, perr.Msg, "refused by rule no private addresses", raw)
		require.Contains(t, perr.Msg, "embedding 127.0.0.1, a loopback address (127.0.0.0/8)", raw)
	}
	require.Equal(t, 1, resolved, "only the name was resolved")
}
