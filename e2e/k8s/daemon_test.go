package k8s

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/daemon"
	"github.com/sandlot/sandlot/internal/kubetest"
	"github.com/sandlot/sandlot/internal/testenv"
	"github.com/sandlot/sandlot/network/policy"
	"github.com/sandlot/sandlot/store/memory"
	"github.com/sandlot/sandlot/tenant"
)

// allowProxyOnNode adds a policy (policies add up) that lets the sandbox
// pods of ns reach the node's address on their bridge at port: the
// tests' daemon runs on the node, not in a pod the provider's policy
// names.
func allowProxyOnNode(t *testing.T, c *kubetest.Cluster, ns string, port int) {
	t.Helper()
	tcp := corev1.ProtocolTCP
	p := intstr.FromInt(port)
	np := &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "test-proxy-on-node"},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"sandlot.dev/role": "sandbox"}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress},
			Egress: []networkingv1.NetworkPolicyEgressRule{{
				To:    []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: c.PodGateway() + "/32"}}},
				Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: &p}},
			}},
		},
	}
	if _, err := c.Client().NetworkingV1().NetworkPolicies(ns).Create(context.Background(), np, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestDaemonOnCluster: the daemon itself with the kubernetes provider on
// the test cluster. A context with an allowlist reaches, through the
// daemon's own egress proxy, the allowed server on the node and not
// another port there (the policy from the record, the audit in the
// store); a server started in the sandbox is reached through the daemon's
// ports route in the path and host forms, with the tenant's key, and not
// without it or with another tenant's.
func TestDaemonOnCluster(t *testing.T) {
	testenv.Require(t, os.Geteuid() == 0, "root (the test cluster)")
	c := kubetest.Shared(t)
	ref := defaultPodImage(t, c)
	ns := namespace(t, c, "daemon")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "upstream says hi")
	}))
	defer upstream.Close()
	_, upPort, _ := net.SplitHostPort(upstream.Listener.Addr().String())
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "other server")
	}))
	defer other.Close()
	_, otherPort, _ := net.SplitHostPort(other.Listener.Addr().String())

	l, err := net.Listen("tcp4", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	proxyPort := l.Addr().(*net.TCPAddr).Port
	l.Close() // the daemon listens there

	st := memory.New()
	keys := map[string]string{}
	for _, id := range []string{"t1", "t2"} {
		k, err := tenant.NewKey()
		if err != nil {
			t.Fatal(err)
		}
		if err := st.CreateTenant(ctx, &tenant.Tenant{ID: id, Name: id}, tenant.HashKey(k)); err != nil {
			t.Fatal(err)
		}
		keys[id] = k
	}
	d, err := daemon.New(ctx, daemon.Config{
		DataDir:   t.TempDir(),
		StateDir:  t.TempDir(),
		Providers: []string{"kubernetes"},
		PoolSize:  0,
		Network:   daemon.Network{Reachable: "127.0.0.0/8"},
		Kubernetes: daemon.Kubernetes{
			Kubeconfig:    c.Kubeconfig,
			Namespace:     ns,
			RuntimeClass:  "gvisor",
			Images:        map[string]string{"default": ref},
			EgressProxy:   net.JoinHostPort(c.PodGateway(), fmt.Sprint(proxyPort)),
			EgressListen:  fmt.Sprintf("0.0.0.0:%d", proxyPort),
			EgressKey:     daemon.EgressKey([]byte("a secrets key of thirty-two byte")),
			CreateTimeout: 5 * time.Minute,
		},
	}, st)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close(context.Background())
	front := httptest.NewServer(d.Handler())
	defer front.Close()
	allowProxyOnNode(t, c, ns, proxyPort)

	m := d.Manager()
	id := contexts.Identity{TenantID: "t1", ConversationID: "ports", PathID: "main"}
	pol := &policy.Policy{Mode: policy.Allowlist, Allow: []policy.Rule{policy.MustRule("127.0.0.1/32:" + upPort)}}
	rec, err := m.GetOrCreate(ctx, id, contexts.CreateOptions{Network: pol})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Terminate(context.Background(), "t1", rec.ID, contexts.ReasonManual)
	run := func(code string) string {
		res, err := m.Execute(ctx, id, contexts.ExecuteRequest{Language: "bash", Code: code, Timeout: time.Minute}, nil)
		if err != nil {
			t.Fatalf("execute: %v", err)
		}
		return strings.TrimSpace(res.Stdout + res.Stderr)
	}
	fetch := `python3 -c 'import sys,urllib.request,urllib.error
try:
    print(urllib.request.urlopen(sys.argv[1], timeout=20).read().decode())
except urllib.error.HTTPError as e:
    print(e.code, e.read().decode())
except Exception as e:
    print("error", e)' `

	// Egress through the daemon's proxy, the enforcer being asynchronous.
	poll(t, 2*time.Minute, "the allowed server through the daemon's proxy", func() (bool, string) {
		got := run(fetch + "http://127.0.0.1:" + upPort + "/")
		return got == "upstream says hi", got
	})
	if got := run(fetch + "http://127.0.0.1:" + otherPort + "/"); !strings.Contains(got, "403") || !strings.Contains(got, "not in the allowlist") {
		t.Errorf("another port of the node: %q", got)
	}

	// Ports: a server in the sandbox, through the front door.
	run(`cd /tmp && echo "served from the pod" > index.html && (nohup python3 -m http.server 8000 --bind 0.0.0.0 >/dev/null 2>&1 &)`)
	get := func(url, host, token string) (int, string) {
		req, _ := http.NewRequest("GET", url, nil)
		if host != "" {
			req.Host = host
		}
		if token != "" {
			req.Header.Set("e2b-traffic-access-token", token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	path := front.URL + "/v1/contexts/" + rec.ID + "/ports/8000/index.html"
	poll(t, time.Minute, "the sandbox's server through the ports route", func() (bool, string) {
		code, body := get(path, "", keys["t1"])
		return code == 200 && strings.Contains(body, "served from the pod"), fmt.Sprint(code, " ", body)
	})
	if code, body := get(front.URL+"/index.html", "8000-"+rec.ID+".sandlot.localhost", keys["t1"]); code != 200 || !strings.Contains(body, "served from the pod") {
		t.Errorf("host form: %d %q", code, body)
	}
	if code, body := get(front.URL+"/index.html", "8000-"+rec.SandboxID+".sandlot.localhost", keys["t1"]); code != 200 || !strings.Contains(body, "served from the pod") {
		t.Errorf("host form by the sandbox's own id: %d %q", code, body)
	}
	for what, tok := range map[string]string{"no token": "", "another tenant's key": keys["t2"]} {
		if code, body := get(path, "", tok); code != http.StatusForbidden || strings.Contains(body, "served from the pod") {
			t.Errorf("%s: %d %q, want 403", what, code, body)
		}
	}
	if code, _ := get(front.URL+"/v1/contexts/"+rec.ID+"/ports/8001/", "", keys["t1"]); code != http.StatusBadGateway {
		t.Errorf("a closed port: %d, want 502", code)
	}

	// The audit reached the store with the tenant and the context.
	poll(t, 30*time.Second, "the egress audit in the store", func() (bool, string) {
		evs, err := st.ListAudit(ctx, "t1", 0)
		if err != nil {
			return false, err.Error()
		}
		var allowed, denied bool
		for _, ev := range evs {
			if ev.Kind != "network.connection" || ev.ContextID != rec.ID {
				continue
			}
			allowed = allowed || ev.Detail["allowed"] == "true"
			denied = denied || ev.Detail["allowed"] == "false"
		}
		return allowed && denied, fmt.Sprintf("%d events", len(evs))
	})
}
