package policy

import (
	"encoding/json"
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/sandlot/sandlot/errdefs"
)

func TestParseRule(t *testing.T) {
	tests := []struct {
		in   string
		want Rule
		str  string // String(); "" means in
	}{
		{in: "example.org", want: Rule{Domain: "example.org"}},
		{in: "Example.ORG.", want: Rule{Domain: "example.org"}, str: "example.org"},
		{in: "*.example.org", want: Rule{Domain: "*.example.org"}},
		{in: "*.example.org:443", want: Rule{Domain: "*.example.org", Ports: []PortRange{{443, 443}}}},
		{in: "api.example.org:80,443", want: Rule{Domain: "api.example.org", Ports: []PortRange{{80, 80}, {443, 443}}}},
		{in: "api.example.org:8000-8999", want: Rule{Domain: "api.example.org", Ports: []PortRange{{8000, 8999}}}},
		{in: "bücher.example", want: Rule{Domain: "xn--bcher-kva.example"}, str: "xn--bcher-kva.example"},
		{in: "_acme.example.org", want: Rule{Domain: "_acme.example.org"}},
		{in: "10.1.2.3", want: Rule{Net: netip.MustParsePrefix("10.1.2.3/32")}},
		{in: "8.8.8.0/24", want: Rule{Net: netip.MustParsePrefix("8.8.8.0/24")}},
		{in: "8.8.8.9/24", want: Rule{Net: netip.MustParsePrefix("8.8.8.0/24")}, str: "8.8.8.0/24"},
		{in: "203.0.113.0/24:22", want: Rule{Net: netip.MustParsePrefix("203.0.113.0/24"), Ports: []PortRange{{22, 22}}}},
		{in: "2001:db8::/32", want: Rule{Net: netip.MustParsePrefix("2001:db8::/32")}},
		{in: "[2001:db8::1]:443", want: Rule{Net: netip.MustParsePrefix("2001:db8::1/128"), Ports: []PortRange{{443, 443}}}},
		{in: "::ffff:1.2.3.4", want: Rule{Net: netip.MustParsePrefix("1.2.3.4/32")}, str: "1.2.3.4"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseRule(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got, cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })); diff != "" {
				t.Errorf("ParseRule(%q) (-want +got):\n%s", tt.in, diff)
			}
			want := tt.str
			if want == "" {
				want = tt.in
			}
			if got.String() != want {
				t.Errorf("String() = %q, want %q", got.String(), want)
			}
			again, err := ParseRule(got.String())
			if err != nil || again.String() != got.String() {
				t.Errorf("round trip of %q: %v, %v", got.String(), again, err)
			}
		})
	}
}

func TestParseRuleRejects(t *testing.T) {
	for _, in := range []string{
		"", "*", "*.", "*.*.example.org", "a*.example.org", "exa mple.org", "example..org",
		"-bad.example", "example.org:0", "example.org:70000", "example.org:", "example.org:80-20",
		"example.org:http", "10.0.0.0/33", "1.2.3", "999.1.1.1", "[2001:db8::1", "[::1]443",
		"fe80::1%eth0", "a.123", strings.Repeat("a", 300) + ".org",
		"example.org:" + strings.Repeat("1,", 20) + "1",
	} {
		t.Run(in, func(t *testing.T) {
			r, err := ParseRule(in)
			if err == nil {
				t.Fatalf("ParseRule(%q) = %v, want an error", in, r)
			}
			if !errors.Is(err, errdefs.ErrInvalidArgument) {
				t.Errorf("error %v is not invalid_argument", err)
			}
		})
	}
}

func TestMatchDomain(t *testing.T) {
	tests := []struct {
		pattern, name string
		want          bool
	}{
		{"example.org", "example.org", true},
		{"example.org", "a.example.org", false},
		{"*.example.org", "a.example.org", true},
		{"*.example.org", "a.b.example.org", true},
		{"*.example.org", "example.org", false},
		{"*.example.org", "badexample.org", false},
		{"*.example.org", "a.example.org.evil", false},
		{"*.org", "example.org", true},
	}
	for _, tt := range tests {
		if got := MatchDomain(tt.pattern, tt.name); got != tt.want {
			t.Errorf("MatchDomain(%q, %q) = %v, want %v", tt.pattern, tt.name, got, tt.want)
		}
	}
}

