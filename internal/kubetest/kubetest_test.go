package kubetest

import (
	"context"
	"errors"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sandlot/sandlot/internal/testenv"
)

// TestCrashLeavesNothing starts a cluster with a runc and a gVisor pod
// running (shims, mounts, network namespaces, veths, netfilter rules,
// cgroups), kills every component at once as a test binary's timeout would,
// and checks that the next start's cleanup (Clean) leaves nothing behind.
// e2e/k8s checks the orderly Stop the same way (Main).
func TestCrashLeavesNothing(t *testing.T) {
	testenv.RequireRoot(t)
	ctx := context.Background()
	c, err := Start(ctx, Options{Logf: t.Logf})
	if errors.Is(err, ErrNotBuilt) {
		testenv.Require(t, false, err.Error())
	}
	if err != nil {
		t.Fatal(err)
	}
	crashed := false
	defer func() {
		if !crashed {
			_ = c.Stop()
		}
	}()
	for _, rc := range []string{"", GVisorRuntimeClass} {
		name := "probe-runc"
		if rc != "" {
			name = "probe-" + rc
		}
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.PodSpec{
				Containers:                    []corev1.Container{{Name: "probe", Image: c.ProbeImage()}},
				TerminationGracePeriodSeconds: new(int64(1)),
			},
		}
		if rc != "" {
			pod.Spec.RuntimeClassName = &rc
		}
		if _, err := c.Client().CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	wctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	if err := waitFor(wctx, nil, "both pods running", func() (bool, error) {
		pods, err := c.Client().CoreV1().Pods("default").List(wctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		running := 0
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning {
				running++
			}
		}
		return running == 2, nil
	}); err != nil {
		t.Fatal(err)
	}

	// The crash: every component killed at once, nothing cleaned, the lock
	// released as the kernel does for a dead process.
	crashed = true
	c.stopped = true
	for _, p := range c.procs {
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	}
	unlock(c.lock)
	if len(Leftovers(c.Dir)) == 0 {
		t.Fatal("a crashed cluster left nothing: the check below cannot fail")
	}
	// Another test binary waiting for the machine (e2e/k8s, in the same
	// `go test ./...`) may take the lock the crash released before Clean
	// does; its start cleans what the crash left, and Clean waits for it.
	if err := Clean(ctx, "", 20*time.Minute); err != nil {
		t.Errorf("Clean: %v", err)
	}
	if left := Leftovers(c.Dir); len(left) > 0 {
		t.Errorf("after Clean, the crashed cluster left: %v", left)
	}
	if changed := c.host.changed(); len(changed) > 0 {
		t.Errorf("after Clean, host settings differ: %v", changed)
	}
}
