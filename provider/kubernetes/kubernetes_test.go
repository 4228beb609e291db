package kubernetes

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/errdefs"
)

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// perSandbox are the kinds a sandbox makes; each must be back to its count
// before the sandbox once it is destroyed.
var perSandbox = []schema.GroupVersionResource{gvrClaim, gvrSandbox, gvrSecret, gvrPod}

// counts counts claims, Sandboxes, pods, and the Secrets other than the
// templates' pool keys (made once per template, kept across sandboxes).
func (c *cluster) counts() map[string]int {
	m := map[string]int{}
	for _, g := range perSandbox {
		m[g.Resource] = c.count(g)
	}
	pools, err := c.res(gvrSecret).List(context.Background(), metav1.ListOptions{LabelSelector: "!" + labelSandbox})
	if err != nil {
		c.t.Fatal(err)
	}
	m["secrets"] -= len(pools.Items)
	return m
}

// TestCreate: a create on a pooled template is a claim, on an unpooled one
// (or with limits of its own) a cold Sandbox; either way the pod's agent
// is enrolled with the context's environment and runs code, another
// replica attaches by id, and Destroy leaves none of the sandbox's
// objects.
func TestCreate(t *testing.T) {
	tests := []struct {
		name   string
		pool   int
		empty  bool
		limits contexts.Limits
		warm   bool
		// pods named as their Sandbox, read beside it; else named
		// apart, read once the Sandbox names them
		sameName bool
	}{
		{name: "warm claim", pool: 2, warm: true},
		{name: "warm claim, pod named as its Sandbox", pool: 2, warm: true, sameName: true},
		{name: "no pool: cold", pool: 0},
		{name: "pool empty: cold", pool: 2, empty: true},
		{name: "limits of its own: cold", pool: 2, limits: contexts.Limits{MemoryBytes: 3 << 30}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testCtx(t)
			c := newCluster(t)
			c.mu.Lock()
			c.poolEmpty = tc.empty
			c.sameName = tc.sameName
			c.mu.Unlock()
			cfg := Config{Templates: map[string]Template{"python": {Pool: tc.pool}}}
			p := c.provider(t, cfg)
			if tc.pool > 0 && !tc.empty {
				c.prepare(t, p)
			}
			before := c.counts()
			sb, err := p.Create(ctx, contexts.Spec{
				Template: "python", Limits: tc.limits,
				Env:    map[string]string{"GREETING": "from the context"},
				Labels: map[string]string{contexts.LabelTenant: "acme@example.com", contexts.LabelContext: "ctx-1"},
			})
			if err != nil {
				t.Fatalf("create: %v", err)
			}
			defer sb.Close()
			id := sb.ID()
			r, err := sb.Exec(ctx, agent.ExecParams{Shell: "echo $GREETING"}, nil)
			if err != nil || strings.TrimSpace(r.Stdout) != "from the context" {
				t.Fatalf("exec: %+v, %v", r, err)
			}
			_, claimErr := c.res(gvrClaim).Get(ctx, id, metav1.GetOptions{})
			if (claimErr == nil) != tc.warm {
				t.Errorf("claim %s: %v, want one: %v", id, claimErr, tc.warm)
			}
			if !tc.warm {
				cold, err := c.res(gvrSandbox).Get(ctx, id, metav1.GetOptions{})
				if err != nil {
					t.Fatalf("cold sandbox: %v", err)
				}
				if a := cold.GetAnnotations()[contexts.LabelTenant]; a != "acme@example.com" {
					t.Errorf("tenant annotation %q", a)
				}
			}

			// Another replica: a provider of its own on the same cluster.
			other := c.provider(t, cfg)
			ids, err := other.List(ctx)
			if err != nil || !cmp.Equal(ids, []string{id}) {
				t.Errorf("list: %v, %v; want [%s]", ids, err, id)
			}
			sb2, err := other.Attach(ctx, id)
			if err != nil {
				t.Fatalf("attach from another replica: %v", err)
			}
			r, err = sb2.Exec(ctx, agent.ExecParams{Shell: "echo $GREETING"}, nil)
			sb2.Close()
			if err != nil || strings.TrimSpace(r.Stdout) != "from the context" {
				t.Fatalf("exec after attach: %+v, %v", r, err)
			}

			if err := p.Destroy(ctx, id); err != nil {
				t.Fatalf("destroy: %v", err)
			}
			// The fake has no kubelet to remove pods with their Sandbox:
			// drop the pod as the garbage collector would.
			c.dropPods(ctx, t)
			if diff := cmp.Diff(before, c.counts()); diff != "" {
				t.Errorf("objects left after destroy (-before +after):\n%s", diff)
			}
			if err := p.Destroy(ctx, id); err != nil {
				t.Errorf("destroy again: %v", err)
			}
			if _, err := other.Attach(ctx, id); !errors.Is(err, errdefs.ErrNotFound) {
				t.Errorf("attach after destroy: %v, want not_found", err)
			}
		})
	}
}

