package kubernetes

import (
	"context"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	dynfake "k8s.io/client-go/dynamic/fake"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/internal/testenv"
)

// eventually waits, bounded, for cond.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testenv.WaitFor(t, what, 10*time.Second, cond)
}

// TestObjCacheBoundPod: the copy answers a Sandbox's pod (by the pod
// name agent-sandbox's annotation gives) once it is Ready with an
// address, and nothing for a pod that is not Ready, has ended, is not a
// sandbox pod, or whose Sandbox it does not hold.
func TestObjCacheBoundPod(t *testing.T) {
	ctx := testCtx(t)
	// The client alone: no stand-in for agent-sandbox starts pods here.
	c := &cluster{t: t, ns: "sandlot-test", port: 1, client: dynfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), ListKinds)}
	p := c.provider(t, Config{})
	sb := obj("agents.x-k8s.io/v1beta1", "Sandbox", c.ns, "warm-1", nil)
	sb.SetAnnotations(map[string]string{annPodName: "warm-1-abcde"})
	if _, err := c.res(gvrSandbox).Create(ctx, sb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := obj("v1", "Pod", c.ns, "warm-1-abcde", map[string]string{labelRole: roleSandbox})
	pod.SetUID(types.UID("uid-cached"))
	unstructured.SetNestedField(pod.Object, "10.1.2.3", "status", "podIP")
	unstructured.SetNestedField(pod.Object, "Running", "status", "phase")
	setCondition(pod, "Ready", "False", "", "")
	if _, err := c.res(gvrPod).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	o := p.startCache()
	eventually(t, "the copy filled", func() bool { return o.pods.HasSynced() && o.sandboxes.HasSynced() })
	if _, ok := o.boundPod("warm-1"); ok {
		t.Fatal("a pod that is not Ready was answered")
	}
	setCondition(pod, "Ready", "True", "", "")
	if _, err := c.res(gvrPod).Update(ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	var got podRef
	eventually(t, "the Ready pod answered", func() bool {
		var ok bool
		got, ok = o.boundPod("warm-1")
		return ok
	})
	if got.name != "warm-1-abcde" || got.uid != "uid-cached" || got.ip != "10.1.2.3" {
		t.Errorf("pod %+v, want warm-1-abcde, uid-cached, 10.1.2.3", got)
	}
	if _, ok := o.boundPod("warm-2"); ok {
		t.Error("a Sandbox the copy does not hold was answered")
	}
	now := metav1.Now()
	pod.SetDeletionTimestamp(&now)
	if _, err := c.res(gvrPod).Update(ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "an ending pod no longer answered", func() bool { _, ok := o.boundPod("warm-1"); return !ok })

	// A pod without sandlot's role label is not watched at all.
	other := obj("agents.x-k8s.io/v1beta1", "Sandbox", c.ns, "warm-3", nil)
	if _, err := c.res(gvrSandbox).Create(ctx, other, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	stranger := obj("v1", "Pod", c.ns, "warm-3", map[string]string{"app": "other"})
	unstructured.SetNestedField(stranger.Object, "10.1.2.4", "status", "podIP")
	setCondition(stranger, "Ready", "True", "", "")
	if _, err := c.res(gvrPod).Create(ctx, stranger, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// client-go's fake does not filter a watch by its label selector, so
	// the stranger reaches the copy: the copy's own check must refuse it.
	eventually(t, "the second Sandbox and its pod held", func() bool {
		_, sok := o.get(o.sandboxes, "warm-3")
		_, pok := o.get(o.pods, "warm-3")
		return sok && pok
	})
	if _, ok := o.boundPod("warm-3"); ok {
		t.Error("a pod without the sandbox role label was answered")
	}

	// A copy no longer kept (the provider closed) answers nothing.
	fresh := obj("agents.x-k8s.io/v1beta1", "Sandbox", c.ns, "warm-4", nil)
	if _, err := c.res(gvrSandbox).Create(ctx, fresh, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ready := obj("v1", "Pod", c.ns, "warm-4", map[string]string{labelRole: roleSandbox})
	unstructured.SetNestedField(ready.Object, "10.1.2.5", "status", "podIP")
	setCondition(ready, "Ready", "True", "", "")
	if _, err := c.res(gvrPod).Create(ctx, ready, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the pod named as its Sandbox answered", func() bool { _, ok := o.boundPod("warm-4"); return ok })
	p.Close()
	if _, ok := o.boundPod("warm-4"); ok {
		t.Error("a closed provider's copy answered")
	}
}

// reads counts the API requests that read (get) a pod or a Sandbox.
func reads(c *cluster) int {
	n := 0
	for _, a := range c.client.Actions() {
		if a.GetVerb() == "get" && (a.GetResource() == gvrPod || a.GetResource() == gvrSandbox) {
			n++
		}
	}
	return n
}

// TestClaimReadsCachedPod: a warm create whose bound pod this process's
// copy already holds (as a warm pool's pod, Ready long before its claim)
// reads neither the Sandbox nor the pod from the API server, where it
// made two requests; a provider without the copy (closed before its
// first create) reads them, and its create works as well.
func TestClaimReadsCachedPod(t *testing.T) {
	for _, tc := range []struct {
		name             string
		sameName, closed bool
	}{
		{name: "pod named apart from its Sandbox"},
		{name: "pod named as its Sandbox", sameName: true},
		{name: "no copy: read from the API server", closed: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testCtx(t)
			c := newCluster(t)
			p := c.provider(t, Config{Templates: map[string]Template{"python": {Pool: 1}}})
			if tc.closed {
				p.Close()
			}
			c.prepare(t, p)
			c.mu.Lock()
			c.sameName = tc.sameName
			c.beforeBind = func(sandbox string) {
				// agent-sandbox binds a pod that ran before the claim:
				// the copy has it by then.
				if tc.closed {
					return
				}
				if !testenv.Until(10*time.Second, func() bool { _, ok := p.cache.boundPod(sandbox); return ok }) {
					t.Errorf("the copy never held %s's pod", sandbox)
				}
			}
			c.mu.Unlock()
			c.client.ClearActions()
			sb, err := p.Create(ctx, contexts.Spec{Template: "python", Env: map[string]string{"GREETING": "from the copy"}})
			if err != nil {
				t.Fatalf("create: %v", err)
			}
			defer sb.Close()
			n := reads(c)
			r, err := sb.Exec(ctx, agent.ExecParams{Shell: "echo $GREETING"}, nil)
			if err != nil || strings.TrimSpace(r.Stdout) != "from the copy" {
				t.Fatalf("exec: %+v, %v", r, err)
			}
			if tc.closed && n == 0 {
				t.Error("a create without the copy read no pod or Sandbox")
			}
			if !tc.closed && n != 0 {
				t.Errorf("the create read the pod or its Sandbox from the API server %d times; the copy held both", n)
			}
			// The pod's uid recorded for Attach is the bound pod's.
			s, err := c.res(gvrSecret).Get(context.Background(), sb.ID(), metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if want := string(c.podOfSandbox(t, sb.ID()).GetUID()); s.GetAnnotations()[annPodUID] != want {
				t.Errorf("recorded pod uid %q, want %q", s.GetAnnotations()[annPodUID], want)
			}
			if err := p.Destroy(ctx, sb.ID()); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestWithoutManagedFields: the copy's objects lose the field managers'
// records and keep the rest, and the object given is left as it was.
func TestWithoutManagedFields(t *testing.T) {
	pod := obj("v1", "Pod", "ns", "p", map[string]string{labelRole: roleSandbox})
	pod.SetManagedFields([]metav1.ManagedFieldsEntry{{Manager: "kubelet", Operation: metav1.ManagedFieldsOperationUpdate}})
	unstructured.SetNestedField(pod.Object, "10.1.2.3", "status", "podIP")
	before := pod.DeepCopy()
	out, err := withoutManagedFields(pod)
	if err != nil {
		t.Fatal(err)
	}
	u := out.(*unstructured.Unstructured)
	if len(u.GetManagedFields()) != 0 {
		t.Errorf("managed fields kept: %v", u.GetManagedFields())
	}
	if ip, _, _ := unstructured.NestedString(u.Object, "status", "podIP"); ip != "10.1.2.3" || u.GetName() != "p" || u.GetLabels()[labelRole] != roleSandbox {
		t.Errorf("the rest not kept: %v", u.Object)
	}
	if !equality.Semantic.DeepEqual(before.Object, pod.Object) {
		t.Error("the object given was changed")
	}
}
