package egress

import (
	"bufio"
	"context"
	"crypto/subtle"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/network/netns"
	"github.com/sandlot/sandlot/network/nettest"
	"github.com/sandlot/sandlot/network/policy"
	"github.com/sandlot/sandlot/network/ports"
)

// serve answers HTTP on 0.0.0.0:port inside the sandbox with body.
func (s *sandbox) serve(t *testing.T, port int, body string) {
	t.Helper()
	l, err := netns.Listen(context.Background(), s.Path, "tcp4", fmt.Sprintf("0.0.0.0:%d", port))
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "%s from %s token=%q", body, r.Host, r.Header.Get("e2b-traffic-access-token"))
	})}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
}

// TestPortsRoute attacks the proxy's answer for the ports domain: a
// sandbox reaches another's port only as a client outside would (public
// ports, or the traffic token), and another tenant's sandbox only when it
// has internet access (mode open); the proxy never
// dials anything for it (no host loopback); mode none has that one way
// out and no other.
func TestPortsRoute(t *testing.T) {
	var mu sync.Mutex
	var dialed []string
	e := newEnv(t, func(c *Config) {
		inner := c.Dial
		if inner == nil {
			var d net.Dialer
			inner = d.DialContext
		}
		c.Dial = func(ctx context.Context, network, address string) (net.Conn, error) {
			mu.Lock()
			dialed = append(dialed, address)
			mu.Unlock()
			return inner(ctx, network, address)
		}
	})
	pub := e.sandbox(t, "pub-a", "ta", policy.Policy{Ingress: policy.Ingress{Public: true}})
	priv := e.sandbox(t, "priv-a", "ta", policy.Policy{})
	mate := e.sandbox(t, "mate-a", "ta", policy.Policy{})
	allowA := e.sandbox(t, "allow-a", "ta", policy.Policy{Mode: policy.Allowlist, Allow: rules("*.example.test")})
	other := e.sandbox(t, "other-b", "tb", policy.Policy{})
	allow := e.sandbox(t, "allow-b", "tb", policy.Policy{Mode: policy.Allowlist, Allow: rules("*.example.test")})
	open := e.sandbox(t, "open-b", "tb", policy.Policy{Mode: policy.Open})
	byID := map[string]*sandbox{"pub-a": pub, "priv-a": priv, "mate-a": mate, "allow-a": allowA, "other-b": other, "allow-b": allow, "open-b": open}
	tokens := map[string]string{"pub-a": "tok-pub", "priv-a": "tok-priv", "mate-a": "tok-mate", "other-b": "tok-other"}
	pub.serve(t, 8000, "public-marker")
	priv.serve(t, 8000, "private-marker")

	h, err := ports.New(ports.Config{
		Lookup: func(ctx context.Context, id string) (ports.Target, error) {
			sb, ok := byID[id]
			if !ok {
				return ports.Target{}, fmt.Errorf("sandbox %s: %w", id, errdefs.ErrNotFound)
			}
			return ports.Target{Addr: sb.Addr, Ingress: sb.Policy.Policy.Ingress, Tenant: sb.Policy.Tenant}, nil
		},
		Authorize: func(ctx context.Context, id, token string) error {
			if subtle.ConstantTimeCompare([]byte(tokens[id]), []byte(token)) != 1 {
				return errdefs.ErrPermissionDenied
			}
			return nil
		},
		Reserved: ports.ReservedE2B,
		Dial:     e.m.DialSandbox,
	})
	if err != nil {
		t.Fatal(err)
	}
	e.px.SetPorts(ports.DefaultDomain, h)

	e.res.SetPorts(ports.DefaultDomain, pub.Gateway)
	gw := pub.Gateway.String()
	at := func(name string) []string {
		host, _, _ := strings.Cut(name, "/")
		return []string{"--resolve", host + ":80:" + gw, "http://" + name}
	}
	tests := []struct {
		name string
		from *sandbox
		args []string
		code string
		body string
	}{
		{"its own tenant's public port, from mode none", mate, at("8000-pub-a.sandlot.localhost/"), "200", "public-marker from 8000-pub-a.sandlot.localhost"},
		{"its own tenant's private port without the token", mate, at("8000-priv-a.sandlot.localhost/"), "403", "missing traffic access token"},
		{"its own tenant's private port with its own token", mate, append([]string{"-H", "e2b-traffic-access-token: tok-mate"}, at("8000-priv-a.sandlot.localhost/")...), "403", "invalid traffic access token"},
		{"its own tenant's private port with that port's token", mate, append([]string{"-H", "e2b-traffic-access-token: tok-priv"}, at("8000-priv-a.sandlot.localhost/")...), "200", `private-marker from 8000-priv-a.sandlot.localhost token=""`},
		{"its own public port", pub, at("8000-pub-a.sandlot.localhost/"), "200", "public-marker"},
		{"another tenant's public port, from mode none", other, at("8000-pub-a.sandlot.localhost/"), "403", "another tenant's sandbox"},
		{"another tenant's private port with that port's token, from mode none", other, append([]string{"-H", "e2b-traffic-access-token: tok-priv"}, at("8000-priv-a.sandlot.localhost/")...), "403", "another tenant's sandbox"},
		{"another tenant's public port, from an allowlist", allow, at("8000-pub-a.sandlot.localhost/"), "403", "another tenant's sandbox"},
		{"another tenant's public port, with internet access", open, at("8000-pub-a.sandlot.localhost/"), "200", "public-marker"},
		{"another tenant's private port, with internet access and the token", open, append([]string{"-H", "e2b-traffic-access-token: tok-priv"}, at("8000-priv-a.sandlot.localhost/")...), "200", "private-marker"},
		{"another tenant's private port, with internet access, no token", open, at("8000-priv-a.sandlot.localhost/"), "403", "missing traffic access token"},
		{"an unknown sandbox", other, at("8000-nobody.sandlot.localhost/"), "502", "The sandbox was not found"},
		{"a closed port", mate, at("8001-pub-a.sandlot.localhost/"), "502", "port 8001 is not open"},
		{"envd's port: not the daemon's E2B surface", other, at("49983-pub-a.sandlot.localhost/"), "403", "is not a sandbox port the route serves"},
		{"mode none, another name at the gateway", other, at("www.example.test/"), "403", "network mode none"},
		{"mode none, the path form under another name", other, at("www.example.test/v1/contexts/pub-a/ports/8000/"), "403", "egress denied"},
		{"allowlist, a name under the ports domain", allowA, at("8000-pub-a.sandlot.localhost/"), "200", "public-marker"},
		{"allowlist, another port of the gateway", allowA, []string{"--resolve", "8000-pub-a.sandlot.localhost:8080:" + gw, "http://8000-pub-a.sandlot.localhost:8080/"}, "200", "public-marker"},
		{"mode none, another port of the gateway", other, []string{"--max-time", "3", "--resolve", "8000-pub-a.sandlot.localhost:8080:" + gw, "http://8000-pub-a.sandlot.localhost:8080/"}, "000", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, body, r := tt.from.curl(t, tt.args...)
			if code != tt.code || !strings.Contains(body, tt.body) {
				t.Errorf("curl %v: code %s, body %q (%v %s); want %s with %q", tt.args, code, body, r.Err, r.Stderr, tt.code, tt.body)
			}
		})
	}

	t.Run("mode none resolves the route's names, and only them", func(t *testing.T) {
		// At the gateway, the name server of its resolv.conf: the one
		// address mode none may send DNS to.
		ask := func(s *sandbox, name string) *dns.Msg {
			c, err := s.dial(t, gw+":53")
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			q := new(dns.Msg)
			q.SetQuestion(dns.Fqdn(name), dns.TypeA)
			resp, _, err := (&dns.Client{Net: "tcp", Timeout: 3 * time.Second}).ExchangeWithConn(q, &dns.Conn{Conn: c})
			if err != nil {
				t.Fatalf("lookup %s: %v", name, err)
			}
			return resp
		}
		if got := ask(other, "8000-pub-a.sandlot.localhost"); got == nil || len(got.Answer) != 1 || got.Answer[0].(*dns.A).A.String() != gw {
			t.Errorf("A 8000-pub-a.sandlot.localhost from mode none: %v", got)
		}
		if got := ask(other, "www.example.test"); got == nil || got.Rcode != dns.RcodeNameError {
			t.Errorf("A www.example.test from mode none: %v", got)
		}
		// python3's resolver (glibc, no .localhost of its own) finds the route.
		r := nettest.Run(t, mate.Path, mate.ResolvConf(), "python3", "-c",
			"import urllib.request; print(urllib.request.urlopen('http://8000-pub-a.sandlot.localhost/', timeout=10).read().decode())")
		if !strings.Contains(r.Stdout, "public-marker") {
			t.Errorf("python3 in mode none: %q %v %s", r.Stdout, r.Err, r.Stderr)
		}
	})

	t.Run("TLS to the ports domain is refused", func(t *testing.T) {
		if code, body, _ := allow.curl(t, "--resolve", "8000-pub-a.sandlot.localhost:443:"+gw, "https://8000-pub-a.sandlot.localhost/"); code != "000" || strings.Contains(body, "marker") {
			t.Errorf("https: %s %q", code, body)
		}
	})

	t.Run("every request on the connection is checked", func(t *testing.T) {
		c, err := mate.dial(t, gw+":80")
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(10 * time.Second))
		br := bufio.NewReader(c)
		for _, tc := range []struct {
			host string
			code int
		}{{"8000-pub-a.sandlot.localhost", 200}, {"www.example.test", 421}} {
			fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: %s\r\n\r\n", tc.host)
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatalf("%s: %v", tc.host, err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.code {
				t.Errorf("%s on a kept-alive connection: %d %q, want %d", tc.host, resp.StatusCode, b, tc.code)
			}
		}
	})

	mu.Lock()
	if len(dialed) != 0 {
		t.Errorf("the proxy dialed %v for the ports route", dialed)
	}
	mu.Unlock()
	evs := e.eventsFor("mate-a")
	found := false
	for _, ev := range evs {
		if ev.Host == "8000-pub-a.sandlot.localhost" && ev.Allowed && ev.Reason == "ports route" && ev.BytesDown > 0 {
			found = true
		}
		if ev.Allowed && ev.Reason != "ports route" {
			t.Errorf("mode none allowed something else: %+v", ev)
		}
	}
	if !found {
		t.Errorf("no audit event of the ports route: %+v", evs)
	}
}

