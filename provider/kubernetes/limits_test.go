package kubernetes

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sandlot/sandlot/contexts"
)

// TestTemplateLimits: a template's own limits (the desktop's: its memory,
// 1 GiB of disk) reach its pods, warm and cold, where the spec sets none;
// what the spec sets wins, and the daemon's limits come in the spec as the
// manager sends them. The pool's pods have the limits of the manager's
// creates, so those are claims.
func TestTemplateLimits(t *testing.T) {
	// 4 GiB rather than the desktop's 2, which is also the provider's
	// own default: the test tells them apart.
	desktop := contexts.Limits{MemoryBytes: 4 << 30, PIDs: 512, DiskBytes: 1 << 30}
	daemon := contexts.Limits{MemoryBytes: 1 << 30}
	tests := []struct {
		name     string
		pool     int
		provider contexts.Limits // Config.Limits, which the manager also sends in each spec
		spec     contexts.Limits
		warm     bool
		// the pod's container limit and emptyDir size
		memory, disk string
	}{
		{name: "warm, the daemon's defaults", pool: 1, warm: true, memory: "4294967296", disk: "1073741824"},
		{name: "cold, the daemon's defaults", pool: 0, memory: "4294967296", disk: "1073741824"},
		{name: "the daemon's memory limit wins, warm", pool: 1, provider: daemon, spec: daemon, warm: true, memory: "1073741824", disk: "1073741824"},
		{name: "the spec's own limit, cold", pool: 1, spec: contexts.Limits{MemoryBytes: 3 << 30}, memory: "3221225472", disk: "1073741824"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testCtx(t)
			c := newCluster(t)
			p := c.provider(t, Config{Templates: map[string]Template{"desktop": {Pool: tc.pool, Limits: desktop}}, Limits: tc.provider})
			if tc.pool > 0 {
				c.prepare(t, p)
			}
			sb, err := p.Create(ctx, contexts.Spec{Template: "desktop", Limits: tc.spec})
			if err != nil {
				t.Fatal(err)
			}
			defer sb.Close()
			name := sb.ID()
			if cl, err := c.res(gvrClaim).Get(ctx, sb.ID(), metav1.GetOptions{}); err == nil {
				name = field(cl.Object, "status.sandbox.name").(string)
			} else if tc.warm {
				t.Fatalf("no claim for a create the pool serves: %v", err)
			}
			// A warm Sandbox's pod template is its SandboxTemplate's.
			sbx, err := c.res(gvrSandbox).Get(context.Background(), name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			ps := "spec.podTemplate.spec."
			got := []any{field(sbx.Object, ps+"containers.0.resources.limits.memory"), field(sbx.Object, ps+"volumes.0.emptyDir.sizeLimit")}
			if tc.warm {
				tmpl, err := c.res(gvrTemplate).Get(ctx, objectName("desktop"), metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				got = []any{field(tmpl.Object, ps+"containers.0.resources.limits.memory"), field(tmpl.Object, ps+"volumes.0.emptyDir.sizeLimit")}
			}
			if diff := cmp.Diff([]any{tc.memory, tc.disk}, got); diff != "" {
				t.Errorf("pod memory limit and disk (-want +got):\n%s", diff)
			}
		})
	}
}
