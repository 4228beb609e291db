// Package policy is the network policy of a sandbox: its egress mode
// (none, allowlist, open), the rules of its allowlist and denylist, its
// ingress (public ports, host masking), the operator's caps on what a
// tenant may ask for, and the address ranges no sandbox reaches unless the
// operator says so.
//
// A request is validated once (Parse*, Operator.Apply) and the result, an
// Effective policy, is what the kernel rules, the egress proxy and the
// resolver consult. Errors wrap errdefs.ErrInvalidArgument (malformed) or
// errdefs.ErrPermissionDenied (beyond the operator's caps), so the edges
// answer 400 or 403.
package policy

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/sandlot/sandlot/errdefs"
)

// Mode is a sandbox's egress mode.
type Mode string

// The modes. The zero value means None.
const (
	// None: no egress at all (the default). Ports can still be served.
	None Mode = "none"
	// Allowlist: only what an Allow rule names, minus what a Deny rule names.
	Allowlist Mode = "allowlist"
	// Open: everything public, minus what a Deny rule names.
	Open Mode = "open"
)

// Normalize returns m with the zero value read as None.
func (m Mode) Normalize() Mode {
	if m == "" {
		return None
	}
	return m
}

// Valid reports whether m is a known mode (or empty).
func (m Mode) Valid() bool {
	switch m.Normalize() {
	case None, Allowlist, Open:
		return true
	}
	return false
}

// Limits on a request, so a policy stays cheap to evaluate per connection.
const (
	MaxRules      = 256 // allow plus deny rules in one policy
	MaxPortRanges = 16  // port ranges in one rule
	maxNameLen    = 253
)

// PortRange is an inclusive range of TCP/UDP ports.
type PortRange struct{ Lo, Hi uint16 }

// Contains reports whether port is in r.
func (r PortRange) Contains(port uint16) bool { return port >= r.Lo && port <= r.Hi }

func (r PortRange) String() string {
	if r.Lo == r.Hi {
		return strconv.Itoa(int(r.Lo))
	}
	return fmt.Sprintf("%d-%d", r.Lo, r.Hi)
}

// Rule names destinations: a domain (exact, or "*.example.org" for every
// subdomain at any depth but not the apex) or an address range, optionally
// restricted to ports. Exactly one of Domain and Net is set.
//
// Its text form is what ParseRule reads and String writes:
// "example.org", "*.example.org:443", "api.example.org:80,443",
// "10.1.2.3", "203.0.113.0/24:8000-8999", "[2001:db8::/32]:443".
type Rule struct {
	Domain string       `json:"domain,omitempty"`
	Net    netip.Prefix `json:"net,omitzero"`
	Ports  []PortRange  `json:"ports,omitempty"`
}

// ParseRule reads the text form of a rule.
func ParseRule(s string) (Rule, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return Rule{}, invalid("empty rule")
	}
	if len(s) > maxNameLen+64 {
		return Rule{}, invalid("rule %.40q... is too long", s)
	}
	host, ports := s, ""
	if strings.HasPrefix(s, "[") {
		end := strings.Index(s, "]")
		if end < 0 {
			return Rule{}, invalid("rule %q: missing ]", s)
		}
		host, ports = s[1:end], s[end+1:]
		if ports != "" {
			if !strings.HasPrefix(ports, ":") {
				return Rule{}, invalid("rule %q: expected :ports after ]", s)
			}
			ports = ports[1:]
		}
	} else if strings.Count(s, ":") == 1 {
		host, ports, _ = strings.Cut(s, ":")
	} else if strings.Count(s, ":") > 1 {
		// A bare IPv6 address or prefix: no ports without brackets.
		host = s
	}
	var r Rule
	if strings.Contains(host, ":") || isIPish(host) {
		p, err := parseNet(host)
		if err != nil {
			return Rule{}, invalid("rule %q: %v", s, err)
		}
		r.Net = p
	} else {
		d, err := NormalizeDomain(host, true)
		if err != nil {
			return Rule{}, fmt.Errorf("rule %q: %w", s, err)
		}
		r.Domain = d
	}
	if ports != "" || strings.HasSuffix(s, ":") {
		pr, err := parsePorts(ports)
		if err != nil {
			return Rule{}, invalid("rule %q: %v", s, err)
		}
		r.Ports = pr
	}
	return r, nil
}