func mustApply(t *testing.T, op *Operator, p Policy) *Effective {
	t.Helper()
	e, err := op.Apply("t1", p)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func TestCheck(t *testing.T) {
	pub := netip.MustParseAddr("203.0.113.10")
	other := netip.MustParseAddr("198.51.100.7")
	hostAddr := netip.MustParseAddr("198.51.100.1")
	internal := func(a netip.Addr) string {
		if a == hostAddr {
			return "host address"
		}
		return ""
	}
	allowlist := Policy{Mode: Allowlist,
		Allow: []Rule{MustRule("*.example.test"), MustRule("api.test:443"), MustRule("198.51.100.0/24:8080"), MustRule("10.9.9.9")},
		Deny:  []Rule{MustRule("blocked.example.test"), MustRule("198.51.100.66")},
	}
	open := Policy{Mode: Open, Deny: []Rule{MustRule("*.evil.test"), MustRule("203.0.113.99")}}
	opened := &Operator{Default: TenantCap{AllowOpen: true, Reachable: []netip.Prefix{netip.MustParsePrefix("10.9.9.0/24"), netip.MustParsePrefix("169.254.0.0/16")}}}
	closed := &Operator{Default: TenantCap{AllowOpen: true}}

	tests := []struct {
		name   string
		op     *Operator
		p      Policy
		d      Dest
		allow  bool
		reason string
	}{
		{"none", closed, Policy{}, Dest{"www.example.test", pub, 443}, false, "network mode none"},
		{"wildcard", closed, allowlist, Dest{"www.example.test", pub, 443}, true, "allowed by rule *.example.test"},
		{"wildcard deep", closed, allowlist, Dest{"a.b.example.test", pub, 80}, true, "allowed by rule *.example.test"},
		{"wildcard not apex", closed, allowlist, Dest{"example.test", pub, 443}, false, "not in the allowlist: example.test"},
		{"deny on top", closed, allowlist, Dest{"blocked.example.test", pub, 443}, false, "denied by rule blocked.example.test"},
		{"port allowed", closed, allowlist, Dest{"api.test", pub, 443}, true, "allowed by rule api.test:443"},
		{"port denied", closed, allowlist, Dest{"api.test", pub, 80}, false, "not in the allowlist: api.test"},
		{"cidr port", closed, allowlist, Dest{"", other, 8080}, true, "allowed by rule 198.51.100.0/24:8080"},
		{"cidr wrong port", closed, allowlist, Dest{"", other, 8081}, false, "not in the allowlist: 198.51.100.7"},
		{"cidr denied address", closed, allowlist, Dest{"", netip.MustParseAddr("198.51.100.66"), 8080}, false, "denied by rule 198.51.100.66"},
		{"private without operator", closed, allowlist, Dest{"", netip.MustParseAddr("10.9.9.9"), 80}, false, "private range (RFC 1918) 10.9.9.9"},
		{"private opened by operator", opened, allowlist, Dest{"", netip.MustParseAddr("10.9.9.9"), 80}, true, "allowed by rule 10.9.9.9"},
		{"opened range still needs a rule", opened, allowlist, Dest{"", netip.MustParseAddr("10.9.9.8"), 80}, false, "not in the allowlist: 10.9.9.8"},
		{"metadata", closed, open, Dest{"", netip.MustParseAddr("169.254.169.254"), 80}, false, "cloud metadata address 169.254.169.254"},
		{"metadata not opened by a wide range", opened, open, Dest{"", netip.MustParseAddr("169.254.169.254"), 80}, false, "cloud metadata address 169.254.169.254"},
		{"link-local opened", opened, open, Dest{"", netip.MustParseAddr("169.254.1.1"), 80}, true, "mode open"},
		{"ipv6 metadata", closed, open, Dest{"", netip.MustParseAddr("fd00:ec2::254"), 80}, false, "cloud metadata address fd00:ec2::254"},
		{"mapped loopback", closed, open, Dest{"", netip.MustParseAddr("::ffff:127.0.0.1"), 80}, false, "loopback 127.0.0.1"},
		{"cgnat", closed, open, Dest{"", netip.MustParseAddr("100.100.1.1"), 80}, false, "shared address space (CGNAT) 100.100.1.1"},
		{"ula", closed, open, Dest{"", netip.MustParseAddr("fd12::1"), 80}, false, "unique local range (ULA) fd12::1"},
		{"host address", closed, open, Dest{"", hostAddr, 22}, false, "host address 198.51.100.1"},
		{"host address not opened by a wide range", &Operator{Default: TenantCap{AllowOpen: true, Reachable: []netip.Prefix{netip.MustParsePrefix("198.51.100.0/24")}}}, open, Dest{"", hostAddr, 22}, false, "host address 198.51.100.1"},
		{"host address opened exactly", &Operator{Default: TenantCap{AllowOpen: true, Reachable: []netip.Prefix{netip.MustParsePrefix("198.51.100.1/32")}}}, open, Dest{"", hostAddr, 22}, true, "mode open"},
		{"open", closed, open, Dest{"www.example.test", pub, 443}, true, "mode open"},
		{"open deny name", closed, open, Dest{"x.evil.test", pub, 443}, false, "denied by rule *.evil.test"},
		{"open deny address", closed, open, Dest{"", netip.MustParseAddr("203.0.113.99"), 443}, false, "denied by rule 203.0.113.99"},
		{"no address", closed, open, Dest{"www.example.test", netip.Addr{}, 443}, false, "no destination address"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := mustApply(t, tt.op, tt.p)
			got := e.Check(tt.d, internal)
			if got.Allow != tt.allow || got.Reason != tt.reason {
				t.Errorf("Check(%+v) = %+v, want {%v %q}", tt.d, got, tt.allow, tt.reason)
			}
		})
	}
}

