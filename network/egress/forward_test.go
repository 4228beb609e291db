package egress

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandlot/sandlot/network/audit"
	"github.com/sandlot/sandlot/network/ca"
	"github.com/sandlot/sandlot/network/policy"
	"github.com/sandlot/sandlot/network/secret"
)

// fwdEnv is a forward proxy on loopback with two sandboxes: "a" (an
// allowlist, a secret) whose pod is 127.0.0.1, the address the tests
// connect from, and "b" (mode open) whose pod is 127.0.0.2.
type fwdEnv struct {
	key    []byte
	addr   string
	port   string // the upstream servers' port
	tlsSrv *httptest.Server
	seen   chan http.Header
	sbCA   *ca.CA
	// placeholder is sandbox a's secret's, for example.com.
	placeholder string

	mu     sync.Mutex
	events []audit.Event
}

func newFwdEnv(t *testing.T) *fwdEnv {
	t.Helper()
	e := &fwdEnv{key: []byte("0123456789abcdef0123456789abcdef"), seen: make(chan http.Header, 16)}
	upstream := func(w http.ResponseWriter, r *http.Request) {
		select {
		case e.seen <- r.Header.Clone():
		default:
		}
		fmt.Fprintf(w, "upstream %s %s auth=%q", r.Host, r.URL.Path, r.Header.Get("Authorization"))
	}
	plain := httptest.NewServer(http.HandlerFunc(upstream))
	t.Cleanup(plain.Close)
	_, e.port, _ = net.SplitHostPort(plain.Listener.Addr().String())
	e.tlsSrv = httptest.NewUnstartedServer(http.HandlerFunc(upstream))
	e.tlsSrv.StartTLS()
	t.Cleanup(e.tlsSrv.Close)
	roots := x509.NewCertPool()
	roots.AddCert(e.tlsSrv.Certificate())

	loop := []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
	sbCA, err := ca.New("a", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	e.sbCA = sbCA
	sec, err := secret.New([]string{"example.com"}, "s3cret-value")
	if err != nil {
		t.Fatal(err)
	}
	e.placeholder = sec.Placeholder()
	set, err := secret.NewSet([]secret.Secret{sec})
	if err != nil {
		t.Fatal(err)
	}
	a := &Sandbox{ID: "a", Tenant: "t1", CA: sbCA, Secrets: set, Policy: &policy.Effective{Tenant: "t1", Reachable: loop,
		Policy: policy.Policy{Mode: policy.Allowlist, Allow: rules("allowed.test", "example.com")}}}
	b := &Sandbox{ID: "b", Tenant: "t2", Policy: &policy.Effective{Tenant: "t2", Reachable: loop, Policy: policy.Policy{Mode: policy.Open}}}
	pods := map[string]struct {
		sb    *Sandbox
		addrs []netip.Addr
	}{
		"a": {a, []netip.Addr{netip.MustParseAddr("127.0.0.1")}},
		"b": {b, []netip.Addr{netip.MustParseAddr("127.0.0.2")}},
	}
	px, err := New(NewRegistry(), Config{
		Resolve: func(_ context.Context, name string) ([]netip.Addr, error) {
			switch name {
			case "allowed.test", "denied.test", "example.com":
				return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
			}
			return nil, errors.New("no such host")
		},
		RootCAs: roots,
		Audit: func(ev audit.Event) {
			e.mu.Lock()
			e.events = append(e.events, ev)
			e.mu.Unlock()
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close(); px.Close() })
	go px.ServeForward(l, ForwardConfig{Key: e.key, Identify: func(_ context.Context, id string) (*Sandbox, []netip.Addr, error) {
		p, ok := pods[id]
		if !ok {
			return nil, nil, errors.New("no such sandbox")
		}
		return p.sb, p.addrs, nil
	}})
	e.addr = l.Addr().String()
	return e
}

// exchange sends head (and, after a 200 to a CONNECT, then) on a new
// connection from 127.0.0.1 and returns everything the proxy answered.
func (e *fwdEnv) exchange(t *testing.T, head, then string) string {
	t.Helper()
	c, err := net.DialTimeout("tcp4", e.addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(20 * time.Second))
	io.WriteString(c, head)
	br := bufio.NewReader(c)
	if then != "" {
		line, err := br.ReadString('\n')
		if err != nil || !strings.Contains(line, " 200 ") {
			return line
		}
		for l := ""; l != "\r\n"; {
			if l, err = br.ReadString('\n'); err != nil {
				return "no end of the CONNECT answer"
			}
		}
		io.WriteString(c, then)
	}
	b, _ := io.ReadAll(br)
	return string(b)
}

func basic(id, pass string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(id+":"+pass))
}

// TestForwardIdentity attacks the forward proxy's notion of whose a
// connection is: no credential, a forged one, another sandbox's id with
// one's own password, and another sandbox's valid credential used from
// the wrong pod are all refused before anything is dialled.
func TestForwardIdentity(t *testing.T) {
	e := newFwdEnv(t)
	get := func(auth string) string {
		return fmt.Sprintf("GET http://allowed.test:%s/x HTTP/1.1\r\nHost: allowed.test:%s\r\n%s\r\n", e.port, e.port, auth)
	}
	for _, tt := range []struct {
		name, auth, want string
	}{
		{"no credential", "", "407 Proxy Authentication Required"},
		{"a password made with another key", "Proxy-Authorization: " + basic("a", Credential([]byte("another key of 32 bytes........."), "a")) + "\r\n", "407"},
		{"another sandbox's id with a's password", "Proxy-Authorization: " + basic("b", Credential(e.key, "a")) + "\r\n", "407"},
		{"b's own credential, from a's pod", "Proxy-Authorization: " + basic("b", Credential(e.key, "b")) + "\r\n", "does not come from its pod"},
		{"an unknown sandbox", "Proxy-Authorization: " + basic("zz", Credential(e.key, "zz")) + "\r\n", "no such sandbox"},
		{"a bearer token", "Proxy-Authorization: Bearer " + Credential(e.key, "a") + "\r\n", "407"},
		{"a's credential from a's pod", "Proxy-Authorization: " + basic("a", Credential(e.key, "a")) + "\r\n", "200 OK"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := e.exchange(t, get(tt.auth), ""); !strings.Contains(got, tt.want) {
				t.Errorf("answer %q, want %q", got, tt.want)
			}
		})
	}
	// Only the last request reached the upstream, and without the proxy's
	// header.
	select {
	case h := <-e.seen:
		if h.Get("Proxy-Authorization") != "" || h.Get("Proxy-Connection") != "" {
			t.Errorf("the credential went upstream: %v", h)
		}
	default:
		t.Error("the allowed request never reached the upstream")
	}
	if len(e.seen) != 0 {
		t.Errorf("%d refused requests reached the upstream", len(e.seen))
	}
}