// MustRule is ParseRule for literals in tests and defaults.
func MustRule(s string) Rule {
	r, err := ParseRule(s)
	if err != nil {
		panic(err)
	}
	return r
}

// isIPish reports whether host reads as an IPv4 address or prefix rather
// than a name. A name's last label is never all digits.
func isIPish(host string) bool {
	h, _, _ := strings.Cut(host, "/")
	if _, err := netip.ParseAddr(h); err == nil {
		return true
	}
	last := h[strings.LastIndex(h, ".")+1:]
	if last == "" {
		return false
	}
	for _, c := range last {
		if c < '0' || c > '9' {
			return false
		}
	}
	return strings.Contains(host, "/") || strings.Count(h, ".") == 3
}

func parseNet(s string) (netip.Prefix, error) {
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return netip.Prefix{}, fmt.Errorf("bad address range: %v", err)
		}
		if p.Addr().Is4In6() {
			return netip.Prefix{}, fmt.Errorf("write IPv4 ranges as IPv4, not %s", s)
		}
		return p.Masked(), nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("bad address: %v", err)
	}
	if a.Zone() != "" {
		return netip.Prefix{}, fmt.Errorf("zoned address %s", s)
	}
	a = a.Unmap()
	return netip.PrefixFrom(a, a.BitLen()), nil
}

func parsePorts(s string) ([]PortRange, error) {
	if s == "" {
		return nil, fmt.Errorf("empty port list")
	}
	parts := strings.Split(s, ",")
	if len(parts) > MaxPortRanges {
		return nil, fmt.Errorf("more than %d port ranges", MaxPortRanges)
	}
	var out []PortRange
	for _, p := range parts {
		lo, hi, isRange := strings.Cut(strings.TrimSpace(p), "-")
		l, err := parsePort(lo)
		if err != nil {
			return nil, err
		}
		h := l
		if isRange {
			if h, err = parsePort(hi); err != nil {
				return nil, err
			}
			if h < l {
				return nil, fmt.Errorf("port range %s is reversed", p)
			}
		}
		out = append(out, PortRange{l, h})
	}
	return out, nil
}

func parsePort(s string) (uint16, error) {
	n, err := strconv.ParseUint(s, 10, 16)
	if err != nil || n == 0 {
		return 0, fmt.Errorf("bad port %q (1-65535)", s)
	}
	return uint16(n), nil
}

func (r Rule) String() string {
	var b strings.Builder
	switch {
	case r.Domain != "":
		b.WriteString(r.Domain)
	case r.Net.Addr().Is6() && len(r.Ports) > 0:
		b.WriteString("[" + r.netString() + "]")
	default:
		b.WriteString(r.netString())
	}
	for i, p := range r.Ports {
		if i == 0 {
			b.WriteByte(':')
		} else {
			b.WriteByte(',')
		}
		b.WriteString(p.String())
	}
	return b.String()
}

// netString writes a single address without its /32 or /128.
func (r Rule) netString() string {
	if r.Net.IsSingleIP() {
		return r.Net.Addr().String()
	}
	return r.Net.String()
}

// MarshalText writes the text form, so rules travel as strings in JSON.
func (r Rule) MarshalText() ([]byte, error) { return []byte(r.String()), nil }

// UnmarshalText reads the text form.
func (r *Rule) UnmarshalText(b []byte) error {
	v, err := ParseRule(string(b))
	if err != nil {
		return err
	}
	*r = v
	return nil
}

// validate checks a Rule built in code rather than parsed.
func (r Rule) validate() error {
	if (r.Domain == "") == !r.Net.IsValid() {
		return invalid("rule must name exactly one of a domain or an address range")
	}
	if r.Domain != "" {
		d, err := NormalizeDomain(r.Domain, true)
		if err != nil {
			return err
		}
		if d != r.Domain {
			return invalid("rule domain %q is not normalized (want %q)", r.Domain, d)
		}
	}
	if r.Net.IsValid() && r.Net != r.Net.Masked() {
		return invalid("rule range %s has host bits set", r.Net)
	}
	if len(r.Ports) > MaxPortRanges {
		return invalid("rule %s: more than %d port ranges", r, MaxPortRanges)
	}
	for _, p := range r.Ports {
		if p.Lo == 0 || p.Hi < p.Lo {
			return invalid("rule %s: bad port range %d-%d", r, p.Lo, p.Hi)
		}
	}
	return nil
}

