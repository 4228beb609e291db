package k8s

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/image/debian/debiantest"
	"github.com/sandlot/sandlot/image/podimage"
	"github.com/sandlot/sandlot/internal/kubetest"
	"github.com/sandlot/sandlot/internal/testenv"
	"github.com/sandlot/sandlot/network/policy"
	"github.com/sandlot/sandlot/provider/kubernetes"
)

var pod struct {
	once sync.Once
	ref  string
	err  error
}

// defaultPodImage pushes the default template's pod image (the Debian
// base plus the static agent, image/podimage) to the cluster's registry,
// once per test binary, and returns its pinned reference.
func defaultPodImage(t *testing.T, c *kubetest.Cluster) string {
	t.Helper()
	store, img := debiantest.Default(t)
	agentBin, err := os.ReadFile(testenv.PodAgentBinary(t))
	if err != nil {
		t.Fatal(err)
	}
	pod.once.Do(func() {
		ctx := context.Background()
		base, err := store.V1(ctx, img.Digest)
		if err != nil {
			pod.err = err
			return
		}
		pi, err := podimage.Build(ctx, base, agentBin)
		if err != nil {
			pod.err = err
			return
		}
		pinned, err := podimage.Push(ctx, pi, c.Registry+"/sandlot/default:e2e", nil)
		pod.ref, pod.err = pinned.String(), err
	})
	if pod.err != nil {
		t.Fatalf("the default pod image: %v", pod.err)
	}
	return pod.ref
}

// sandboxObjects counts the objects a sandbox makes in ns: claims,
// Sandboxes, pods and key Secrets (not the template's pool key), and the
// warm pool's own sandboxes apart.
func sandboxObjects(t *testing.T, c *kubetest.Cluster, ns string) map[string]int {
	t.Helper()
	ctx := context.Background()
	m := map[string]int{}
	for _, r := range []struct {
		gvr schema.GroupVersionResource
		sel string
	}{
		{claims, ""},
		{sandboxes, "!agents.x-k8s.io/warm-pool-sandbox"},
		{schema.GroupVersionResource{Version: "v1", Resource: "secrets"}, "sandlot.dev/sandbox"},
	} {
		l, err := c.Dynamic().Resource(r.gvr).Namespace(ns).List(ctx, metav1.ListOptions{LabelSelector: r.sel})
		if err != nil {
			t.Fatal(err)
		}
		m[r.gvr.Resource] = len(l.Items)
	}
	return m
}