func TestAllowName(t *testing.T) {
	e := mustApply(t, &Operator{}, Policy{Mode: Allowlist,
		Allow: []Rule{MustRule("*.example.test"), MustRule("api.test:443"), MustRule("203.0.113.0/24")},
		Deny:  []Rule{MustRule("blocked.example.test"), MustRule("ports.example.test:25")},
	})
	for name, want := range map[string]bool{
		"www.example.test":     true,
		"WWW.Example.Test.":    true,
		"example.test":         false,
		"api.test":             true,
		"blocked.example.test": false,
		"ports.example.test":   true, // only port 25 is denied
		"other.test":           false,
		"bad name":             false,
		"":                     false,
	} {
		if got := e.AllowName(name); got != want {
			t.Errorf("AllowName(%q) = %v, want %v", name, got, want)
		}
	}
	none := mustApply(t, &Operator{}, Policy{})
	if none.AllowName("www.example.test") {
		t.Error("mode none answers names")
	}
}

func TestOperatorApply(t *testing.T) {
	op := &Operator{
		Default: TenantCap{MaxRules: 2},
		Tenants: map[string]TenantCap{
			"big":    {AllowOpen: true, Domains: []string{"*.corp.test", "pypi.org"}, Nets: []netip.Prefix{netip.MustParsePrefix("203.0.113.0/24")}},
			"closed": {NoPublicPorts: true},
		},
	}
	if err := op.Validate(); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, tenant string
		p            Policy
		want         error
	}{
		{"default none", "t", Policy{}, nil},
		{"open forbidden", "t", Policy{Mode: Open}, errdefs.ErrPermissionDenied},
		{"open allowed", "big", Policy{Mode: Open}, nil},
		{"too many rules", "t", Policy{Mode: Allowlist, Allow: []Rule{MustRule("a.test"), MustRule("b.test"), MustRule("c.test")}}, errdefs.ErrPermissionDenied},
		{"within domains", "big", Policy{Mode: Allowlist, Allow: []Rule{MustRule("a.corp.test"), MustRule("*.x.corp.test"), MustRule("pypi.org")}}, nil},
		{"outside domains", "big", Policy{Mode: Allowlist, Allow: []Rule{MustRule("corp.test")}}, errdefs.ErrPermissionDenied},
		{"wider wildcard", "big", Policy{Mode: Allowlist, Allow: []Rule{MustRule("*.pypi.org")}}, errdefs.ErrPermissionDenied},
		{"within nets", "big", Policy{Mode: Allowlist, Allow: []Rule{MustRule("203.0.113.0/25")}}, nil},
		{"outside nets", "big", Policy{Mode: Allowlist, Allow: []Rule{MustRule("203.0.0.0/16")}}, errdefs.ErrPermissionDenied},
		{"public ports refused", "closed", Policy{Ingress: Ingress{Public: true}}, errdefs.ErrPermissionDenied},
		{"unknown mode", "t", Policy{Mode: "wide"}, errdefs.ErrInvalidArgument},
		{"allow without allowlist", "t", Policy{Allow: []Rule{MustRule("a.test")}}, errdefs.ErrInvalidArgument},
		{"open with allow", "big", Policy{Mode: Open, Allow: []Rule{MustRule("a.test")}}, errdefs.ErrInvalidArgument},
		{"built rule not normalized", "t", Policy{Mode: Allowlist, Allow: []Rule{{Domain: "A.test"}}}, errdefs.ErrInvalidArgument},
		{"built rule both", "t", Policy{Mode: Allowlist, Allow: []Rule{{Domain: "a.test", Net: netip.MustParsePrefix("1.2.3.4/32")}}}, errdefs.ErrInvalidArgument},
		{"bad mask", "t", Policy{Ingress: Ingress{MaskRequestHost: "a b"}}, errdefs.ErrInvalidArgument},
		{"mask with port", "t", Policy{Ingress: Ingress{MaskRequestHost: "localhost:${PORT}"}}, nil},
		{"header rule hop header", "t", Policy{Headers: []HeaderRule{{Host: "api.test", Headers: map[string]string{"Content-Length": "1"}}}}, errdefs.ErrInvalidArgument},
		{"header rule newline", "t", Policy{Headers: []HeaderRule{{Host: "api.test", Headers: map[string]string{"X-Key": "a\r\nb"}}}}, errdefs.ErrInvalidArgument},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := op.Apply(tt.tenant, tt.p)
			if tt.want == nil && err != nil {
				t.Fatalf("Apply: %v", err)
			}
			if tt.want != nil && !errors.Is(err, tt.want) {
				t.Fatalf("Apply error = %v, want %v", err, tt.want)
			}
		})
	}
	bad := &Operator{Default: TenantCap{Domains: []string{"Upper.test"}}}
	if err := bad.Validate(); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("Validate of a bad cap = %v", err)
	}
}

