package egress

import (
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/sandlot/sandlot/network/nettest"
	"github.com/sandlot/sandlot/network/policy"
	"github.com/sandlot/sandlot/network/secret"
)

func rules(ss ...string) []policy.Rule {
	out := make([]policy.Rule, len(ss))
	for i, s := range ss {
		out[i] = policy.MustRule(s)
	}
	return out
}

func TestAllowlist(t *testing.T) {
	e := newEnv(t)
	sb := e.sandbox(t, "allow", "t1", policy.Policy{
		Mode:  policy.Allowlist,
		Allow: rules("*.example.test", "api.test:443", "203.0.113.20/32:7", "rebind.test"),
		Deny:  rules("blocked.example.test"),
	})
	hostPort := hostServer(t).Port()
	other := e.sandbox(t, "neighbour", "t1", policy.Policy{})

	tests := []struct {
		name string
		args []string
		code string // "000": no HTTP answer
		body string // substring of the body
		exit bool   // whether curl must fail
	}{
		{"wildcard domain", []string{"http://www.example.test/hello"}, "200", `"Host":"www.example.test"`, false},
		{"wildcard domain, https spliced", []string{"https://api.example.test/tls"}, "200", `"Path":"/tls"`, false},
		{"apex is not under the wildcard: no DNS", []string{"http://example.test/"}, "000", "", true},
		{"apex with a forged address", []string{"--resolve", "example.test:80:203.0.113.10", "http://example.test/"}, "403", "name not allowed: example.test", false},
		{"deny on top of allow", []string{"--resolve", "blocked.example.test:80:203.0.113.10", "http://blocked.example.test/"}, "403", "name not allowed: blocked.example.test", false},
		{"port allowed", []string{"https://api.test/port"}, "200", `"Host":"api.test"`, false},
		{"port not allowed", []string{"http://api.test/"}, "403", "not in the allowlist: api.test", false},
		{"address outside the rules", []string{"http://203.0.113.20/"}, "403", "not in the allowlist: 203.0.113.20", false},
		{"metadata", []string{"http://169.254.169.254/latest/meta-data/"}, "403", "cloud metadata address 169.254.169.254", false},
		{"metadata by an allowed name", []string{"-H", "Host: www.example.test", "http://169.254.169.254/"}, "200", `"Server":"web:80"`, false},
		{"private address", []string{"http://10.9.9.9/"}, "403", "private range (RFC 1918) 10.9.9.9", false},
		{"the host's address", []string{"http://" + nettest.Uplink.String() + ":" + itoa(hostPort) + "/"}, "403", "host address " + nettest.Uplink.String(), false},
		{"the gateway", []string{"http://" + sb.Gateway.String() + ":" + itoa(hostPort) + "/"}, "403", "sandbox network", false},
		{"another sandbox", []string{"http://" + other.Addr.String() + ":8000/"}, "403", "sandbox network", false},
		{"rebinding name: empty answer", []string{"http://rebind.test/"}, "000", "", true},
		{"rebinding name: the proxy checks its own answer", []string{"--resolve", "rebind.test:80:203.0.113.10", "http://rebind.test/"}, "403", "private range (RFC 1918) 10.9.9.9", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, body, r := sb.curl(t, tt.args...)
			if code != tt.code || !strings.Contains(body, tt.body) || (r.Err != nil) != tt.exit {
				t.Errorf("curl %v: code %s, body %q, err %v (%s); want code %s, body with %q, failure %v",
					tt.args, code, body, r.Err, r.Stderr, tt.code, tt.body, tt.exit)
			}
		})
	}
	// The metadata server never saw a request, whatever the Host said.
	for _, req := range e.world.Seen() {
		if req.Server == "metadata:80" || req.Server == "private:80" {
			t.Errorf("a forbidden server was reached: %+v", req)
		}
	}

	t.Run("address rule and port, raw protocol", func(t *testing.T) {
		if !sb.echo(t, "203.0.113.20:7") {
			t.Error("the allowed range and port did not echo")
		}
		if sb.echo(t, "203.0.113.10:7") {
			t.Error("an address outside the rule echoed")
		}
	})
	t.Run("sni names the destination, not the address", func(t *testing.T) {
		// The sandbox pairs an allowed name with an address of its choice:
		// the proxy dials the name's own address instead.
		code, body, r := sb.curl(t, "--resolve", "www.example.test:443:203.0.113.20", "https://www.example.test/fronted")
		if code != "200" || !strings.Contains(body, `"Server":"web:443"`) {
			t.Errorf("fronted request: %s %q %v %s", code, body, r.Err, r.Stderr)
		}
	})
	t.Run("no udp but dns", func(t *testing.T) {
		if sb.udpEcho(t, "203.0.113.10:9") {
			t.Error("UDP left a sandbox in mode allowlist")
		}
	})
	t.Run("dns only for allowed names", func(t *testing.T) {
		for name, want := range map[string][]string{
			"www.example.test":     {"203.0.113.10"},
			"example.test":         nil,
			"blocked.example.test": nil,
			"other.test":           nil,
			"rebind.test":          nil,
		} {
			resp := sb.lookup(t, name, dns.TypeA)
			var got []string
			for _, rr := range resp.Answer {
				if a, ok := rr.(*dns.A); ok {
					got = append(got, a.A.String())
				}
			}
			if !slices.Equal(got, want) {
				t.Errorf("%s: %v (%s), want %v", name, got, dns.RcodeToString[resp.Rcode], want)
			}
		}
		var asked []string
		for _, q := range e.world.DNS.Queries() {
			asked = append(asked, strings.Fields(q)[0])
		}
		for _, name := range []string{"other.test", "blocked.example.test", "example.test"} {
			if slices.Contains(asked, name) {
				t.Errorf("a denied name reached the upstream name server: %s", name)
			}
		}
	})
	t.Run("every connection released", func(t *testing.T) { e.idle(t) })
	t.Run("audit", func(t *testing.T) {
		var allowed, denied bool
		for _, ev := range e.eventsFor("allow") {
			if ev.Proto == "dns" {
				continue
			}
			if ev.Allowed && ev.Host == "www.example.test" && ev.BytesUp > 0 && ev.BytesDown > 0 && ev.Port == 80 {
				allowed = true
			}
			if !ev.Allowed && ev.Addr == netip.MustParseAddr("169.254.169.254") && strings.Contains(ev.Reason, "metadata") {
				denied = true
			}
			if ev.Tenant != "t1" {
				t.Errorf("event without the tenant: %+v", ev)
			}
		}
		if !allowed || !denied {
			t.Errorf("audit trail misses the allowed (%v) or the denied (%v) connection: %s", allowed, denied, e.allEvents())
		}
	})
}

