package policy

import "net/netip"

// Range is an address range no sandbox reaches unless the operator allows
// it, with the reason a denial reports.
type Range struct {
	Prefix netip.Prefix
	Why    string
}

// Forbidden lists the ranges that are never the public internet: private
// and shared address space, loopback, link-local (where cloud metadata
// lives: 169.254.169.254, fd00:ec2::254), multicast, reserved, and the
// IPv6 forms that embed an IPv4 address (NAT64, 6to4), which would
// otherwise be a way around the IPv4 entries. The documentation ranges
// (192.0.2.0/24, 198.51.100.0/24, 203.0.113.0/24) are not listed: they
// are not internal, and the tests' fake internet lives there.
//
// The daemon adds its own sandbox pool and the host's addresses; an
// operator may open a range explicitly (TenantCap.Reachable).
var Forbidden = []Range{
	r("0.0.0.0/8", "this-network range"),
	r("10.0.0.0/8", "private range (RFC 1918)"),
	r("100.64.0.0/10", "shared address space (CGNAT)"),
	r("127.0.0.0/8", "loopback"),
	r("169.254.0.0/16", "link-local and metadata range"),
	r("172.16.0.0/12", "private range (RFC 1918)"),
	r("192.0.0.0/24", "IETF protocol assignments"),
	r("192.168.0.0/16", "private range (RFC 1918)"),
	r("198.18.0.0/15", "benchmarking range"),
	r("224.0.0.0/4", "multicast"),
	r("240.0.0.0/4", "reserved range"),
	r("::/128", "unspecified address"),
	r("::1/128", "loopback"),
	r("::ffff:0:0/96", "IPv4-mapped range"),
	r("64:ff9b::/96", "NAT64 range"),
	r("64:ff9b:1::/48", "local NAT64 range"),
	r("100::/64", "discard range"),
	r("2002::/16", "6to4 range"),
	r("fc00::/7", "unique local range (ULA)"),
	r("fe80::/10", "link-local range"),
	r("fec0::/10", "site-local range"),
	r("ff00::/8", "multicast"),
}

// Metadata lists the cloud metadata endpoints, named apart because an
// operator who opens a link-local or ULA range still must not open these
// by accident.
var Metadata = []netip.Addr{
	netip.MustParseAddr("169.254.169.254"),
	netip.MustParseAddr("fd00:ec2::254"),
}

func r(p, why string) Range { return Range{netip.MustParsePrefix(p), why} }

// ForbiddenReason returns why a is never reachable by default, or "".
func ForbiddenReason(a netip.Addr) string {
	a = a.Unmap()
	for _, m := range Metadata {
		if a == m {
			return "cloud metadata address"
		}
	}
	for _, f := range Forbidden {
		if f.Prefix.Contains(a) {
			return f.Why
		}
	}
	return ""
}

// IsMetadata reports whether a is a cloud metadata endpoint.
func IsMetadata(a netip.Addr) bool {
	a = a.Unmap()
	for _, m := range Metadata {
		if a == m {
			return true
		}
	}
	return false
}

// Forbidden4 returns the IPv4 prefixes of Forbidden, for kernel sets.
func Forbidden4() []netip.Prefix {
	var out []netip.Prefix
	for _, f := range Forbidden {
		if f.Prefix.Addr().Is4() {
			out = append(out, f.Prefix)
		}
	}
	return out
}
