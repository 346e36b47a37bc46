package web

import (
	"fmt"
	"net/netip"
	"strings"
)

// rule is one range of addresses a page read may never reach, and the name
// of the rule a refusal cites.
type rule struct {
	prefix netip.Prefix
	name   string
}

// refused are the ranges no page read reaches: a page-reading tool is a
// way into the server's own network unless every address it dials, after
// DNS and on every redirect hop, is checked against them.
var refused = func() []rule {
	var out []rule
	for _, r := range []struct{ cidr, name string }{
		{"0.0.0.0/8", "unspecified address"},
		{"127.0.0.0/8", "loopback address"},
		{"10.0.0.0/8", "private address"},
		{"172.16.0.0/12", "private address"},
		{"192.168.0.0/16", "private address"},
		{"169.254.0.0/16", "link-local or cloud metadata address"},
		{"100.64.0.0/10", "shared (carrier-grade NAT) address"},
		{"192.0.0.0/24", "IETF protocol address"},
		{"198.18.0.0/15", "benchmarking address"},
		{"224.0.0.0/4", "multicast address"},
		{"240.0.0.0/4", "reserved address"},
		{"::/128", "unspecified address"},
		{"::1/128", "loopback address"},
		{"fc00::/7", "unique local (private) address"},
		{"fe80::/10", "link-local address"},
		{"ff00::/8", "multicast address"},
		// Ranges that carry an IPv4 address (it may be private, and some
		// stacks or gateways reach it): refused whatever it is, the
		// refusal naming it (embedded). ::ffff:0:0/96, IPv4-mapped, is
		// checked as the IPv4 address it maps (Check).
		{"::/96", "IPv4-compatible address (deprecated)"},
		{"::ffff:0:0:0/96", "IPv4-translated address"},
		{"64:ff9b::/96", "NAT64 address"},
		{"64:ff9b:1::/48", "local-use NAT64 address"},
		{"2002::/16", "6to4 address"},
		{"2001::/32", "Teredo address"},
	} {
		out = append(out, rule{netip.MustParsePrefix(r.cidr), r.name})
	}
	return out
}()

// Policy decides which addresses page reads may dial.
type Policy struct {
	// allow are ranges reachable although refused: for tests only.
	allow []netip.Prefix
}

// ParseAllow reads TOOLGATE_WEB_ALLOW_PRIVATE: comma-separated CIDRs (or
// single addresses) that page reads may reach although private. Empty: none.
func ParseAllow(s string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		p, err := netip.ParsePrefix(f)
		if err != nil {
			a, aerr := netip.ParseAddr(f)
			if aerr != nil {
				return nil, fmt.Errorf("parse allowed range %q: %w", f, err)
			}
			p = netip.PrefixFrom(a, a.BitLen())
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

// Check returns a refusal naming the rule when addr may not be dialled.
func (p Policy) Check(addr netip.Addr) error {
	// A zone (fe80::1%eth0, ::1%lo) would keep the address out of every
	// range: a prefix never contains a zoned address.
	addr = addr.Unmap().WithZone("")
	for _, a := range p.allow {
		if a.Contains(addr) {
			return nil
		}
	}
	r, ok := match(addr)
	if !ok {
		return nil
	}
	reason := fmt.Sprintf("%s is %s (%s)", addr, r.named(), r.prefix)
	if v4, ok := embedded(addr); ok {
		reason += ", embedding " + v4.String()
		if inner, ok := match(v4); ok {
			reason += fmt.Sprintf(", %s (%s)", inner.named(), inner.prefix)
		}
	}
	return &Refused{Rule: "no private addresses", Reason: reason}
}

// named is the rule's name after its article: "a loopback address", "an
// unspecified address".
func (r rule) named() string {
	if strings.ContainsRune("aeiouAEIOU", rune(r.name[0])) {
		return "an " + r.name
	}
	return "a " + r.name
}

// match is the first refused range addr is in.
func match(addr netip.Addr) (rule, bool) {
	for _, r := range refused {
		if r.prefix.Contains(addr) {
			return r, true
		}
	}
	return rule{}, false
}

// The refused ranges that carry an IPv4 address, by where it sits.
var (
	compatible = []netip.Prefix{netip.MustParsePrefix("::/96"), netip.MustParsePrefix("::ffff:0:0:0/96"), netip.MustParsePrefix("64:ff9b::/96")}
	nat64Local = netip.MustParsePrefix("64:ff9b:1::/48")
	sixToFour  = netip.MustParsePrefix("2002::/16")
	teredo     = netip.MustParsePrefix("2001::/32")
)

// embedded is the IPv4 address an IPv6 address of a refused range carries,
// so a refusal can name it: the last 32 bits of an IPv4-compatible,
// IPv4-translated or NAT64 (/96) one, the 32 bits around the reserved
// octet of a local-use NAT64 (/48) one (RFC 6052), bits 16 to 48 of a 6to4
// one, and the client's, inverted, in the last 32 bits of a Teredo one.
// The unspecified and loopback addresses carry none.
func embedded(addr netip.Addr) (netip.Addr, bool) {
	if !addr.Is6() || addr.Is4In6() || addr == netip.IPv6Unspecified() || addr == netip.IPv6Loopback() {
		return netip.Addr{}, false
	}
	b := addr.As16()
	switch {
	case nat64Local.Contains(addr):
		return netip.AddrFrom4([4]byte{b[6], b[7], b[9], b[10]}), true
	case sixToFour.Contains(addr):
		return netip.AddrFrom4([4]byte(b[2:6])), true
	case teredo.Contains(addr):
		return netip.AddrFrom4([4]byte{^b[12], ^b[13], ^b[14], ^b[15]}), true
	}
	for _, p := range compatible {
		if p.Contains(addr) {
			return netip.AddrFrom4([4]byte(b[12:16])), true
		}
	}
	return netip.Addr{}, false
}

// Refused is a page read the safety rules stopped before anything was
// fetched from the address: a private address, a scheme, robots.txt.
type Refused struct {
	// Rule names the rule, e.g. "no private addresses".
	Rule string
	// Reason says what broke it.
	Reason string
}

func (e *Refused) Error() string { return "refused by rule " + e.Rule + ": " + e.Reason }
