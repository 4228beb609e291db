package k8s

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/sandlot/sandlot/internal/kubetest"
)

// TestNetworkPolicyEgress attacks the wall a sandbox pod's NetworkPolicy is:
// a pod allowed only one destination must not reach another pod, the API
// server (by its service address or the node's) or the node. The same pod
// reaches all of them before the policy, so a cluster that enforces nothing
// fails here. Under runc and gVisor, whose network stack differs.
func TestNetworkPolicyEgress(t *testing.T) {
	c := kubetest.Shared(t)
	for _, tc := range []struct{ name, runtimeClass string }{
		{"runc", ""},
		{"gvisor", kubetest.GVisorRuntimeClass},
	} {
		t.Run(tc.name, func(t *testing.T) {
			testNetworkPolicyEgress(t, c, tc.runtimeClass)
		})
	}
}

func testNetworkPolicyEgress(t *testing.T, c *kubetest.Cluster, runtimeClass string) {
	ns := namespace(t, c, "netpol")
	ctx := context.Background()

	// Something of the node's own that a pod could reach: a listener on the
	// node's address.
	l, err := net.Listen("tcp", net.JoinHostPort(c.NodeIP(), "0"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			conn.Close()
		}
	}()

	// kube-router lets every pod reach the node's addresses on the
	// NodePort range whatever the policy; a listener there is the node too.
	nodePort := listenInRange(t, c.NodeIP(), 30100, 32767)

	allowedIP := runPod(t, c, ns, probePod("allowed", c.ProbeImage(), "", map[string]string{"role": "allowed"}))
	otherIP := runPod(t, c, ns, probePod("other", c.ProbeImage(), "", map[string]string{"role": "other"}))
	clientIP := runPod(t, c, ns, probePod("client", c.ProbeImage(), runtimeClass, map[string]string{"role": "client"}))

	// The node is also at its address on the pods' bridge, there once a pod
	// runs.
	gateway := listenInRange(t, c.PodGateway(), 40000, 40100)

	apiHost, apiPort, err := net.SplitHostPort(strings.TrimPrefix(c.REST.Host, "https://"))
	if err != nil {
		t.Fatal(err)
	}
	allowed := net.JoinHostPort(allowedIP, "8080")
	denied := map[string]string{
		"another pod":                  net.JoinHostPort(otherIP, "8080"),
		"the API server's service":     c.APIServiceAddr(),
		"the API server on the node":   net.JoinHostPort(apiHost, apiPort),
		"the node":                     l.Addr().String(),
		"the node on a NodePort":       nodePort,
		"the node on the pods' bridge": gateway,
	}
	dial := func(addr string) error {
		_, err := get("http://" + clientIP + ":8080/dial?addr=" + url.QueryEscape(addr))
		return err
	}
	// Without a policy every destination answers: the test can fail. The
	// API server's service answers once kube-proxy has written its rules,
	// which on a loaded node can come after the pods run (a new machine's
	// rehearsal dialled it too soon): wait for each, bounded.
	if err := dial(allowed); err != nil {
		t.Fatalf("without a policy, the allowed pod: %v", err)
	}
	for what, addr := range denied {
		pollDiag(t, 2*time.Minute, "without a policy, "+what+" ("+addr+") to answer, so the policy's effect can show", func() (bool, string) {
			if err := dial(addr); err != nil {
				return false, err.Error()
			}
			return true, ""
		}, func() string { return dialAll(dial, allowed, denied) + c.NetDiag(ctx, clientIP) })
	}

	port := intstr.FromInt32(8080)
	tcp := corev1.ProtocolTCP
	policy := &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "only-allowed"},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"role": "client"}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress},
			Egress: []networkingv1.NetworkPolicyEgressRule{{
				To:    []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"role": "allowed"}}}},
				Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: &port}},
			}},
		},
	}
	if _, err := c.Client().NetworkingV1().NetworkPolicies(ns).Create(ctx, policy, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The controller applies the policy asynchronously: wait until it shows,
	// then every denied destination must stay denied.
	start := time.Now()
	poll(t, 2*time.Minute, "the policy to take effect", func() (bool, string) {
		err := dial(denied["another pod"])
		return err != nil, "another pod still reachable"
	})
	t.Logf("policy enforced %s after its creation", time.Since(start).Round(time.Millisecond))
	for what, addr := range denied {
		if err := dial(addr); err == nil {
			t.Errorf("with the policy, the pod reaches %s (%s)", what, addr)
		}
	}
	if err := dial(allowed); err != nil {
		t.Errorf("with the policy, the allowed pod: %v", err)
	}
}

// dialAll says, for a failure's report, which destinations the client
// reaches now: one that does not answer alone points at its own path (a
// service's translation), all of them at the pod's.
func dialAll(dial func(string) error, allowed string, denied map[string]string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "the client dials, now:\n  the allowed pod (%s): %v\n", allowed, dial(allowed))
	names := make([]string, 0, len(denied))
	for what := range denied {
		names = append(names, what)
	}
	sort.Strings(names)
	for _, what := range names {
		fmt.Fprintf(&b, "  %s (%s): %v\n", what, denied[what], dial(denied[what]))
	}
	return b.String()
}

// listenInRange listens on the first free port of [lo, hi] at ip, accepting
// and closing connections until the test ends, and returns its address.
func listenInRange(t *testing.T, ip string, lo, hi int) string {
	t.Helper()
	for p := lo; p <= hi; p++ {
		l, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(p)))
		if err != nil {
			continue
		}
		t.Cleanup(func() { l.Close() })
		go func() {
			for {
				conn, err := l.Accept()
				if err != nil {
					return
				}
				conn.Close()
			}
		}()
		return l.Addr().String()
	}
	t.Fatalf("no free port in %d-%d on %s", lo, hi, ip)
	return ""
}
