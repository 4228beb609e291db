package k8s

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/internal/kubetest"
	"github.com/sandlot/sandlot/internal/testenv"
	"github.com/sandlot/sandlot/network/audit"
	"github.com/sandlot/sandlot/network/egress"
	"github.com/sandlot/sandlot/network/policy"
	"github.com/sandlot/sandlot/network/secret"
	"github.com/sandlot/sandlot/provider/kubernetes"
)

// testEgress is the daemon's side of the test's sandbox: one secret, for
// example.com.
type testEgress struct{ placeholder string }

func (e testEgress) Prepare(context.Context, string, policy.Policy) (map[string]string, error) {
	return map[string]string{"API_KEY": e.placeholder}, nil
}

// TestProviderEgress: a sandbox pod on the real cluster with an allowlist
// reaches, through the egress proxy (run by the test on the node, as a
// replica's would run in its pod), an allowed HTTP server and not a
// refused one, gets its secret injected at the edge on HTTPS, and the
// proxy knows it by its credential and its pod's address: the same
// credential from the node is refused, as is a forged one from the pod.
func TestProviderEgress(t *testing.T) {
	testenv.Require(t, os.Geteuid() == 0, "root (the test cluster)")
	c := kubetest.Shared(t)
	ref := defaultPodImage(t, c)
	ns := namespace(t, c, "egress")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	// The upstream servers, on the node's loopback.
	seen := make(chan string, 16)
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case seen <- r.Host + " auth=" + r.Header.Get("Authorization") + " proxyauth=" + r.Header.Get("Proxy-Authorization"):
		default:
		}
		fmt.Fprintf(w, "hello from %s, you sent %q", r.Host, r.Header.Get("Authorization"))
	})
	plain := httptest.NewServer(handler)
	defer plain.Close()
	tlsSrv := httptest.NewTLSServer(handler)
	defer tlsSrv.Close()
	_, plainPort, _ := net.SplitHostPort(plain.Listener.Addr().String())
	_, tlsPort, _ := net.SplitHostPort(tlsSrv.Listener.Addr().String())
	roots := x509.NewCertPool()
	roots.AddCert(tlsSrv.Certificate())

	// The proxy listens on every address of the node; pods reach it at the
	// node's address on their bridge.
	ln, err := net.Listen("tcp4", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	proxyPort := ln.Addr().(*net.TCPAddr).Port
	proxyAddr := net.JoinHostPort(c.PodGateway(), fmt.Sprint(proxyPort))

	sec, err := secret.New([]string{"example.com"}, "the-real-api-key")
	if err != nil {
		t.Fatal(err)
	}
	set, err := secret.NewSet([]secret.Secret{sec})
	if err != nil {
		t.Fatal(err)
	}
	key := []byte("e2e egress credential key 32 by")
	p, err := kubernetes.New(kubernetes.Config{
		Client:       c.Dynamic(),
		Namespace:    ns,
		RuntimeClass: "gvisor",
		Templates:    map[string]kubernetes.Template{"default": {Image: ref}},
		EgressProxy:  proxyAddr,
		EgressKey:    key,
		Egress:       testEgress{placeholder: sec.Placeholder()},
		ReadyTimeout: 5 * time.Minute,
	})
	if err != nil {
		t.Fatal(err)
	}
	pol := policy.Policy{Mode: policy.Allowlist, Allow: []policy.Rule{policy.MustRule("allowed.test"), policy.MustRule("example.com")}, Secrets: []string{"api"}}
	events := make(chan audit.Event, 64)
	px, err := egress.New(egress.NewRegistry(), egress.Config{
		Resolve: func(_ context.Context, name string) ([]netip.Addr, error) {
			switch name {
			case "allowed.test", "refused.test", "example.com":
				return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
			}
			return nil, errors.New("no such host")
		},
		RootCAs: roots,
		Audit: func(ev audit.Event) {
			select {
			case events <- ev:
			default:
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer px.Close()
	go px.ServeForward(ln, egress.ForwardConfig{Key: key, Identify: func(ctx context.Context, id string) (*egress.Sandbox, []netip.Addr, error) {
		peer, err := p.EgressPeer(ctx, id)
		if err != nil {
			return nil, nil, err
		}
		eff := &policy.Effective{Tenant: peer.Tenant, Policy: pol, Reachable: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}
		return &egress.Sandbox{ID: id, Tenant: peer.Tenant, Policy: eff, Secrets: set, CA: peer.CA}, peer.Addrs, nil
	}})

	// The provider's policy lets sandbox pods reach sandlot's pods on the
	// proxy's port; the test's proxy is on the node, so a second policy
	// (policies add up) opens that one address and port too.
	tcp := corev1.ProtocolTCP
	port := intstr.FromInt(proxyPort)
	extra := &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "test-proxy-on-node"},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"sandlot.dev/role": "sandbox"}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress},
			Egress: []networkingv1.NetworkPolicyEgressRule{{
				To:    []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: c.PodGateway() + "/32"}}},
				Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: &port}},
			}},
		},
	}
	if _, err := c.Client().NetworkingV1().NetworkPolicies(ns).Create(ctx, extra, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	sb, err := p.Create(ctx, contexts.Spec{Template: "default", Network: &pol,
		Labels: map[string]string{contexts.LabelTenant: "t1", contexts.LabelContext: "ctx-egress"}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		sb.Close()
		p.Destroy(context.Background(), sb.ID())
	}()

	// fetch runs a Python urllib GET in the sandbox (it takes the proxy,
	// credential included, from HTTP(S)_PROXY and the CA from
	// SSL_CERT_FILE) and returns the status and body, or the error.
	fetch := func(url string, headers ...string) string {
		script := `import os,sys,urllib.request,urllib.error
req = urllib.request.Request(sys.argv[1])
for h in sys.argv[2:]:
    k, v = h.split(": ", 1); req.add_header(k, os.path.expandvars(v))
try:
    r = urllib.request.urlopen(req, timeout=20); print(r.status, r.read().decode())
except urllib.error.HTTPError as e:
    print(e.code, e.read().decode())
except Exception as e:
    print("error", e)`
		r, err := sb.Exec(ctx, agent.ExecParams{Argv: append([]string{"python3", "-c", script, url}, headers...)}, nil)
		if err != nil {
			t.Fatalf("exec: %v", err)
		}
		return strings.TrimSpace(r.Stdout + r.Stderr)
	}
	// The policies are applied asynchronously by the enforcer.
	var got string
	poll(t, 2*time.Minute, "the allowed server through the proxy", func() (bool, string) {
		got = fetch("http://allowed.test:" + plainPort + "/")
		return strings.HasPrefix(got, "200 hello from allowed.test"), got
	})
	if got := fetch("http://refused.test:" + plainPort + "/"); !strings.Contains(got, "403") || !strings.Contains(got, "name not allowed: refused.test") {
		t.Errorf("a name outside the allowlist: %q", got)
	}
	if got := fetch("http://127.0.0.1:" + plainPort + "/"); !strings.Contains(got, "403") {
		t.Errorf("an address of the sandbox's choice: %q", got)
	}
	got = fetch("https://example.com:"+tlsPort+"/", "Authorization: Bearer $API_KEY")
	if !strings.HasPrefix(got, "200 ") || strings.Contains(got, "the-real-api-key") || !strings.Contains(got, sec.Placeholder()) {
		t.Errorf("https with the secret's placeholder: %q; want 200, the placeholder back, never the value", got)
	}
	sawValue := false
	for len(seen) > 0 {
		s := <-seen
		if strings.Contains(s, "proxyauth=Basic") {
			t.Errorf("the proxy credential reached a server: %s", s)
		}
		sawValue = sawValue || strings.Contains(s, "auth=Bearer the-real-api-key")
	}
	if !sawValue {
		t.Error("the server never received the secret's value")
	}

	// The pod's credential, used from the node: refused (not its pod).
	r, err := sb.Exec(ctx, agent.ExecParams{Shell: `echo "$HTTP_PROXY"`}, nil)
	if err != nil {
		t.Fatal(err)
	}
	proxyURL := strings.TrimSpace(r.Stdout)
	if !strings.Contains(proxyURL, sb.ID()+":") {
		t.Fatalf("HTTP_PROXY %q does not carry the sandbox's credential", proxyURL)
	}
	pu, err := url.Parse(proxyURL)
	if err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{Proxy: http.ProxyURL(pu)}}
	resp, err := hc.Get("http://allowed.test:" + plainPort + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusProxyAuthRequired {
		t.Errorf("the pod's credential from the node: %s, want 407", resp.Status)
	}
	// A forged credential from the pod: another sandbox's id.
	forged := strings.Replace(proxyURL, sb.ID()+":", "k8s-000000000000:", 1)
	r, err = sb.Exec(ctx, agent.ExecParams{Argv: []string{"python3", "-c", `import sys,urllib.request
h = urllib.request.ProxyHandler({"http": sys.argv[1]})
try:
    print(urllib.request.build_opener(h).open(sys.argv[2], timeout=20).status)
except Exception as e:
    print(getattr(e, "code", e))`, forged, "http://allowed.test:" + plainPort + "/"}}, nil)
	if err != nil || strings.TrimSpace(r.Stdout) != "407" {
		t.Errorf("a forged credential from the pod: %q %v, want 407", r.Stdout, err)
	}

	var allowed, refused bool
	for len(events) > 0 {
		ev := <-events
		if ev.SandboxID != sb.ID() || ev.Tenant != "t1" {
			t.Errorf("audit event of another sandbox: %+v", ev)
		}
		allowed = allowed || (ev.Allowed && ev.Host == "allowed.test")
		refused = refused || (!ev.Allowed && ev.Host == "refused.test")
	}
	if !allowed || !refused {
		t.Error("the audit lacks the allowed or the refused connection")
	}
}