func TestOperatorOpensARange(t *testing.T) {
	e := newEnv(t)
	closed := e.sandbox(t, "closed", "t1", policy.Policy{Mode: policy.Allowlist, Allow: rules("10.9.9.9:80")})
	opened := e.sandbox(t, "opened", "internal", policy.Policy{Mode: policy.Allowlist, Allow: rules("10.9.9.9:80")})
	if code, body, _ := closed.curl(t, "http://10.9.9.9/"); code != "403" {
		t.Errorf("without the operator: %s %q", code, body)
	}
	if code, body, r := opened.curl(t, "http://10.9.9.9/inside"); code != "200" || !strings.Contains(body, `"Server":"private:80"`) {
		t.Errorf("with the operator's range: %s %q %v %s", code, body, r.Err, r.Stderr)
	}
}

func TestOpenAndNone(t *testing.T) {
	e := newEnv(t)
	open := e.sandbox(t, "open", "t1", policy.Policy{Mode: policy.Open, Deny: rules("203.0.113.20")})
	none := e.sandbox(t, "none", "t1", policy.Policy{})

	if code, body, r := open.curl(t, "http://other.test/open"); code != "200" {
		t.Errorf("open: %s %q %v %s", code, body, r.Err, r.Stderr)
	}
	if code, _, _ := open.curl(t, "http://203.0.113.20/"); code != "403" {
		t.Errorf("open, denied address: %s", code)
	}
	if code, _, _ := open.curl(t, "http://169.254.169.254/"); code != "403" {
		t.Errorf("open, metadata: %s", code)
	}
	if !open.udpEcho(t, "203.0.113.10:9") {
		t.Error("open: UDP to a public address did not come back")
	}
	if open.udpEcho(t, "10.9.9.9:9") {
		t.Error("open: UDP reached a private address")
	}
	if code, _, r := none.curl(t, "--resolve", "www.example.test:80:203.0.113.10", "--max-time", "2", "http://www.example.test/"); code != "000" || r.Err == nil {
		t.Errorf("mode none connected: %s", code)
	}
	if none.udpEcho(t, "203.0.113.10:9") {
		t.Error("mode none: UDP left")
	}
}

