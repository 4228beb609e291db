package policy

import (
	"net/netip"
	"slices"
	"sort"
)

// AllTraffic is E2B's ALL_TRAFFIC: in denyOut it means "deny everything
// the allowOut list does not name".
const AllTraffic = "0.0.0.0/0"

// E2BNetwork is the network object of E2B's create and updateNetwork
// requests (SandboxNetworkConfig), as far as sandlot models it.
type E2BNetwork struct {
	AllowOut           []string             `json:"allowOut,omitempty"`
	DenyOut            []string             `json:"denyOut,omitempty"`
	AllowPublicTraffic *bool                `json:"allowPublicTraffic,omitempty"`
	MaskRequestHost    *string              `json:"maskRequestHost,omitempty"`
	Rules              map[string][]E2BRule `json:"rules,omitempty"`
}

// E2BRule is one entry of E2B's per-domain transform rules.
type E2BRule struct {
	Transform *E2BTransform `json:"transform,omitempty"`
}

// E2BTransform sets request headers on matching HTTPS requests.
type E2BTransform struct {
	Headers map[string]string `json:"headers,omitempty"`
}

// FromE2B maps E2B's allowInternetAccess and network fields onto a
// Policy. E2B's rule is "allowOut wins over denyOut; without either,
// everything is allowed"; sandlot's default is no egress, so:
//
//   - neither field: mode none (E2B would be open);
//   - allowInternetAccess true and no lists: mode open;
//   - allowInternetAccess false, or denyOut holding ALL_TRAFFIC: an
//     allowlist of allowOut (mode none when it is empty);
//   - allowOut alone: an allowlist of allowOut (E2B would be open, since
//     nothing is denied; sandlot reads an allow list as an allowlist);
//   - denyOut without ALL_TRAFFIC: mode open minus denyOut, where allowOut
//     entries punch holes into the denied ranges (E2B's precedence), so
//     allowOut may then hold only addresses, as E2B requires.
//
// denyOut takes addresses and ranges only, as in E2B. Errors wrap
// errdefs.ErrInvalidArgument.
func FromE2B(allowInternetAccess *bool, n *E2BNetwork) (Policy, error) {
	var p Policy
	if n == nil {
		n = &E2BNetwork{}
	}
	if n.AllowPublicTraffic != nil {
		p.Ingress.Public = *n.AllowPublicTraffic
	}
	if n.MaskRequestHost != nil {
		p.Ingress.MaskRequestHost = *n.MaskRequestHost
	}
	headers, err := e2bHeaders(n.Rules)
	if err != nil {
		return Policy{}, err
	}
	p.Headers = headers

	allow, err := ParseRules(n.AllowOut)
	if err != nil {
		return Policy{}, err
	}
	blockAll := allowInternetAccess != nil && !*allowInternetAccess
	var deny []Rule
	for _, s := range n.DenyOut {
		r, err := ParseRule(s)
		if err != nil {
			return Policy{}, err
		}
		if r.Domain != "" || len(r.Ports) > 0 {
			return Policy{}, invalid("denyOut %q: only addresses and ranges can be denied", s)
		}
		if r.Net.Bits() == 0 {
			blockAll = true
			continue
		}
		deny = append(deny, r)
	}

	switch {
	case blockAll || (len(n.DenyOut) == 0 && len(allow) > 0 && allowInternetAccess == nil):
		if len(allow) == 0 {
			p.Mode = None
		} else {
			p.Mode, p.Allow = Allowlist, allow
		}
	case len(deny) > 0:
		var holes []netip.Prefix
		for _, r := range allow {
			if r.Domain != "" {
				return Policy{}, invalid("allowOut %s: a domain needs ALL_TRAFFIC (%s) in denyOut", r.Domain, AllTraffic)
			}
			if len(r.Ports) == 0 {
				holes = append(holes, r.Net)
			}
		}
		var nets []netip.Prefix
		for _, r := range deny {
			nets = append(nets, r.Net)
		}
		nets = subtract(nets, holes)
		if len(nets) > MaxRules {
			return Policy{}, invalid("allowOut exceptions split denyOut into more than %d ranges", MaxRules)
		}
		p.Mode = Open
		for _, pr := range nets {
			p.Deny = append(p.Deny, Rule{Net: pr})
		}
	case allowInternetAccess != nil && *allowInternetAccess:
		p.Mode = Open
	default:
		p.Mode = None
	}
	return p, p.Validate()
}

func e2bHeaders(rules map[string][]E2BRule) ([]HeaderRule, error) {
	if len(rules) > MaxHeaderRules {
		return nil, invalid("%d rule domains, at most %d", len(rules), MaxHeaderRules)
	}
	var out []HeaderRule
	for host, rs := range rules {
		d, err := NormalizeDomain(host, true)
		if err != nil {
			return nil, err
		}
		h := map[string]string{}
		for _, r := range rs {
			if r.Transform == nil {
				continue
			}
			for k, v := range r.Transform.Headers {
				h[k] = v
			}
		}
		if len(h) > 0 {
			out = append(out, HeaderRule{Host: d, Headers: h})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Host < out[j].Host })
	return out, nil
}

// ToE2B reports p in E2B's terms, for getInfo.
func ToE2B(p Policy) (allowInternetAccess *bool, n E2BNetwork) {
	t, f := true, false
	switch p.Mode.Normalize() {
	case None:
		allowInternetAccess = &f
	case Allowlist:
		for _, r := range p.Allow {
			n.AllowOut = append(n.AllowOut, r.String())
		}
		n.DenyOut = []string{AllTraffic}
	case Open:
		allowInternetAccess = &t
		for _, r := range p.Deny {
			n.DenyOut = append(n.DenyOut, r.String())
		}
	}
	public := p.Ingress.Public
	n.AllowPublicTraffic = &public
	if p.Ingress.MaskRequestHost != "" {
		m := p.Ingress.MaskRequestHost
		n.MaskRequestHost = &m
	}
	for _, h := range p.Headers {
		if n.Rules == nil {
			n.Rules = map[string][]E2BRule{}
		}
		n.Rules[h.Host] = []E2BRule{{Transform: &E2BTransform{Headers: h.Headers}}}
	}
	return allowInternetAccess, n
}

// subtract returns the addresses of ps not in any of minus, as prefixes.
func subtract(ps, minus []netip.Prefix) []netip.Prefix {
	out := slices.Clone(ps)
	for _, m := range minus {
		var next []netip.Prefix
		for _, p := range out {
			next = append(next, subtractOne(p, m)...)
		}
		out = next
	}
	return out
}

func subtractOne(p, m netip.Prefix) []netip.Prefix {
	if p.Addr().Is4() != m.Addr().Is4() || !p.Overlaps(m) {
		return []netip.Prefix{p}
	}
	if m.Bits() <= p.Bits() {
		return nil // m covers p
	}
	// p strictly contains m: split p in halves and keep the half without m.
	lo, hi := halves(p)
	return append(subtractOne(lo, m), subtractOne(hi, m)...)
}

func halves(p netip.Prefix) (netip.Prefix, netip.Prefix) {
	bits := p.Bits() + 1
	lo := netip.PrefixFrom(p.Addr(), bits)
	b := p.Addr().AsSlice()
	i := p.Bits() / 8
	b[i] |= 0x80 >> (p.Bits() % 8)
	a, _ := netip.AddrFromSlice(b)
	return lo, netip.PrefixFrom(a, bits)
}
