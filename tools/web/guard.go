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
		// NAT64 and 6to4 embed an IPv4 address that may be private.
		{"64:ff9b::/96", "NAT64 address"},
		{"2002::/16", "6to4 address"},
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
	addr = addr.Unmap()
	for _, a := range p.allow {
		if a.Contains(addr) {
			return nil
		}
	}
	for _, r := range refused {
		if r.prefix.Contains(addr) {
			return &Refused{Rule: "no private addresses", Reason: fmt.Sprintf("%s is a %s (%s)", addr, r.name, r.prefix)}
		}
	}
	return nil
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
