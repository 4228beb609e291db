package k8s

import (
	"context"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/internal/kubetest"
	"github.com/sandlot/sandlot/internal/testenv"
	"github.com/sandlot/sandlot/network/policy"
	"github.com/sandlot/sandlot/provider/kubernetes"
)

// TestModeNoneReachesNothing attacks the egress proxy's port from a sandbox
// pod of network mode none. The "proxy" is a pod labelled as sandlot's own
// (app.kubernetes.io/name=sandlot) answering on the proxy's port, so the
// provider's NetworkPolicy applies as it does to a replica. A pod given the
// proxy (mode open) connects to it; a mode-none pod, warm (claimed from the
// pool, its labels the pool's until the provider labels it) or cold, must
// not be able to open a connection at all. Before the fix every sandbox pod
// reached the proxy's port (the proxy then answered 407).
func TestModeNoneReachesNothing(t *testing.T) {
	testenv.Require(t, os.Geteuid() == 0, "root (the test cluster)")
	c := kubetest.Shared(t)
	ref := defaultPodImage(t, c)
	ns := namespace(t, c, "egressnone")
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()

	proxyIP := runPod(t, c, ns, probePod("fake-proxy", c.ProbeImage(), "", map[string]string{"app.kubernetes.io/name": "sandlot"}))
	proxy := net.JoinHostPort(proxyIP, "8080")
	p, err := kubernetes.New(kubernetes.Config{
		Client:       c.Dynamic(),
		Namespace:    ns,
		RuntimeClass: "gvisor",
		Templates:    map[string]kubernetes.Template{"default": {Image: ref, Pool: 1}},
		EgressProxy:  proxy,
		ReadyTimeout: 5 * time.Minute,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Prepare(ctx); err != nil {
		t.Fatal(err)
	}
	poolReady := func() {
		poll(t, 5*time.Minute, "the warm pool ready", func() (bool, string) {
			u, err := c.Dynamic().Resource(warmPools).Namespace(ns).Get(ctx, "sandlot-default", metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			ready, _, _ := unstructured.NestedInt64(u.Object, "status", "readyReplicas")
			return ready >= 1, fmt.Sprintf("status %v", u.Object["status"])
		})
	}
	create := func(name string, n *policy.Policy, lim contexts.Limits) contexts.Sandbox {
		t.Helper()
		sb, err := p.Create(ctx, contexts.Spec{Template: "default", Network: n, Limits: lim})
		if err != nil {
			t.Fatalf("%s: create: %v", name, err)
		}
		t.Cleanup(func() {
			sb.Close()
			p.Destroy(context.Background(), sb.ID())
		})
		return sb
	}
	// connect tries a TCP connection to the proxy's port from the pod.
	connect := func(sb contexts.Sandbox) string {
		r, err := sb.Exec(ctx, agent.ExecParams{Argv: []string{"python3", "-c", `import socket,sys
try:
    socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=3).close(); print("connected")
except Exception as e:
    print("refused", e)`, proxyIP, "8080"}}, nil)
		if err != nil {
			t.Fatalf("exec: %v", err)
		}
		return strings.TrimSpace(r.Stdout + r.Stderr)
	}

	// The control: a pod given the proxy reaches it (once the enforcer has
	// the pod; it applies policies asynchronously).
	open := create("open", &policy.Policy{Mode: policy.Open}, contexts.Limits{MemoryBytes: 1 << 30})
	poll(t, 2*time.Minute, "a mode-open pod connecting to the proxy's port", func() (bool, string) {
		got := connect(open)
		return got == "connected", got
	})

	none := policy.Policy{Mode: policy.None}
	poolReady()
	warm := create("none, warm", &none, contexts.Limits{})
	cl, err := c.Dynamic().Resource(claims).Namespace(ns).Get(ctx, warm.ID(), metav1.GetOptions{})
	if err != nil {
		t.Fatalf("mode none, warm: the claim: %v", err)
	}
	if name, _, _ := unstructured.NestedString(cl.Object, "status", "sandbox", "name"); name == warm.ID() || name == "" {
		t.Fatalf("mode none, warm: the claim was served cold (%q), want one of the pool's", name)
	}
	// sandlot's pods (the replicas) reach a mode-none pod's agent as
	// they reach any sandbox pod: a replica enrolls the claimed pod right
	// after labelling it, and any replica attaches it.
	sbName, _, _ := unstructured.NestedString(cl.Object, "status", "sandbox", "name")
	sbObj, err := c.Dynamic().Resource(sandboxes).Namespace(ns).Get(ctx, sbName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ips, _, _ := unstructured.NestedStringSlice(sbObj.Object, "status", "podIPs")
	if len(ips) == 0 {
		t.Fatal("the warm sandbox has no pod IP")
	}
	agentAddr := net.JoinHostPort(ips[0], "49983")
	first := time.Now()
	var derr error
	for deadline := first.Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if _, derr = get("http://" + proxyIP + ":8080/dial?addr=" + agentAddr); derr == nil {
			break
		}
	}
	t.Logf("sandlot's pod -> the mode-none pod's agent: %v, %.1fs after the create", derr, time.Since(first).Seconds())
	if derr != nil {
		t.Errorf("sandlot's pod cannot reach a mode-none pod's agent: %v", derr)
	}
	cold := create("none, cold", &none, contexts.Limits{MemoryBytes: 1 << 30})
	for _, tc := range []struct {
		name string
		sb   contexts.Sandbox
	}{{"warm", warm}, {"cold", cold}} {
		t.Run(tc.name, func(t *testing.T) {
			// The enforcer applies the label's policy asynchronously: wait
			// (bounded) for the first refusal, then it must hold.
			var got string
			deadline := time.Now().Add(time.Minute)
			for got = connect(tc.sb); got == "connected" && time.Now().Before(deadline); got = connect(tc.sb) {
				time.Sleep(time.Second)
			}
			if got == "connected" {
				t.Fatalf("a mode-none pod connects to the egress proxy's port %s", proxy)
			}
			for range 3 {
				if got := connect(tc.sb); got == "connected" {
					t.Fatalf("a mode-none pod connected to the egress proxy's port after being refused")
				}
			}
			t.Logf("mode none, %s: %s", tc.name, got)
		})
	}
	// The open pod still reaches it: the policies select by label, not
	// all sandbox pods at once.
	if got := connect(open); got != "connected" {
		t.Errorf("the mode-open pod after the mode-none ones: %s", got)
	}
}