func (r Rule) portOK(port uint16) bool {
	if len(r.Ports) == 0 {
		return true
	}
	for _, p := range r.Ports {
		if p.Contains(port) {
			return true
		}
	}
	return false
}

// Ingress is how the sandbox's ports are reached from outside.
type Ingress struct {
	// Public lets anyone who knows the URL reach the sandbox's ports. By
	// default a request needs the sandbox's traffic access token.
	Public bool `json:"public,omitempty"`
	// MaskRequestHost replaces the Host header of requests to the sandbox's
	// ports; "${PORT}" in it becomes the port. The original Host goes in
	// X-Forwarded-Host.
	MaskRequestHost string `json:"maskRequestHost,omitempty"`
}

// PortPlaceholder is the token in MaskRequestHost that becomes the port.
const PortPlaceholder = "${PORT}"

// MaskedHost returns the Host to send to port, or "" when not masked.
func (i Ingress) MaskedHost(port int) string {
	if i.MaskRequestHost == "" {
		return ""
	}
	return strings.ReplaceAll(i.MaskRequestHost, PortPlaceholder, strconv.Itoa(port))
}

// HeaderRule sets request headers on HTTPS requests to matching hosts, at
// the edge (the sandbox never sees them). Host is an exact name or a
// leading wildcard; the most specific rule wins (exact, then the longest
// wildcard) and rules are not merged. A value may contain secret
// placeholders, which the proxy replaces like any other.
type HeaderRule struct {
	Host    string            `json:"host"`
	Headers map[string]string `json:"headers"`
}

// Policy is what a sandbox asks for.
type Policy struct {
	Mode    Mode         `json:"mode,omitempty"`
	Allow   []Rule       `json:"allow,omitempty"`
	Deny    []Rule       `json:"deny,omitempty"`
	Headers []HeaderRule `json:"headers,omitempty"`
	Ingress Ingress      `json:"ingress,omitzero"`
	// Secrets names the tenant's secrets the sandbox may use: it sees
	// their placeholders, and the proxy puts their values into requests
	// to their hosts (docs/network-egress.md, Secrets at the edge).
	Secrets []string `json:"secrets,omitempty"`
}

// MaxSecrets bounds Policy.Secrets.
const MaxSecrets = 64

// CheckSecretName validates the name of a tenant's secret: 1 to 64
// letters, digits, '-', '_' and '.', starting with a letter or digit.
func CheckSecretName(name string) error {
	if name == "" || len(name) > 64 {
		return invalid("secret name %q must have 1 to 64 characters", trimName(name))
	}
	for i, c := range name {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		if !ok && (i == 0 || (c != '-' && c != '_' && c != '.')) {
			return invalid("secret name %q: letters, digits, '-', '_' and '.', starting with a letter or digit", trimName(name))
		}
	}
	return nil
}

func trimName(s string) string {
	if len(s) > 70 {
		return s[:64] + "..."
	}
	return s
}

// Limits on header rules.
const (
	MaxHeaderRules    = 64
	MaxHeadersPerRule = 16
	maxHeaderValue    = 8 << 10
)

// Validate checks p's syntax and bounds (not the operator's caps).
func (p Policy) Validate() error {
	if !p.Mode.Valid() {
		return invalid("unknown network mode %q (none, allowlist, open)", p.Mode)
	}
	if n := len(p.Allow) + len(p.Deny); n > MaxRules {
		return invalid("%d network rules, at most %d", n, MaxRules)
	}
	for _, r := range p.Allow {
		if err := r.validate(); err != nil {
			return err
		}
	}
	for _, r := range p.Deny {
		if err := r.validate(); err != nil {
			return err
		}
	}
	if p.Mode.Normalize() == Open && len(p.Allow) > 0 {
		return invalid("an open network takes no allow rules (everything public is allowed); use deny rules")
	}
	if p.Mode.Normalize() == None && len(p.Allow) > 0 {
		return invalid("allow rules need mode allowlist")
	}
	if err := validateHeaders(p.Headers); err != nil {
		return err
	}
	if len(p.Secrets) > MaxSecrets {
		return invalid("%d secrets, at most %d per sandbox", len(p.Secrets), MaxSecrets)
	}
	for i, n := range p.Secrets {
		if err := CheckSecretName(n); err != nil {
			return err
		}
		if slices.Contains(p.Secrets[:i], n) {
			return invalid("secret %s named twice", n)
		}
	}
	return validateMask(p.Ingress.MaskRequestHost)
}

