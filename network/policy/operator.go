package policy

import (
	"fmt"
	"net/netip"
	"strings"
)

// TenantCap is what the operator lets one tenant's sandboxes ask for. The
// zero value allows allowlists of any public destination with at most
// MaxRules rules, no open mode, no internal range, and public ports.
type TenantCap struct {
	// AllowOpen permits mode open (everything public).
	AllowOpen bool `json:"allowOpen,omitempty"`
	// MaxRules caps allow plus deny rules per sandbox (0: MaxRules).
	MaxRules int `json:"maxRules,omitempty"`
	// Domains, when set, bounds the domains an allowlist may name: each
	// domain rule must fall within one of these patterns.
	Domains []string `json:"domains,omitempty"`
	// Nets, when set, bounds the address ranges an allowlist may name.
	Nets []netip.Prefix `json:"nets,omitempty"`
	// Reachable opens internal ranges (private, link-local, the host's
	// addresses) to this tenant's sandboxes. They still need an allow rule
	// in allowlist mode. A metadata address, an address of the host and a
	// sandbox address open only when listed exactly (169.254.169.254/32),
	// never through a wider range that happens to hold them.
	Reachable []netip.Prefix `json:"reachable,omitempty"`
	// NoPublicPorts forbids Ingress.Public: every port request needs the
	// traffic access token.
	NoPublicPorts bool `json:"noPublicPorts,omitempty"`
}

// Operator is the operator's network policy: a default cap and per-tenant
// overrides (an override replaces the default, it does not merge).
type Operator struct {
	Default TenantCap            `json:"default"`
	Tenants map[string]TenantCap `json:"tenants,omitempty"`
}

// Cap returns the cap of tenant.
func (o *Operator) Cap(tenant string) TenantCap {
	if o == nil {
		return TenantCap{}
	}
	if c, ok := o.Tenants[tenant]; ok {
		return c
	}
	return o.Default
}

// Validate checks the operator policy itself (at daemon start).
func (o *Operator) Validate() error {
	if o == nil {
		return nil
	}
	if err := o.Default.validate(); err != nil {
		return fmt.Errorf("default network cap: %w", err)
	}
	for t, c := range o.Tenants {
		if err := c.validate(); err != nil {
			return fmt.Errorf("network cap of tenant %s: %w", t, err)
		}
	}
	return nil
}

func (c TenantCap) validate() error {
	if c.MaxRules < 0 {
		return invalid("maxRules %d is negative", c.MaxRules)
	}
	for _, d := range c.Domains {
		n, err := NormalizeDomain(d, true)
		if err != nil {
			return err
		}
		if n != d {
			return invalid("cap domain %q is not normalized (want %q)", d, n)
		}
	}
	for _, p := range append(append([]netip.Prefix{}, c.Nets...), c.Reachable...) {
		if !p.IsValid() || p != p.Masked() {
			return invalid("cap range %s is not a masked prefix", p)
		}
	}
	return nil
}

// Apply checks p against p's own rules and tenant's cap, and returns the
// effective policy the kernel rules, the proxy and the resolver enforce.
func (o *Operator) Apply(tenant string, p Policy) (*Effective, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	p = p.Clone()
	p.Mode = p.Mode.Normalize()
	c := o.Cap(tenant)
	if p.Mode == Open && !c.AllowOpen {
		return nil, denied("open internet access is not allowed for this tenant; use an allowlist")
	}
	max := c.MaxRules
	if max == 0 || max > MaxRules {
		max = MaxRules
	}
	if n := len(p.Allow) + len(p.Deny); n > max {
		return nil, denied("%d network rules, this tenant may use at most %d", n, max)
	}
	for _, r := range p.Allow {
		if r.Domain != "" && len(c.Domains) > 0 && !withinAny(r.Domain, c.Domains) {
			return nil, denied("%s is outside the domains this tenant may allow (%s)", r.Domain, strings.Join(c.Domains, ", "))
		}
		if r.Net.IsValid() && len(c.Nets) > 0 && !prefixWithinAny(r.Net, c.Nets) {
			return nil, denied("%s is outside the ranges this tenant may allow", r.Net)
		}
	}
	if p.Ingress.Public && c.NoPublicPorts {
		return nil, denied("public ports are not allowed for this tenant; use the traffic access token")
	}
	return &Effective{Tenant: tenant, Policy: p, Reachable: append([]netip.Prefix(nil), c.Reachable...)}, nil
}

// within reports whether every name rule matches is also matched by cap.
func within(rule, cap string) bool {
	if rule == cap {
		return true
	}
	if rs, ok := strings.CutPrefix(rule, "*."); ok {
		cs, ok := strings.CutPrefix(cap, "*.")
		return ok && MatchDomain("*."+cs, rs)
	}
	return MatchDomain(cap, rule)
}

func withinAny(rule string, caps []string) bool {
	for _, c := range caps {
		if within(rule, c) {
			return true
		}
	}
	return false
}

func prefixWithinAny(p netip.Prefix, caps []netip.Prefix) bool {
	for _, c := range caps {
		if c.Bits() <= p.Bits() && c.Contains(p.Addr()) {
			return true
		}
	}
	return false
}
