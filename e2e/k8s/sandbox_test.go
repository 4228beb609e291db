package k8s

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/sandlot/sandlot/internal/kubetest"
)

var (
	sandboxes = schema.GroupVersionResource{Group: "agents.x-k8s.io", Version: "v1beta1", Resource: "sandboxes"}
	templates = schema.GroupVersionResource{Group: "extensions.agents.x-k8s.io", Version: "v1beta1", Resource: "sandboxtemplates"}
	warmPools = schema.GroupVersionResource{Group: "extensions.agents.x-k8s.io", Version: "v1beta1", Resource: "sandboxwarmpools"}
	claims    = schema.GroupVersionResource{Group: "extensions.agents.x-k8s.io", Version: "v1beta1", Resource: "sandboxclaims"}
)

// TestWarmPoolClaim: a SandboxTemplate of the probe image under gVisor and a
// SandboxWarmPool of 2 become ready; a SandboxClaim with warmPoolRef (and no
// env, which would force a cold start) binds to one of the warm sandboxes,
// whose pod answers. The template's readiness probe makes a warm sandbox
// Ready once its server answers (without one, Ready meant started, and
// under load the claimed pod refused the test's first request). It logs the claim's create-to-Ready time.
func TestWarmPoolClaim(t *testing.T) {
	c := kubetest.Shared(t)
	ns := namespace(t, c, "warmpool")
	ctx := context.Background()
	dyn := c.Dynamic()

	create := func(gvr schema.GroupVersionResource, obj map[string]any) {
		t.Helper()
		if _, err := dyn.Resource(gvr).Namespace(ns).Create(ctx, &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create %s: %v", gvr.Resource, err)
		}
	}
	create(templates, map[string]any{
		"apiVersion": "extensions.agents.x-k8s.io/v1beta1", "kind": "SandboxTemplate",
		"metadata": map[string]any{"name": "probe"},
		"spec": map[string]any{
			"podTemplate": map[string]any{
				"spec": map[string]any{
					"runtimeClassName":              kubetest.GVisorRuntimeClass,
					"automountServiceAccountToken":  false,
					"terminationGracePeriodSeconds": int64(1),
					"containers": []any{map[string]any{
						"name": "probe", "image": c.ProbeImage(),
						"ports": []any{map[string]any{"containerPort": int64(8080)}},
						// Ready once it serves: a warm sandbox is one that answers.
						"readinessProbe": map[string]any{
							"httpGet":       map[string]any{"path": "/", "port": int64(8080)},
							"periodSeconds": int64(1),
						},
					}},
				},
			},
		},
	})
	create(warmPools, map[string]any{
		"apiVersion": "extensions.agents.x-k8s.io/v1beta1", "kind": "SandboxWarmPool",
		"metadata": map[string]any{"name": "probe"},
		"spec":     map[string]any{"replicas": int64(2), "sandboxTemplateRef": map[string]any{"name": "probe"}},
	})
	start := time.Now()
	poll(t, 3*time.Minute, "the warm pool's 2 sandboxes ready", func() (bool, string) {
		u, err := dyn.Resource(warmPools).Namespace(ns).Get(ctx, "probe", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		ready, _, _ := unstructured.NestedInt64(u.Object, "status", "readyReplicas")
		return ready == 2, fmt.Sprintf("status %v", u.Object["status"])
	})
	t.Logf("warm pool of 2 ready in %s", time.Since(start).Round(time.Millisecond))
	warm := readySandboxes(t, c, ns)
	if len(warm) != 2 {
		t.Fatalf("ready sandboxes %v, want the pool's 2", warm)
	}

	start = time.Now()
	create(claims, map[string]any{
		"apiVersion": "extensions.agents.x-k8s.io/v1beta1", "kind": "SandboxClaim",
		"metadata": map[string]any{"name": "claim"},
		"spec":     map[string]any{"warmPoolRef": map[string]any{"name": "probe"}},
	})
	var bound string
	var ips []string
	poll(t, 2*time.Minute, "the claim Ready", func() (bool, string) {
		u, err := dyn.Resource(claims).Namespace(ns).Get(ctx, "claim", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		bound, _, _ = unstructured.NestedString(u.Object, "status", "sandbox", "name")
		ips, _, _ = unstructured.NestedStringSlice(u.Object, "status", "sandbox", "podIPs")
		return conditionTrue(u, "Ready") && bound != "", fmt.Sprintf("status %v", u.Object["status"])
	})
	t.Logf("claim to Ready: %s (a warm sandbox: %s)", time.Since(start).Round(time.Millisecond), bound)
	if !slices.Contains(warm, bound) {
		t.Fatalf("the claim bound %q, not one of the warm sandboxes %v", bound, warm)
	}
	if len(ips) == 0 {
		t.Fatal("the claim's status has no pod IP")
	}
	// Ready (its readiness probe answered) says it serves; the node's
	// route to the pod can still lag on a loaded machine: bounded.
	poll(t, time.Minute, "the claimed sandbox's pod to answer", func() (bool, string) {
		if _, err := get("http://" + ips[0] + ":8080/"); err != nil {
			return false, err.Error()
		}
		return true, ""
	})
}

// readySandboxes names the namespace's Sandboxes whose Ready condition holds.
func readySandboxes(t *testing.T, c *kubetest.Cluster, ns string) []string {
	t.Helper()
	list, err := c.Dynamic().Resource(sandboxes).Namespace(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for i := range list.Items {
		if conditionTrue(&list.Items[i], "Ready") {
			out = append(out, list.Items[i].GetName())
		}
	}
	return out
}

func conditionTrue(u *unstructured.Unstructured, typ string) bool {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, cond := range conds {
		m, _ := cond.(map[string]any)
		if m["type"] == typ && m["status"] == "True" {
			return true
		}
	}
	return false
}