// BenchmarkPortsRoute is one small request (kept-alive connection) to a
// sandbox's port through the ports route: from another sandbox, answered
// by the proxy in process (/sandbox), beside the same handler on a
// listener of the daemon's namespace, as the front door serves it from
// outside (/frontdoor, the floor measured in the same run).
func BenchmarkPortsRoute(b *testing.B) {
	e := newEnv(b)
	a := e.sandbox(b, "bench-a", "t1", policy.Policy{Ingress: policy.Ingress{Public: true}})
	c := e.sandbox(b, "bench-c", "t1", policy.Policy{})
	l, err := netns.Listen(context.Background(), a.Path, "tcp4", "0.0.0.0:8000")
	if err != nil {
		b.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })}
	go srv.Serve(l)
	b.Cleanup(func() { srv.Close() })
	h, err := ports.New(ports.Config{
		Lookup: func(ctx context.Context, id string) (ports.Target, error) {
			return ports.Target{Addr: a.Addr, Ingress: a.Policy.Policy.Ingress, Tenant: "t1"}, nil
		},
		Authorize: func(ctx context.Context, id, token string) error { return errdefs.ErrPermissionDenied },
		Dial:      e.m.DialSandbox,
	})
	if err != nil {
		b.Fatal(err)
	}
	e.px.SetPorts(ports.DefaultDomain, h)
	fl, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	front := &http.Server{Handler: h}
	go front.Serve(fl)
	b.Cleanup(func() { front.Close() })

	for _, tc := range []struct {
		name, ns, addr string
	}{{"sandbox", c.Path, a.Gateway.String() + ":80"}, {"frontdoor", "", fl.Addr().String()}} {
		b.Run(tc.name, func(b *testing.B) {
			dial := netns.Dialer(tc.ns)
			tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) { return dial(ctx, "tcp4", tc.addr) }}
			defer tr.CloseIdleConnections()
			client := &http.Client{Transport: tr}
			for b.Loop() {
				resp, err := client.Get("http://8000-bench-a.sandlot.localhost/")
				if err != nil {
					b.Fatal(err)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 || string(body) != "ok" {
					b.Fatalf("%d %q", resp.StatusCode, body)
				}
			}
		})
	}
}