func validateHeaders(rules []HeaderRule) error {
	if len(rules) > MaxHeaderRules {
		return invalid("%d header rules, at most %d", len(rules), MaxHeaderRules)
	}
	seen := map[string]bool{}
	for _, h := range rules {
		d, err := NormalizeDomain(h.Host, true)
		if err != nil {
			return fmt.Errorf("header rule: %w", err)
		}
		if d != h.Host {
			return invalid("header rule host %q is not normalized (want %q)", h.Host, d)
		}
		if seen[d] {
			return invalid("two header rules for %s", d)
		}
		seen[d] = true
		if len(h.Headers) == 0 || len(h.Headers) > MaxHeadersPerRule {
			return invalid("header rule %s: 1 to %d headers", d, MaxHeadersPerRule)
		}
		for k, v := range h.Headers {
			if !validHeaderName(k) {
				return invalid("header rule %s: bad header name %q", d, k)
			}
			if isHopHeader(k) {
				return invalid("header rule %s: %s cannot be set", d, k)
			}
			if len(v) > maxHeaderValue || strings.ContainsAny(v, "\r\n\x00") {
				return invalid("header rule %s: bad value for %s", d, k)
			}
		}
	}
	return nil
}

func validHeaderName(s string) bool {
	if s == "" || len(s) > 256 {
		return false
	}
	for _, c := range []byte(s) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return true
}

// isHopHeader names the headers that frame the connection or the message;
// an injected value there would corrupt the stream rather than authenticate.
func isHopHeader(k string) bool {
	switch strings.ToLower(k) {
	case "host", "connection", "content-length", "transfer-encoding", "upgrade", "te", "trailer", "keep-alive", "proxy-connection":
		return true
	}
	return false
}

func validateMask(m string) error {
	if m == "" {
		return nil
	}
	host := strings.ReplaceAll(m, PortPlaceholder, "1")
	if len(host) > maxNameLen+6 || strings.ContainsAny(host, " /\\@?#\r\n\t") {
		return invalid("mask request host %q is not a host[:port]", m)
	}
	for _, c := range host {
		if c > 0x7e || c < 0x21 {
			return invalid("mask request host %q is not ASCII", m)
		}
	}
	h := host
	if i := strings.LastIndex(host, ":"); i >= 0 && !strings.HasSuffix(host, "]") {
		if _, err := parsePort(host[i+1:]); err != nil {
			return invalid("mask request host %q: %v", m, err)
		}
		h = host[:i]
	}
	if h == "" {
		return invalid("mask request host %q has no host", m)
	}
	return nil
}

// Clone returns a deep copy of p.
func (p Policy) Clone() Policy {
	q := p
	q.Allow = cloneRules(p.Allow)
	q.Deny = cloneRules(p.Deny)
	q.Headers = make([]HeaderRule, len(p.Headers))
	for i, h := range p.Headers {
		q.Headers[i] = HeaderRule{Host: h.Host, Headers: make(map[string]string, len(h.Headers))}
		for k, v := range h.Headers {
			q.Headers[i].Headers[k] = v
		}
	}
	if p.Headers == nil {
		q.Headers = nil
	}
	q.Secrets = slices.Clone(p.Secrets)
	return q
}

func cloneRules(rs []Rule) []Rule {
	if rs == nil {
		return nil
	}
	out := make([]Rule, len(rs))
	for i, r := range rs {
		r.Ports = slices.Clone(r.Ports)
		out[i] = r
	}
	return out
}

// ParseRules reads a list of rules in text form.
func ParseRules(ss []string) ([]Rule, error) {
	if len(ss) > MaxRules {
		return nil, invalid("%d network rules, at most %d", len(ss), MaxRules)
	}
	var out []Rule
	for _, s := range ss {
		r, err := ParseRule(s)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("%s: %w", fmt.Sprintf(format, args...), errdefs.ErrInvalidArgument)
}

func denied(format string, args ...any) error {
	return fmt.Errorf("%s: %w", fmt.Sprintf(format, args...), errdefs.ErrPermissionDenied)
}