// TestProvider: the kubernetes provider on the real cluster, under gVisor,
// with the default template's pod image. A warm claim (once the pool is
// ready) and a cold sandbox (limits of its own) each run code with state
// kept between calls, write and read files, are attached by a second
// provider (another replica), and are killed with nothing of theirs left.
func TestProvider(t *testing.T) {
	testenv.Require(t, os.Geteuid() == 0, "root (the test cluster)")
	c := kubetest.Shared(t)
	ref := defaultPodImage(t, c)
	ns := namespace(t, c, "provider")
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	cfg := kubernetes.Config{
		Client:       c.Dynamic(),
		Namespace:    ns,
		RuntimeClass: "gvisor",
		Templates:    map[string]kubernetes.Template{"default": {Image: ref, Pool: 1}},
		ReadyTimeout: 5 * time.Minute,
	}
	p, err := kubernetes.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	other, err := kubernetes.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	before := sandboxObjects(t, c, ns)

	// The first create makes the template and its pool; its claim may be
	// served cold from the template while the pool fills.
	first, err := p.Create(ctx, contexts.Spec{Template: "default"})
	if err != nil {
		t.Fatalf("first create: %v", err)
	}
	poll(t, 5*time.Minute, "the warm pool ready", func() (bool, string) {
		u, err := c.Dynamic().Resource(warmPools).Namespace(ns).Get(ctx, "sandlot-default", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		ready, _, _ := unstructured.NestedInt64(u.Object, "status", "readyReplicas")
		return ready >= 1, fmt.Sprintf("status %v", u.Object["status"])
	})

	for _, tc := range []struct {
		name   string
		limits contexts.Limits
		warm   bool
	}{
		{name: "warm claim", warm: true},
		{name: "cold", limits: contexts.Limits{MemoryBytes: 1 << 30}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			sb, err := p.Create(ctx, contexts.Spec{Template: "default", Limits: tc.limits,
				Env: map[string]string{"GREETING": "hello from " + tc.name}})
			if err != nil {
				t.Fatalf("create: %v", err)
			}
			t.Logf("%s: create to connected agent in %s", tc.name, time.Since(start).Round(time.Millisecond))
			id := sb.ID()
			if tc.warm {
				cl, err := c.Dynamic().Resource(claims).Namespace(ns).Get(ctx, id, metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if name, _, _ := unstructured.NestedString(cl.Object, "status", "sandbox", "name"); name == id {
					t.Errorf("the claim was served cold (sandbox %s), want one of the warm pool's", name)
				}
			}
			r, err := sb.RunCode(ctx, agent.RunCodeParams{Language: "python", Code: "import os\nx = 41\nprint(os.environ['GREETING'])"}, nil)
			if err != nil || r.Error != nil {
				t.Fatalf("run code: %+v, %v", r, err)
			}
			if got := strings.TrimSpace(r.Stdout); got != "hello from "+tc.name {
				t.Errorf("output %q, want the context's env", got)
			}
			if _, err := sb.WriteFile(ctx, agent.WriteParams{Path: "notes.txt", Data: []byte("kept")}); err != nil {
				t.Fatalf("write: %v", err)
			}
			sb.Close()

			// Another replica attaches by id: the kernel's state and the
			// file are there.
			sb2, err := other.Attach(ctx, id)
			if err != nil {
				t.Fatalf("attach: %v", err)
			}
			r, err = sb2.RunCode(ctx, agent.RunCodeParams{Language: "python", Code: "print(x + 1)"}, nil)
			if err != nil || r.Error != nil || strings.TrimSpace(r.Stdout) != "42" {
				t.Fatalf("state kept: %+v, %v", r, err)
			}
			f, err := sb2.ReadFile(ctx, agent.ReadParams{Path: "notes.txt"})
			if err != nil || string(f.Data) != "kept" {
				t.Fatalf("read: %+v, %v", f, err)
			}
			sb2.Close()

			if err := other.Destroy(ctx, id); err != nil {
				t.Fatalf("destroy: %v", err)
			}
			if _, err := p.Attach(ctx, id); !errors.Is(err, errdefs.ErrNotFound) {
				t.Errorf("attach after destroy: %v, want not_found", err)
			}
		})
	}
	first.Close()
	if err := p.Destroy(ctx, first.ID()); err != nil {
		t.Fatal(err)
	}
	poll(t, 3*time.Minute, "every sandbox's objects gone", func() (bool, string) {
		got := sandboxObjects(t, c, ns)
		return fmt.Sprint(got) == fmt.Sprint(before), fmt.Sprintf("%v, before %v", got, before)
	})
	ids, err := p.List(ctx)
	if err != nil || len(ids) != 0 {
		t.Errorf("list after destroy: %v, %v", ids, err)
	}
}

// TestProviderFaults: on the real cluster, a sandbox that no node can hold
// fails at once as resource_exhausted naming the capacity, and a sandbox
// whose pod is deleted (agent-sandbox makes a new one, without the state)
// is lost: Attach answers not_found. Nothing is left of either.
func TestProviderFaults(t *testing.T) {
	testenv.Require(t, os.Geteuid() == 0, "root (the test cluster)")
	c := kubetest.Shared(t)
	ref := defaultPodImage(t, c)
	ns := namespace(t, c, "faults")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	p, err := kubernetes.New(kubernetes.Config{
		Client:       c.Dynamic(),
		Namespace:    ns,
		RuntimeClass: "gvisor",
		Templates:    map[string]kubernetes.Template{"default": {Image: ref}},
		ReadyTimeout: 5 * time.Minute,
	})
	if err != nil {
		t.Fatal(err)
	}
	before := sandboxObjects(t, c, ns)

	t.Run("out of capacity", func(t *testing.T) {
		start := time.Now()
		_, err := p.Create(ctx, contexts.Spec{Template: "default", Limits: contexts.Limits{MemoryBytes: 1 << 40}})
		if !errors.Is(err, errdefs.ErrResourceExhausted) || !strings.Contains(err.Error(), "out of capacity") {
			t.Fatalf("create of 1 TiB: %v, want resource_exhausted naming the capacity", err)
		}
		t.Logf("refused in %s: %v", time.Since(start).Round(time.Millisecond), err)
	})

	t.Run("pod deleted", func(t *testing.T) {
		sb, err := p.Create(ctx, contexts.Spec{Template: "default"})
		if err != nil {
			t.Fatal(err)
		}
		sb.Close()
		sbObj, err := c.Dynamic().Resource(sandboxes).Namespace(ns).Get(ctx, sb.ID(), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		podName := sbObj.GetAnnotations()["agents.x-k8s.io/pod-name"]
		if podName == "" {
			podName = sb.ID()
		}
		if err := c.Client().CoreV1().Pods(ns).Delete(ctx, podName, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		poll(t, 3*time.Minute, "the sandbox reported lost", func() (bool, string) {
			_, err := p.Attach(ctx, sb.ID())
			return errors.Is(err, errdefs.ErrNotFound), fmt.Sprint(err)
		})
		if err := p.Destroy(ctx, sb.ID()); err != nil {
			t.Fatal(err)
		}
	})
	poll(t, 3*time.Minute, "every sandbox's objects gone", func() (bool, string) {
		got := sandboxObjects(t, c, ns)
		return fmt.Sprint(got) == fmt.Sprint(before), fmt.Sprintf("%v, before %v", got, before)
	})
}

// TestProviderNetworkPolicy: the provider's NetworkPolicy, enforced for
// real (kube-router): a sandbox pod reaches sandlot's pods on the egress
// proxy's port and nothing else (not another pod, not the API server, not
// the node), and only sandlot's pods reach it. Each denial is checked
// beside an allowed path that works, so the test fails when the policy
// blocks everything or nothing.
func TestProviderNetworkPolicy(t *testing.T) {
	testenv.Require(t, os.Geteuid() == 0, "root (the test cluster)")
	c := kubetest.Shared(t)
	ref := defaultPodImage(t, c)
	ns := namespace(t, c, "netpol-provider")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	// sandlot's pods (the label the policy names) and another pod, both
	// serving on 8080; the "proxy" is sandlot's pod on 8080.
	sandlotIP := runPod(t, c, ns, probePod("sandlot", c.ProbeImage(), "", map[string]string{"app.kubernetes.io/name": "sandlot"}))
	otherIP := runPod(t, c, ns, probePod("other", c.ProbeImage(), "", map[string]string{"app": "other"}))
	p, err := kubernetes.New(kubernetes.Config{
		Client:       c.Dynamic(),
		Namespace:    ns,
		RuntimeClass: "gvisor",
		Templates:    map[string]kubernetes.Template{"default": {Image: ref}},
		EgressProxy:  sandlotIP + ":8080",
		ReadyTimeout: 5 * time.Minute,
	})
	if err != nil {
		t.Fatal(err)
	}
	// Given the proxy (mode open): a pod of mode none reaches nothing at
	// all (TestModeNoneReachesNothing).
	sb, err := p.Create(ctx, contexts.Spec{Template: "default", Network: &policy.Policy{Mode: policy.Open}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		sb.Close()
		p.Destroy(context.Background(), sb.ID())
	}()
	sbObj, err := c.Dynamic().Resource(sandboxes).Namespace(ns).Get(ctx, sb.ID(), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ips, _, _ := unstructured.NestedStringSlice(sbObj.Object, "status", "podIPs")
	if len(ips) == 0 {
		t.Fatal("the sandbox has no pod IP")
	}
	agentAddr := ips[0] + ":49983"

	// dialFrom connects from inside the sandbox.
	dialFrom := func(addr string) error {
		r, err := sb.Exec(ctx, agent.ExecParams{Argv: []string{"python3", "-c",
			"import socket,sys; socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=2)", strings.Split(addr, ":")[0], strings.Split(addr, ":")[1]}}, nil)
		if err != nil {
			return err
		}
		if r.ExitCode != 0 {
			return fmt.Errorf("exit %d: %s", r.ExitCode, strings.TrimSpace(r.Stderr))
		}
		return nil
	}
	// dialVia connects from a probe pod.
	dialVia := func(probeIP, addr string) error {
		_, err := get("http://" + probeIP + ":8080/dial?addr=" + addr)
		return err
	}
	denied := func(what string, dial func() error) {
		t.Helper()
		poll(t, time.Minute, what+" denied", func() (bool, string) {
			err := dial()
			return err != nil, "connected"
		})
	}
	allowed := func(what string, dial func() error) {
		t.Helper()
		poll(t, time.Minute, what+" allowed", func() (bool, string) {
			err := dial()
			return err == nil, fmt.Sprint(err)
		})
	}
	// Out of the sandbox.
	allowed("sandbox -> sandlot's proxy port", func() error { return dialFrom(sandlotIP + ":8080") })
	denied("sandbox -> another pod", func() error { return dialFrom(otherIP + ":8080") })
	denied("sandbox -> the API server's service", func() error { return dialFrom(c.APIServiceAddr()) })
	node, err := net.Listen("tcp", net.JoinHostPort(c.NodeIP(), "0"))
	if err != nil {
		t.Fatal(err)
	}
	defer node.Close()
	go func() {
		for {
			conn, err := node.Accept()
			if err != nil {
				return
			}
			conn.Close()
		}
	}()
	denied("sandbox -> a listener on the node", func() error { return dialFrom(node.Addr().String()) })
	denied("sandbox -> the API server on the node", func() error {
		return dialFrom(strings.TrimPrefix(c.REST.Host, "https://"))
	})
	// Into the sandbox.
	allowed("sandlot's pod -> the agent", func() error { return dialVia(sandlotIP, agentAddr) })
	denied("another pod -> the agent", func() error { return dialVia(otherIP, agentAddr) })
}
