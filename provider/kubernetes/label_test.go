package kubernetes

import (
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/errdefs"
)

// TestNoEgressLabelFails: the label that takes a claimed warm pod of
// network mode none off the egress policy is patched beside its
// enrollment; a create whose patch fails does not return the sandbox
// (its code would run in a pod that may still reach the proxy) and
// leaves nothing behind.
func TestNoEgressLabelFails(t *testing.T) {
	ctx := testCtx(t)
	c := newCluster(t)
	p := c.provider(t, Config{Templates: map[string]Template{"python": {Pool: 1}}})
	c.prepare(t, p)
	before := c.counts()
	c.react("patch", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(gvrPod.GroupResource(), "pod", errors.New("no patch here"))
	})
	sb, err := p.Create(ctx, contexts.Spec{Template: "python"})
	if err == nil {
		sb.Close()
		t.Fatal("create returned a sandbox whose pod was not labelled")
	}
	if !errors.Is(err, errdefs.ErrFailedPrecondition) || !strings.Contains(err.Error(), "for no egress") {
		t.Errorf("create: %v, want the patch's refusal", err)
	}
	// The fake has no garbage collector: the claimed Sandbox's pod stays.
	after := c.counts()
	delete(before, "pods")
	delete(after, "pods")
	if diff := cmp.Diff(before, after); diff != "" {
		t.Errorf("objects left after a failed create (-before +after):\n%s", diff)
	}
}

// TestNoEgressLabelEarly: a claimed warm pod of network mode none is
// labelled as soon as the claim is bound, by its Sandbox's name, before
// the pod's read; the create returns only once the label is on the pod
// the read found. An early label that went to another pod (the name
// guessed wrong, or a pod that replaced it: another uid) does not count:
// the pod read is labelled with its uid as the precondition.
func TestNoEgressLabelEarly(t *testing.T) {
	for _, tc := range []struct {
		name     string
		sameName bool // pods named as their Sandbox: the early label finds the pod
		other    bool // the early label answers with another pod's uid
	}{
		{name: "pod named as its Sandbox", sameName: true},
		{name: "pod named apart", sameName: false},
		{name: "the early label reached another pod", sameName: true, other: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testCtx(t)
			c := newCluster(t)
			c.mu.Lock()
			c.sameName = tc.sameName
			c.mu.Unlock()
			p := c.provider(t, Config{Templates: map[string]Template{"python": {Pool: 1}}})
			c.prepare(t, p)
			var mu sync.Mutex
			var patches []string
			c.react("patch", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
				pa := a.(k8stesting.PatchAction)
				mu.Lock()
				patches = append(patches, string(pa.GetPatch()))
				mu.Unlock()
				if tc.other && !strings.Contains(string(pa.GetPatch()), `"uid"`) {
					u := obj("v1", "Pod", c.ns, pa.GetName(), nil)
					u.SetUID("uid-of-another-pod")
					return true, u, nil
				}
				return false, nil, nil
			})
			sb, err := p.Create(ctx, contexts.Spec{Template: "python"})
			if err != nil {
				t.Fatal(err)
			}
			defer sb.Close()
			pod := c.podOfSandbox(t, sb.ID())
			if got := pod.GetLabels()[labelEgress]; got != egressNone {
				t.Fatalf("the claimed pod's %s label: %q, want %q (patches: %q)", labelEgress, got, egressNone, patches)
			}
			mu.Lock()
			defer mu.Unlock()
			// The early label, then the one with the uid when the early
			// one did not reach the pod read.
			want := 1
			if !tc.sameName || tc.other {
				want = 2
			}
			if len(patches) != want {
				t.Errorf("patches %q, want %d", patches, want)
			}
		})
	}
}
