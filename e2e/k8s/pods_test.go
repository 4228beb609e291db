package k8s

import (
	"context"
	"strings"
	"syscall"
	"testing"

	"github.com/sandlot/sandlot/internal/kubetest"
)

// TestPodRuntimes runs a pod from an image the test pushes to the harness's
// registry, under runc and under the gvisor RuntimeClass, and asks each pod
// which kernel answers it: the host's under runc, gVisor's own under runsc.
func TestPodRuntimes(t *testing.T) {
	c := kubetest.Shared(t)
	ns := namespace(t, c, "runtimes")
	image := c.Registry + "/e2e/probe:" + randSuffix()
	if err := kubetest.PushBinaryImage(context.Background(), image, "/probe", c.ProbeBinary(), []string{"/probe", "serve"}); err != nil {
		t.Fatal(err)
	}
	host := hostKernel(t)
	for _, tc := range []struct {
		name, runtimeClass string
		gvisor             bool
	}{
		{"runc", "", false},
		{"gvisor", kubetest.GVisorRuntimeClass, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ip := runPod(t, c, ns, probePod(tc.name, image, tc.runtimeClass, nil))
			kernel, err := get("http://" + ip + ":8080/kernel")
			if err != nil {
				t.Fatal(err)
			}
			if onHost := kernel == host; onHost == tc.gvisor {
				t.Errorf("pod's kernel release %q, host's %q: want the pod under gVisor=%v", kernel, host, tc.gvisor)
			}
		})
	}
}

func hostKernel(t *testing.T) string {
	t.Helper()
	var u syscall.Utsname
	if err := syscall.Uname(&u); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, c := range u.Release {
		if c == 0 {
			break
		}
		b.WriteByte(byte(c))
	}
	return b.String()
}