// TestForwardPolicy holds a sandbox to its allowlist through both proxy
// forms: a name outside it, an address the sandbox picks, and a CONNECT
// target that the first bytes contradict.
func TestForwardPolicy(t *testing.T) {
	e := newFwdEnv(t)
	auth := "Proxy-Authorization: " + basic("a", Credential(e.key, "a")) + "\r\n"
	plain := func(host string) string {
		return fmt.Sprintf("GET http://%s:%s/p HTTP/1.1\r\nHost: %s:%s\r\nProxy-Connection: keep-alive\r\n%s\r\n", host, e.port, host, e.port, auth)
	}
	connect := func(host string) string {
		return fmt.Sprintf("CONNECT %s:%s HTTP/1.1\r\nHost: %s:%s\r\n%s\r\n", host, e.port, host, e.port, auth)
	}
	inner := func(host string) string {
		return fmt.Sprintf("GET /t HTTP/1.1\r\nHost: %s:%s\r\nConnection: close\r\n\r\n", host, e.port)
	}
	for _, tt := range []struct {
		name, head, then, want string
	}{
		{"plain, allowed name", plain("allowed.test"), "", "upstream allowed.test:" + e.port + " /p"},
		{"plain, name outside the allowlist", plain("denied.test"), "", "name not allowed: denied.test"},
		{"plain, an address of the sandbox's choice", plain("127.0.0.1"), "", "not in the allowlist: 127.0.0.1"},
		{"connect, allowed name", connect("allowed.test"), inner("allowed.test"), "upstream allowed.test:" + e.port + " /t"},
		{"connect, name outside the allowlist", connect("denied.test"), inner("denied.test"), "name not allowed: denied.test"},
		{"connect to an allowed name, Host outside", connect("allowed.test"), inner("denied.test"), "name not allowed: denied.test"},
		{"connect, an address of the sandbox's choice", connect("127.0.0.1"), inner("127.0.0.1"), "not in the allowlist: 127.0.0.1"},
		{"connect, no port", "CONNECT allowed.test HTTP/1.1\r\nHost: allowed.test\r\n" + auth + "\r\n", "x", "400 Bad Request"},
		{"plain https URL", fmt.Sprintf("GET https://allowed.test:%s/ HTTP/1.1\r\nHost: allowed.test\r\n%s\r\n", e.port, auth), "", "400 Bad Request"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := e.exchange(t, tt.head, tt.then); !strings.Contains(got, tt.want) {
				t.Errorf("answer %q, want %q", got, tt.want)
			}
		})
	}
	t.Run("audit", func(t *testing.T) {
		e.mu.Lock()
		defer e.mu.Unlock()
		var allowed, denied bool
		for _, ev := range e.events {
			if ev.SandboxID != "a" || ev.Tenant != "t1" {
				t.Errorf("event of another sandbox: %+v", ev)
			}
			allowed = allowed || (ev.Allowed && ev.Host == "allowed.test")
			denied = denied || (!ev.Allowed && ev.Host == "denied.test")
		}
		if !allowed || !denied {
			t.Errorf("events %+v: want an allowed allowed.test and a denied denied.test", e.events)
		}
	})
}

// TestForwardSecret injects a sandbox's secret at the edge through a
// CONNECT tunnel: the sandbox sends the placeholder, the server gets the
// value, and the sandbox trusts only its own CA for the name.
func TestForwardSecret(t *testing.T) {
	e := newFwdEnv(t)
	_, tlsPort, _ := net.SplitHostPort(e.tlsSrv.Listener.Addr().String())
	pool := x509.NewCertPool()
	pool.AddCert(e.sbCA.Certificate())
	proxy, _ := url.Parse(ProxyURL(e.key, "a", e.addr))
	client := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{
		Proxy:           http.ProxyURL(proxy),
		TLSClientConfig: &tls.Config{RootCAs: pool},
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)}}
			return d.DialContext(ctx, "tcp4", addr)
		},
	}}
	req, _ := http.NewRequest("GET", "https://example.com:"+tlsPort+"/s", nil)
	req.Header.Set("Authorization", "Bearer "+e.placeholder)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	// The server saw the value; what came back has it swapped out again.
	h := <-e.seen
	if h.Get("Authorization") != "Bearer s3cret-value" {
		t.Errorf("upstream Authorization %q, want the secret's value", h.Get("Authorization"))
	}
	if strings.Contains(string(body), "s3cret-value") || !strings.Contains(string(body), e.placeholder) {
		t.Errorf("the sandbox read %q: want the placeholder, never the value", body)
	}
}