func TestSecretsAtTheEdge(t *testing.T) {
	e := newEnv(t)
	const value = "real-token-0123456789"
	sec := secret.Secret{ID: "gh", Hosts: []string{"api.example.test"}, Value: value}
	ph := sec.Placeholder()
	sb := e.sandbox(t, "secrets", "t1", policy.Policy{
		Mode:    policy.Allowlist,
		Allow:   rules("*.example.test", "other.test"),
		Headers: []policy.HeaderRule{{Host: "api.example.test", Headers: map[string]string{"X-Api-Key": "key " + ph}}},
	}, sec)

	t.Run("injected into headers, target and body; scrubbed from the response", func(t *testing.T) {
		code, body, r := sb.curl(t, "-i", "-H", "Authorization: Bearer "+ph, "--data", "token="+ph,
			"https://api.example.test/echo?key="+ph)
		if code != "200" {
			t.Fatalf("curl: %s %q %v %s", code, body, r.Err, r.Stderr)
		}
		seen := e.world.Last("web:443")
		if seen.Auth != "Bearer "+value || seen.Query != "key="+value || seen.Body != "token="+value || seen.Header.Get("X-Api-Key") != "key "+value {
			t.Errorf("the server saw %+v, want the value everywhere", seen)
		}
		if strings.Contains(r.Stdout+r.Stderr, value) {
			t.Errorf("the value reached the sandbox:\n%s", r.Stdout)
		}
		if !strings.Contains(body, "Bearer "+ph) || !strings.Contains(strings.ToLower(body), "x-echo-auth: bearer "+ph) {
			t.Errorf("the echoed placeholder is missing from the response:\n%s", body)
		}
	})
	t.Run("not to another host", func(t *testing.T) {
		code, _, r := sb.curl(t, "-H", "Authorization: Bearer "+ph, "https://other.test/leak")
		if code != "200" {
			t.Fatalf("curl: %s %v %s", code, r.Err, r.Stderr)
		}
		if seen := e.world.Last("web:443"); seen.Host != "other.test" || seen.Auth != "Bearer "+ph {
			t.Errorf("other.test saw %+v, want the placeholder", seen)
		}
	})
	t.Run("never in cleartext", func(t *testing.T) {
		code, _, _ := sb.curl(t, "-H", "Authorization: Bearer "+ph, "http://api.example.test/plain")
		if code != "200" {
			t.Fatalf("curl: %s", code)
		}
		if seen := e.world.Last("web:80"); seen.Auth != "Bearer "+ph {
			t.Errorf("plain HTTP carried %q", seen.Auth)
		}
	})
	t.Run("a Host that is not the TLS name", func(t *testing.T) {
		code, _, _ := sb.curl(t, "-H", "Host: other.test", "-H", "Authorization: Bearer "+ph, "https://api.example.test/")
		if code != "421" {
			t.Errorf("mismatched Host: %s, want 421", code)
		}
	})
	t.Run("without trusting its CA the sandbox gets nothing", func(t *testing.T) {
		r := nettest.Run(t, sb.Path, sb.ResolvConf(), "curl", "-sS", "--max-time", "10", "--cacert", writeTemp(t, e.world.CAPEM), "https://api.example.test/")
		if r.Err == nil {
			t.Error("TLS to an intercepted host verified without the sandbox CA")
		}
	})
	t.Run("audit and logs", func(t *testing.T) {
		var mitm bool
		for _, ev := range e.eventsFor("secrets") {
			if ev.Proto == "https-terminated" && ev.Host == "api.example.test" && ev.Injected >= 3 {
				mitm = true
			}
		}
		if !mitm {
			t.Errorf("no terminated connection with injections in the audit trail: %s", e.allEvents())
		}
		if strings.Contains(e.allEvents(), value) || strings.Contains(e.logs.String(), value) {
			t.Error("the value is in the audit trail or the logs")
		}
	})
}

func TestConnectionLimit(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.Limits.PerSandbox = 3 * Legs })
	sb := e.sandbox(t, "greedy", "t1", policy.Policy{Mode: policy.Allowlist, Allow: rules("203.0.113.20/32:7")})
	var held []net.Conn
	for range 3 {
		c, err := sb.dial(t, "203.0.113.20:7")
		if err != nil {
			t.Fatal(err)
		}
		c.Write([]byte("x"))
		buf := make([]byte, 1)
		if _, err := c.Read(buf); err != nil {
			t.Fatalf("held connection: %v", err)
		}
		held = append(held, c)
	}
	if sb.echo(t, "203.0.113.20:7") {
		t.Error("a fourth connection passed a limit of three")
	}
	held[0].Close()
	ok := false
	for deadline := time.Now().Add(5 * time.Second); !ok && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		ok = sb.echo(t, "203.0.113.20:7")
	}
	if !ok {
		t.Error("no connection after one was released")
	}
	for _, c := range held[1:] {
		c.Close()
	}
	e.idle(t)
	var limited bool
	for _, ev := range e.eventsFor("greedy") {
		limited = limited || ev.Reason == "too many connections"
	}
	if !limited {
		t.Errorf("the refusal is not in the audit trail: %s", e.allEvents())
	}
}
