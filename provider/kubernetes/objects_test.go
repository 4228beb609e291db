package kubernetes

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/sandlot/sandlot/contexts"
)

// field reads a path of u, where a number indexes a list.
func field(u map[string]any, path string) any {
	var cur any = u
	for _, k := range strings.Split(path, ".") {
		switch c := cur.(type) {
		case map[string]any:
			cur = c[k]
		case []any:
			i := int(k[0] - '0')
			if i >= len(c) {
				return nil
			}
			cur = c[i]
		default:
			return nil
		}
	}
	return cur
}

// TestObjects: what the provider asks of the cluster, field by field: the
// pod of a pooled template and of a cold sandbox run non-root, with no
// escalation, no capabilities, seccomp RuntimeDefault, a read-only root,
// no service account token and the runtime class; the claim carries no
// env; the network policy lets in only sandlot's pods and out only to the
// egress proxy.
func TestObjects(t *testing.T) {
	ctx := testCtx(t)
	c := newCluster(t)
	p := c.provider(t, Config{
		Templates:    map[string]Template{"python": {Pool: 3, Image: "registry.test/sandlot/python@sha256:" + strings.Repeat("a", 64)}},
		RuntimeClass: "gvisor",
		EgressProxy:  "sandlot-egress:3128",
		Limits:       contexts.Limits{MemoryBytes: 1 << 30, CPUs: 0.5, DiskBytes: 256 << 20},
	})
	c.prepare(t, p)
	warm, err := p.Create(ctx, contexts.Spec{Template: "python"})
	if err != nil {
		t.Fatal(err)
	}
	defer warm.Close()
	cold, err := p.Create(ctx, contexts.Spec{Template: "python", Limits: contexts.Limits{MemoryBytes: 3 << 30, CPUs: 2}})
	if err != nil {
		t.Fatal(err)
	}
	defer cold.Close()
	get := func(r interface {
		Get(context.Context, string, metav1.GetOptions, ...string) (*unstructured.Unstructured, error)
	}, name string) map[string]any {
		u, err := r.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return u.Object
	}
	tmpl := get(c.res(gvrTemplate), "sandlot-python")
	pool := get(c.res(gvrWarmPool), "sandlot-python")
	claim := get(c.res(gvrClaim), warm.ID())
	coldSB := get(c.res(gvrSandbox), cold.ID())
	np := get(c.res(gvrNetworkPolicy), networkName)
	npNone := get(c.res(gvrNetworkPolicy), networkNameNone)
	warmSB, _ := field(claim, "status.sandbox.name").(string)
	warmAnn, _ := field(get(c.res(gvrSandbox), warmSB), "metadata.annotations").(map[string]any)
	warmPodName, _ := warmAnn[annPodName].(string)
	warmLabels, _ := field(get(c.res(gvrPod), warmPodName), "metadata.labels").(map[string]any)

	pod := func(name string, o map[string]any, memory, cpu, memReq, cpuReq, secret, item string, labels map[string]any) []check {
		ps := "spec.podTemplate.spec."
		ct := ps + "containers.0."
		return []check{
			{name, o, ps + "runtimeClassName", "gvisor"},
			{name, o, ps + "automountServiceAccountToken", false},
			{name, o, ps + "enableServiceLinks", false},
			{name, o, ps + "terminationGracePeriodSeconds", int64(1)},
			{name, o, ps + "securityContext.runAsNonRoot", true},
			{name, o, ps + "securityContext.runAsUser", int64(1000)},
			{name, o, ps + "securityContext.seccompProfile.type", "RuntimeDefault"},
			{name, o, ct + "image", "registry.test/sandlot/python@sha256:" + strings.Repeat("a", 64)},
			{name, o, ct + "securityContext.allowPrivilegeEscalation", false},
			{name, o, ct + "securityContext.runAsNonRoot", true},
			{name, o, ct + "securityContext.readOnlyRootFilesystem", true},
			{name, o, ct + "securityContext.capabilities.drop", []any{"ALL"}},
			{name, o, ct + "securityContext.seccompProfile.type", "RuntimeDefault"},
			{name, o, ct + "resources.limits.memory", memory},
			{name, o, ct + "resources.limits.cpu", cpu},
			{name, o, ct + "resources.requests.memory", memReq},
			{name, o, ct + "resources.requests.cpu", cpuReq},
			{name, o, ct + "env", nil},
			{name, o, ct + "volumeMounts.0.mountPath", "/home/user"},
			{name, o, ct + "volumeMounts.1.mountPath", "/tmp"},
			{name, o, ps + "volumes.0.emptyDir.sizeLimit", "268435456"},
			{name, o, ps + "volumes.1.emptyDir.sizeLimit", "268435456"},
			{name, o, ps + "volumes.2.secret.secretName", secret},
			{name, o, ps + "volumes.2.secret.items", []any{map[string]any{"key": item, "path": "key"}}},
			{name, o, "spec.podTemplate.metadata.labels", labels},
		}
	}
	labels := map[string]any{labelRole: roleSandbox, labelTemplate: "python", labelManaged: managedBy}
	checks := pod("template", tmpl, "1073741824", "500m", "134217728", "50m", "sandlot-python-pool", secretKey, labels)
	// Neither create has a network: each pod reaches nothing (the cold
	// one from its template, the warm one labelled once claimed).
	coldLabels := map[string]any{labelSandbox: cold.ID(), labelEgress: egressNone}
	for k, v := range labels {
		coldLabels[k] = v
	}
	checks = append(checks, pod("cold sandbox", coldSB, "3221225472", "2000m", "402653184", "200m", cold.ID(), secretEnroll, coldLabels)...)
	checks = append(checks, []check{
		{"template", tmpl, "spec.networkPolicyManagement", "Unmanaged"},
		{"template", tmpl, "spec.envVarsInjectionPolicy", "Disallowed"},
		{"pool", pool, "spec.replicas", int64(3)},
		{"pool", pool, "spec.sandboxTemplateRef.name", "sandlot-python"},
		{"claim", claim, "spec.warmPoolRef.name", "sandlot-python"},
		{"claim", claim, "spec", map[string]any{"warmPoolRef": map[string]any{"name": "sandlot-python"}}},
		{"policy", np, "spec.podSelector.matchLabels", map[string]any{labelRole: roleSandbox}},
		{"policy", np, "spec.podSelector.matchExpressions", []any{map[string]any{"key": labelEgress, "operator": "NotIn", "values": []any{egressNone}}}},
		{"policy without egress", npNone, "spec.podSelector", map[string]any{"matchLabels": map[string]any{labelRole: roleSandbox, labelEgress: egressNone}}},
		{"policy without egress", npNone, "spec.policyTypes", []any{"Ingress", "Egress"}},
		{"policy without egress", npNone, "spec.egress", []any{}},
		{"policy without egress", npNone, "spec.ingress", []any{map[string]any{"from": []any{map[string]any{"podSelector": map[string]any{"matchLabels": map[string]any{"app.kubernetes.io/name": "sandlot"}}}}}}},
		{"claimed warm pod", map[string]any{"egress": warmLabels[labelEgress]}, "egress", egressNone},
		{"policy", np, "spec.policyTypes", []any{"Ingress", "Egress"}},
		{"policy", np, "spec.ingress", []any{map[string]any{"from": []any{map[string]any{"podSelector": map[string]any{"matchLabels": map[string]any{"app.kubernetes.io/name": "sandlot"}}}}}}},
		{"policy", np, "spec.egress", []any{map[string]any{
			"to":    []any{map[string]any{"podSelector": map[string]any{"matchLabels": map[string]any{"app.kubernetes.io/name": "sandlot"}}}},
			"ports": []any{map[string]any{"protocol": "TCP", "port": int64(3128)}},
		}}},
	}...)
	for _, ck := range checks {
		if diff := cmp.Diff(ck.want, field(ck.obj, ck.path)); diff != "" {
			t.Errorf("%s: %s (-want +got):\n%s", ck.name, ck.path, diff)
		}
	}
}

type check struct {
	name string
	obj  map[string]any
	path string
	want any
}

// TestNetworkPolicyWithoutProxy: with no egress proxy, sandbox pods may
// reach nothing.
func TestNetworkPolicyWithoutProxy(t *testing.T) {
	c := newCluster(t)
	p := c.provider(t, Config{})
	np := p.networkPolicy().Object
	if diff := cmp.Diff([]any{}, field(np, "spec.egress")); diff != "" {
		t.Errorf("egress (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]any{"Ingress", "Egress"}, field(np, "spec.policyTypes")); diff != "" {
		t.Errorf("policy types (-want +got):\n%s", diff)
	}
}