func TestFromE2B(t *testing.T) {
	yes, no := true, false
	tests := []struct {
		name    string
		allow   *bool
		n       *E2BNetwork
		want    Policy
		wantErr bool
	}{
		{name: "nothing", want: Policy{Mode: None}},
		{name: "internet on", allow: &yes, want: Policy{Mode: Open}},
		{name: "internet off", allow: &no, want: Policy{Mode: None}},
		{name: "internet off with allowOut", allow: &no, n: &E2BNetwork{AllowOut: []string{"pypi.org"}},
			want: Policy{Mode: Allowlist, Allow: []Rule{MustRule("pypi.org")}}},
		{name: "all traffic denied", n: &E2BNetwork{AllowOut: []string{"*.example.com", "8.8.8.8"}, DenyOut: []string{AllTraffic}},
			want: Policy{Mode: Allowlist, Allow: []Rule{MustRule("*.example.com"), MustRule("8.8.8.8")}}},
		{name: "only deny all", n: &E2BNetwork{DenyOut: []string{AllTraffic}}, want: Policy{Mode: None}},
		{name: "allowOut alone", n: &E2BNetwork{AllowOut: []string{"1.1.1.1"}},
			want: Policy{Mode: Allowlist, Allow: []Rule{MustRule("1.1.1.1")}}},
		{name: "deny some", n: &E2BNetwork{DenyOut: []string{"1.1.1.1", "8.8.8.0/24"}},
			want: Policy{Mode: Open, Deny: []Rule{MustRule("1.1.1.1"), MustRule("8.8.8.0/24")}}},
		{name: "allow wins over deny", n: &E2BNetwork{DenyOut: []string{"8.8.8.0/30"}, AllowOut: []string{"8.8.8.1"}},
			want: Policy{Mode: Open, Deny: []Rule{MustRule("8.8.8.0"), MustRule("8.8.8.2/31")}}},
		{name: "domain without all traffic", n: &E2BNetwork{DenyOut: []string{"1.1.1.1"}, AllowOut: []string{"example.com"}}, wantErr: true},
		{name: "domain in denyOut", n: &E2BNetwork{DenyOut: []string{"example.com"}}, wantErr: true},
		{name: "bad entry", n: &E2BNetwork{AllowOut: []string{"not a host"}}, wantErr: true},
		{name: "ingress", n: &E2BNetwork{AllowPublicTraffic: &yes, MaskRequestHost: ptr("localhost:${PORT}")},
			want: Policy{Mode: None, Ingress: Ingress{Public: true, MaskRequestHost: "localhost:${PORT}"}}},
		{name: "transform rules", allow: &no, n: &E2BNetwork{AllowOut: []string{"api.example.com"},
			Rules: map[string][]E2BRule{"API.example.com": {{Transform: &E2BTransform{Headers: map[string]string{"Authorization": "Bearer x"}}}}}},
			want: Policy{Mode: Allowlist, Allow: []Rule{MustRule("api.example.com")},
				Headers: []HeaderRule{{Host: "api.example.com", Headers: map[string]string{"Authorization": "Bearer x"}}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := FromE2B(tt.allow, tt.n)
			if tt.wantErr {
				if !errors.Is(err, errdefs.ErrInvalidArgument) {
					t.Fatalf("FromE2B = %+v, %v; want invalid_argument", got, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got, cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })); diff != "" {
				t.Errorf("FromE2B (-want +got):\n%s", diff)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

func TestToE2BRoundTrip(t *testing.T) {
	for _, p := range []Policy{
		{Mode: None},
		{Mode: Allowlist, Allow: []Rule{MustRule("*.example.com"), MustRule("8.8.8.8")}, Ingress: Ingress{Public: true}},
		{Mode: Open, Deny: []Rule{MustRule("1.1.1.1")}, Ingress: Ingress{MaskRequestHost: "x:${PORT}"}},
	} {
		ai, n := ToE2B(p)
		back, err := FromE2B(ai, &n)
		if err != nil {
			t.Fatalf("FromE2B(ToE2B(%+v)): %v", p, err)
		}
		if diff := cmp.Diff(p, back, cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })); diff != "" {
			t.Errorf("round trip (-want +got):\n%s", diff)
		}
	}
}

func TestSubtract(t *testing.T) {
	got := subtract([]netip.Prefix{netip.MustParsePrefix("0.0.0.0/0")}, []netip.Prefix{netip.MustParsePrefix("128.0.0.1/32")})
	if len(got) != 32 {
		t.Fatalf("0/0 minus one address: %d prefixes, want 32", len(got))
	}
	for _, p := range got {
		if p.Contains(netip.MustParseAddr("128.0.0.1")) {
			t.Errorf("%s still holds the hole", p)
		}
	}
	for _, a := range []string{"0.0.0.0", "128.0.0.0", "128.0.0.2", "255.255.255.255", "127.255.255.255"} {
		in := false
		for _, p := range got {
			in = in || p.Contains(netip.MustParseAddr(a))
		}
		if !in {
			t.Errorf("%s lost by the subtraction", a)
		}
	}
}

func TestHeadersFor(t *testing.T) {
	e := mustApply(t, &Operator{}, Policy{Headers: []HeaderRule{
		{Host: "*.example.com", Headers: map[string]string{"X": "wide"}},
		{Host: "*.api.example.com", Headers: map[string]string{"X": "narrow"}},
		{Host: "v1.api.example.com", Headers: map[string]string{"X": "exact"}},
	}})
	for name, want := range map[string]string{
		"v1.api.example.com": "exact",
		"v2.api.example.com": "narrow",
		"www.example.com":    "wide",
		"example.com":        "",
	} {
		if got := e.HeadersFor(name)["X"]; got != want {
			t.Errorf("HeadersFor(%q) = %q, want %q", name, got, want)
		}
	}
}

func TestPolicyJSON(t *testing.T) {
	in := `{"mode":"allowlist","allow":["*.pypi.org:443","203.0.113.0/24"],"deny":["files.pypi.org"],"ingress":{"public":true}}`
	var p Policy
	if err := json.Unmarshal([]byte(in), &p); err != nil {
		t.Fatal(err)
	}
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	out, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != in {
		t.Errorf("JSON round trip:\n got %s\nwant %s", out, in)
	}
	if err := json.Unmarshal([]byte(`{"allow":["bad host"]}`), &p); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("bad rule in JSON: %v", err)
	}
}

func TestKernelReach(t *testing.T) {
	e := &Effective{Reachable: []netip.Prefix{
		netip.MustParsePrefix("169.254.0.0/16"),
		netip.MustParsePrefix("10.9.9.0/24"),
		netip.MustParsePrefix("fd00::/8"),
	}}
	var meta, private bool
	for _, p := range e.KernelReach() {
		meta = meta || p.Contains(netip.MustParseAddr("169.254.169.254"))
		private = private || p.Contains(netip.MustParseAddr("10.9.9.9"))
		if p.Addr().Is6() {
			t.Errorf("IPv6 range %s in the kernel's reach", p)
		}
	}
	if meta || !private {
		t.Errorf("KernelReach = %v: metadata %v, 10.9.9.9 %v", e.KernelReach(), meta, private)
	}
	exact := &Effective{Reachable: []netip.Prefix{netip.MustParsePrefix("169.254.169.254/32")}}
	if got := exact.KernelReach(); len(got) != 1 || !got[0].Contains(netip.MustParseAddr("169.254.169.254")) {
		t.Errorf("exact metadata: %v", got)
	}
}