// dropPods deletes the pods whose Sandbox is gone.
func (c *cluster) dropPods(ctx context.Context, t *testing.T) {
	pods, _ := c.res(gvrPod).List(ctx, metav1.ListOptions{})
	for _, pod := range pods.Items {
		sb := strings.TrimSuffix(pod.GetName(), "-pod")
		if _, err := c.res(gvrSandbox).Get(ctx, sb, metav1.GetOptions{}); err != nil {
			c.res(gvrPod).Delete(ctx, pod.GetName(), metav1.DeleteOptions{})
		}
	}
}

// TestAPIServerUnreachable: with no API server to answer, create, list,
// attach and destroy fail as unavailable (503 at the edge), at once.
func TestAPIServerUnreachable(t *testing.T) {
	client, err := dynamic.NewForConfig(&rest.Config{Host: "http://127.0.0.1:1", Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	p, err := New(Config{Client: client, Registry: "registry.test/sandlot", Templates: map[string]Template{"python": {Pool: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	_, cerr := p.Create(ctx, contexts.Spec{Template: "python"})
	_, lerr := p.List(ctx)
	_, aerr := p.Attach(ctx, "k8s-000000000001")
	derr := p.Destroy(ctx, "k8s-000000000001")
	for name, err := range map[string]error{"create": cerr, "list": lerr, "attach": aerr, "destroy": derr} {
		if !errors.Is(err, errdefs.ErrUnavailable) {
			t.Errorf("%s: %v, want unavailable", name, err)
		}
	}
}

// TestUnschedulable: a cluster out of capacity fails the create at once
// with resource_exhausted naming it, and leaves nothing behind.
func TestUnschedulable(t *testing.T) {
	for _, pool := range []int{0, 1} {
		t.Run("pool "+string(rune('0'+pool)), func(t *testing.T) {
			ctx := testCtx(t)
			c := newCluster(t)
			c.mu.Lock()
			c.unscheduled = true
			c.mu.Unlock()
			p := c.provider(t, Config{Templates: map[string]Template{"python": {Pool: pool}}})
			before := c.counts()
			_, err := p.Create(ctx, contexts.Spec{Template: "python"})
			if !errors.Is(err, errdefs.ErrResourceExhausted) || !strings.Contains(err.Error(), "out of capacity") {
				t.Fatalf("create: %v, want resource_exhausted naming the capacity", err)
			}
			if diff := cmp.Diff(before, c.counts()); diff != "" {
				t.Errorf("objects left after a failed create (-before +after):\n%s", diff)
			}
		})
	}
}

// TestNotBound: a claim that is never bound fails the create with
// deadline_exceeded once ReadyTimeout passes, and leaves nothing.
func TestNotBound(t *testing.T) {
	ctx := testCtx(t)
	c := newCluster(t)
	c.mu.Lock()
	c.stall = true
	c.mu.Unlock()
	p := c.provider(t, Config{Templates: map[string]Template{"python": {Pool: 1}}, ReadyTimeout: 300 * time.Millisecond})
	c.prepare(t, p)
	before := c.counts()
	_, err := p.Create(ctx, contexts.Spec{Template: "python"})
	if !errors.Is(err, errdefs.ErrDeadlineExceeded) || !strings.Contains(err.Error(), "not bound") {
		t.Fatalf("create: %v, want deadline_exceeded saying the claim is not bound", err)
	}
	if diff := cmp.Diff(before, c.counts()); diff != "" {
		t.Errorf("objects left after a failed create (-before +after):\n%s", diff)
	}
}

// TestLost: a sandbox whose pod was evicted, replaced by another pod (the
// controller remade it: none of the state is there), or whose node is
// gone, is not attached but reported not_found, which the manager takes
// as a lost sandbox (contexts/lost.go).
func TestLost(t *testing.T) {
	tests := []struct {
		name  string
		fault func(ctx context.Context, c *cluster, pod *unstructured.Unstructured)
	}{
		{name: "evicted", fault: func(ctx context.Context, c *cluster, pod *unstructured.Unstructured) {
			unstructured.SetNestedField(pod.Object, "Failed", "status", "phase")
			unstructured.SetNestedField(pod.Object, "Evicted", "status", "reason")
			c.res(gvrPod).Update(ctx, pod, metav1.UpdateOptions{})
		}},
		{name: "pod replaced", fault: func(ctx context.Context, c *cluster, pod *unstructured.Unstructured) {
			ip, _, _ := unstructured.NestedString(pod.Object, "status", "podIP")
			c.makePod(ctx, pod.GetName(), ip, "node-1")
		}},
		{name: "pod gone", fault: func(ctx context.Context, c *cluster, pod *unstructured.Unstructured) {
			c.res(gvrPod).Delete(ctx, pod.GetName(), metav1.DeleteOptions{})
		}},
		{name: "node gone", fault: func(ctx context.Context, c *cluster, pod *unstructured.Unstructured) {
			c.res(gvrNode).Delete(ctx, "node-1", metav1.DeleteOptions{})
		}},
	}
	for _, tc := range tests {
		for _, pool := range []int{0, 1} {
			t.Run(tc.name+map[int]string{0: " cold", 1: " warm"}[pool], func(t *testing.T) {
				ctx := testCtx(t)
				c := newCluster(t)
				p := c.provider(t, Config{Templates: map[string]Template{"python": {Pool: pool}}})
				if pool > 0 {
					c.prepare(t, p)
				}
				sb, err := p.Create(ctx, contexts.Spec{Template: "python"})
				if err != nil {
					t.Fatal(err)
				}
				sb.Close()
				tc.fault(ctx, c, c.podOfSandbox(t, sb.ID()))
				if _, err := p.Attach(ctx, sb.ID()); !errors.Is(err, errdefs.ErrNotFound) {
					t.Fatalf("attach: %v, want not_found (lost)", err)
				}
				if err := p.Destroy(ctx, sb.ID()); err != nil {
					t.Fatal(err)
				}
			})
		}
	}
}

// TestNotSupported: pause, resume and usage answer NotSupported, and
// Capabilities says so (it has shared alone: any replica reaches a pod).
func TestNotSupported(t *testing.T) {
	c := newCluster(t)
	p := c.provider(t, Config{})
	if p.Capabilities() != contexts.CapShared {
		t.Errorf("capabilities %s, want shared only", p.Capabilities())
	}
	ctx := testCtx(t)
	_, uerr := p.Usage(ctx, "k8s-000000000001")
	for name, err := range map[string]error{"pause": p.Pause(ctx, "k8s-000000000001"), "resume": p.Resume(ctx, "k8s-000000000001"), "usage": uerr} {
		if !errors.Is(err, contexts.ErrNotSupported) {
			t.Errorf("%s: %v, want NotSupported", name, err)
		}
	}
}

// TestBadInput: names that cannot name objects are refused up front.
func TestBadInput(t *testing.T) {
	c := newCluster(t)
	p := c.provider(t, Config{})
	ctx := testCtx(t)
	for _, tmpl := range []string{"Python", "a/b", "../x", strings.Repeat("a", 60)} {
		if _, err := p.Create(ctx, contexts.Spec{Template: tmpl}); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("template %q: %v, want invalid_argument", tmpl, err)
		}
	}
	for _, name := range []string{"my-var", "A=B", "", "1X"} {
		if _, err := p.Create(ctx, contexts.Spec{Template: "python", Env: map[string]string{name: "v"}}); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("env %q: %v, want invalid_argument", name, err)
		}
	}
	if c.count(gvrSecret) != 0 {
		t.Error("a refused create made objects")
	}
	for _, id := range []string{"sb-000000000001", "k8s-../x", "k8s-ABC", ""} {
		if _, err := p.Attach(ctx, id); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("attach %q: %v, want invalid_argument", id, err)
		}
		if err := p.Destroy(ctx, id); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("destroy %q: %v, want invalid_argument", id, err)
		}
	}
	if _, err := New(Config{Client: c.client, RuntimeClass: "runc"}); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("runtime class runc: %v, want invalid_argument", err)
	}
}

// TestImpostorPod: whatever answers at the pod's address without the key
// its pod mounts (another pod that got the address, a forged status) is
// not enrolled and not used: the create fails as permission_denied and
// leaves nothing.
func TestImpostorPod(t *testing.T) {
	for _, pool := range []int{0, 1} {
		t.Run(map[int]string{0: "cold", 1: "warm"}[pool], func(t *testing.T) {
			ctx := testCtx(t)
			c := newCluster(t)
			c.mu.Lock()
			c.impostor = true
			c.mu.Unlock()
			p := c.provider(t, Config{Templates: map[string]Template{"python": {Pool: pool}}})
			if pool > 0 {
				c.prepare(t, p)
			}
			before := c.counts()
			sb, err := p.Create(ctx, contexts.Spec{Template: "python", Env: map[string]string{"TOKEN": "for the real pod only"}})
			if err == nil {
				sb.Close()
				t.Fatal("the provider enrolled an impostor")
			}
			if !errors.Is(err, errdefs.ErrPermissionDenied) {
				t.Errorf("create: %v, want permission_denied", err)
			}
			c.dropPods(ctx, t)
			if diff := cmp.Diff(before, c.counts()); diff != "" {
				t.Errorf("objects left (-before +after):\n%s", diff)
			}
		})
	}
}

// TestListLeavesCreatesAlone: every replica lists every sandbox, and the
// manager's sweep destroys the ones no record names; a sandbox whose
// objects are younger than the create bound may be another replica's
// create in progress (its record not yet written), so List leaves it out
// until then.
func TestListLeavesCreatesAlone(t *testing.T) {
	ctx := testCtx(t)
	c := newCluster(t)
	p := c.provider(t, Config{ReadyTimeout: time.Minute})
	sb, err := p.Create(ctx, contexts.Spec{Template: "python"})
	if err != nil {
		t.Fatal(err)
	}
	sb.Close()
	ids, err := p.List(ctx)
	if err != nil || !cmp.Equal(ids, []string{sb.ID()}) {
		t.Fatalf("list: %v, %v; want [%s] (the fake sets no creation time: old)", ids, err, sb.ID())
	}
	s, err := c.res(gvrSecret).Get(ctx, sb.ID(), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s.SetCreationTimestamp(metav1.Now())
	if _, err := c.res(gvrSecret).Update(ctx, s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if ids, err := p.List(ctx); err != nil || len(ids) != 0 {
		t.Fatalf("list with a secret made just now: %v, %v; want none", ids, err)
	}
	s.SetCreationTimestamp(metav1.NewTime(time.Now().Add(-2 * time.Minute)))
	if _, err := c.res(gvrSecret).Update(ctx, s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if ids, err := p.List(ctx); err != nil || !cmp.Equal(ids, []string{sb.ID()}) {
		t.Fatalf("list once the create bound passed: %v, %v; want [%s]", ids, err, sb.ID())
	}
}

// TestTemplateUpdated: a provider with another configuration (a new pool
// size, image or proxy) brings the template, pool and policy that exist to
// it at its first create, and keeps the pool key the warm pods hold.
func TestTemplateUpdated(t *testing.T) {
	ctx := testCtx(t)
	c := newCluster(t)
	a := c.provider(t, Config{Templates: map[string]Template{"python": {Pool: 2}}})
	c.prepare(t, a)
	sb, err := a.Create(ctx, contexts.Spec{Template: "python"})
	if err != nil {
		t.Fatal(err)
	}
	sb.Close()
	key := func() string {
		s, err := c.res(gvrSecret).Get(ctx, "sandlot-python-pool", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		v, _, _ := unstructured.NestedString(s.Object, "data", secretKey)
		return v
	}
	before := key()
	b := c.provider(t, Config{Templates: map[string]Template{"python": {Pool: 5, Image: "registry.test/py:2"}}, EgressProxy: "proxy:3128"})
	sb, err = b.Create(ctx, contexts.Spec{Template: "python"})
	if err != nil {
		t.Fatal(err)
	}
	sb.Close()
	pool, _ := c.res(gvrWarmPool).Get(ctx, "sandlot-python", metav1.GetOptions{})
	tmpl, _ := c.res(gvrTemplate).Get(ctx, "sandlot-python", metav1.GetOptions{})
	np, _ := c.res(gvrNetworkPolicy).Get(ctx, networkName, metav1.GetOptions{})
	for _, ck := range []check{
		{"pool", pool.Object, "spec.replicas", int64(5)},
		{"template", tmpl.Object, "spec.podTemplate.spec.containers.0.image", "registry.test/py:2"},
		{"policy", np.Object, "spec.egress.0.ports.0.port", int64(3128)},
	} {
		if diff := cmp.Diff(ck.want, field(ck.obj, ck.path)); diff != "" {
			t.Errorf("%s: %s (-want +got):\n%s", ck.name, ck.path, diff)
		}
	}
	if key() != before {
		t.Error("the pool key was replaced: the warm pods would no longer enroll")
	}
}
