package kubernetes

import (
	"sync/atomic"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/sandlot/sandlot/contexts"
)

// TestRecordPodConflict: the enrolled pod's uid goes on the key Secret
// by an update of the Secret as the create made it; when that meets a
// conflict (the Secret changed since), it is read again and updated, and
// the uid is there.
func TestRecordPodConflict(t *testing.T) {
	ctx := testCtx(t)
	c := newCluster(t)
	p := c.provider(t, Config{Templates: map[string]Template{"python": {Pool: 1}}})
	c.prepare(t, p)
	var conflicts atomic.Int32
	c.react("update", "secrets", func(k8stesting.Action) (bool, runtime.Object, error) {
		if conflicts.Add(1) == 1 {
			return true, nil, apierrors.NewConflict(gvrSecret.GroupResource(), "key", nil)
		}
		return false, nil, nil
	})
	sb, err := p.Create(ctx, contexts.Spec{Template: "python"})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	defer sb.Close()
	s, err := c.res(gvrSecret).Get(ctx, sb.ID(), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod := c.podOfSandbox(t, sb.ID())
	if got := s.GetAnnotations()[annPodUID]; got == "" || got != string(pod.GetUID()) {
		t.Errorf("the key secret names pod uid %q, want %q", got, pod.GetUID())
	}
	if n := conflicts.Load(); n != 2 {
		t.Errorf("%d updates of the key secret, want 2 (a conflict, then one from a read)", n)
	}
}
