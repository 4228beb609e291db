package kubernetes

import (
	"errors"
	"strings"
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
	c.client.PrependReactor("patch", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
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
