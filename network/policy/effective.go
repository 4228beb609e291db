package policy

import (
	"net/netip"
	"strings"
)

// Effective is a sandbox's policy after the operator's caps: what is
// enforced. It is immutable once built; a policy update builds a new one.
type Effective struct {
	Tenant string `json:"tenant"`
	// Context is the execution context the sandbox serves ("" if none), for
	// the audit trail.
	Context string `json:"context,omitempty"`
	Policy  Policy `json:"policy"`
	// Reachable is the internal ranges the operator opened to the tenant.
	Reachable []netip.Prefix `json:"reachable,omitempty"`
}

// Mode returns the egress mode.
func (e *Effective) Mode() Mode {
	if e == nil {
		return None
	}
	return e.Policy.Mode.Normalize()
}

// Dest is one outbound destination: the name the sandbox used (SNI, Host
// header, or the name its resolver answered for the address; "" when
// unknown), the address the connection goes to, and the port.
type Dest struct {
	Name string
	Addr netip.Addr
	Port uint16
}

// Decision is the verdict on a Dest, with a reason for the audit trail.
type Decision struct {
	Allow  bool
	Reason string
}

func allow(why string) Decision { return Decision{true, why} }
func deny(why string) Decision  { return Decision{false, why} }

// Internal tells the daemon-specific internal addresses (the host's own,
// the sandbox pool) apart: it returns why a is internal, or "".
type Internal func(a netip.Addr) string

// CheckAddr decides whether the address itself may be reached at all:
// forbidden and internal ranges are refused unless the operator opened
// them. It does not look at the rules.
func (e *Effective) CheckAddr(a netip.Addr, internal Internal) Decision {
	a = a.Unmap()
	if !a.IsValid() {
		return deny("no destination address")
	}
	// The host's and the sandboxes' own addresses first: they are the
	// likelier target, and their reason is the more telling one.
	why, exact := "", false
	if internal != nil {
		why = internal(a)
		exact = why != ""
	}
	if why == "" {
		why = ForbiddenReason(a)
		exact = IsMetadata(a)
	}
	if why == "" {
		return allow("")
	}
	if e.reachable(a, exact) {
		return allow("operator-opened range")
	}
	return deny(why + " " + a.String())
}

// reachable reports whether the operator opened a. Metadata and the
// daemon's internal addresses open only when listed exactly (a /32 or
// /128), never through a wider range that happens to hold them.
func (e *Effective) reachable(a netip.Addr, exact bool) bool {
	if e == nil {
		return false
	}
	for _, p := range e.Reachable {
		if exact && !(p.IsSingleIP() && p.Addr() == a) {
			continue
		}
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// Check decides a connection: the address must be reachable (CheckAddr),
// then deny rules win over everything, then mode open allows and mode
// allowlist allows what an allow rule names. A domain rule matches d.Name;
// an address rule matches d.Addr. The proxy makes sure d.Name and d.Addr
// belong together (the address is one the name resolves to) before it
// trusts a domain match.
func (e *Effective) Check(d Dest, internal Internal) Decision {
	if v := e.CheckAddr(d.Addr, internal); !v.Allow {
		return v
	}
	mode := e.Mode()
	if mode == None {
		return deny("network mode none")
	}
	name, _ := CanonicalName(d.Name)
	addr := d.Addr.Unmap()
	for _, r := range e.Policy.Deny {
		if r.matches(name, addr, d.Port) {
			return deny("denied by rule " + r.String())
		}
	}
	if mode == Open {
		return allow("mode open")
	}
	for _, r := range e.Policy.Allow {
		if r.matches(name, addr, d.Port) {
			return allow("allowed by rule " + r.String())
		}
	}
	if name != "" {
		return deny("not in the allowlist: " + name)
	}
	return deny("not in the allowlist: " + addr.String())
}

func (r Rule) matches(name string, addr netip.Addr, port uint16) bool {
	if !r.portOK(port) {
		return false
	}
	if r.Domain != "" {
		return name != "" && MatchDomain(r.Domain, name)
	}
	return addr.IsValid() && r.Net.Contains(addr)
}

// AllowName reports whether the resolver answers name for this sandbox:
// in mode open unless a port-less deny rule names it, in mode allowlist
// when a domain allow rule names it (on any port).
func (e *Effective) AllowName(name string) bool {
	name, ok := CanonicalName(name)
	if !ok {
		return false
	}
	switch e.Mode() {
	case Open:
		for _, r := range e.Policy.Deny {
			if r.Domain != "" && len(r.Ports) == 0 && MatchDomain(r.Domain, name) {
				return false
			}
		}
		return true
	case Allowlist:
		for _, r := range e.Policy.Deny {
			if r.Domain != "" && len(r.Ports) == 0 && MatchDomain(r.Domain, name) {
				return false
			}
		}
		for _, r := range e.Policy.Allow {
			if r.Domain != "" && MatchDomain(r.Domain, name) {
				return true
			}
		}
	}
	return false
}

// DenyNets returns the address ranges of port-less deny rules, which the
// kernel enforces on what it forwards (mode open's non-TCP traffic).
func (e *Effective) DenyNets() []netip.Prefix {
	var out []netip.Prefix
	for _, r := range e.Policy.Deny {
		if r.Net.IsValid() && len(r.Ports) == 0 {
			out = append(out, r.Net)
		}
	}
	return out
}

// HeadersFor returns the header rule for name: the exact rule, else the
// longest matching wildcard; nil when none.
func (e *Effective) HeadersFor(name string) map[string]string {
	if e == nil {
		return nil
	}
	name, ok := CanonicalName(name)
	if !ok {
		return nil
	}
	var best *HeaderRule
	for i := range e.Policy.Headers {
		h := &e.Policy.Headers[i]
		if h.Host == name {
			return h.Headers
		}
		if strings.HasPrefix(h.Host, "*.") && MatchDomain(h.Host, name) && (best == nil || len(h.Host) > len(best.Host)) {
			best = h
		}
	}
	if best == nil {
		return nil
	}
	return best.Headers
}

// KernelReach returns the IPv4 ranges the operator opened, for the
// kernel's forward rules, with the metadata addresses cut out of wider
// ranges (they open only when listed exactly).
func (e *Effective) KernelReach() []netip.Prefix {
	if e == nil {
		return nil
	}
	var out []netip.Prefix
	for _, p := range e.Reachable {
		if !p.Addr().Is4() {
			continue
		}
		ps := []netip.Prefix{p}
		for _, m := range Metadata {
			if m.Is4() && !(p.IsSingleIP() && p.Addr() == m) {
				ps = subtract(ps, []netip.Prefix{netip.PrefixFrom(m, 32)})
			}
		}
		out = append(out, ps...)
	}
	return out
}
