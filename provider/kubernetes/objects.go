package kubernetes

import (
	"fmt"
	"math"
	"strconv"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/sandlot/sandlot/contexts"
)

// The objects the provider makes, as unstructured objects of the dynamic
// client: agent-sandbox's (kubernetes-sigs/agent-sandbox, v1beta1; its
// module is not imported, the field names are its API's) and core ones.
var (
	gvrSandbox       = schema.GroupVersionResource{Group: "agents.x-k8s.io", Version: "v1beta1", Resource: "sandboxes"}
	gvrTemplate      = schema.GroupVersionResource{Group: "extensions.agents.x-k8s.io", Version: "v1beta1", Resource: "sandboxtemplates"}
	gvrWarmPool      = schema.GroupVersionResource{Group: "extensions.agents.x-k8s.io", Version: "v1beta1", Resource: "sandboxwarmpools"}
	gvrClaim         = schema.GroupVersionResource{Group: "extensions.agents.x-k8s.io", Version: "v1beta1", Resource: "sandboxclaims"}
	gvrSecret        = schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
	gvrPod           = schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	gvrNode          = schema.GroupVersionResource{Version: "v1", Resource: "nodes"}
	gvrNetworkPolicy = schema.GroupVersionResource{Group: "networking.k8s.io", Version: "v1", Resource: "networkpolicies"}
)

// ListKinds names the list kind of every resource the provider uses, as
// client-go's dynamic fake needs them.
var ListKinds = map[schema.GroupVersionResource]string{
	gvrSandbox:       "SandboxList",
	gvrTemplate:      "SandboxTemplateList",
	gvrWarmPool:      "SandboxWarmPoolList",
	gvrClaim:         "SandboxClaimList",
	gvrSecret:        "SecretList",
	gvrPod:           "PodList",
	gvrNode:          "NodeList",
	gvrNetworkPolicy: "NetworkPolicyList",
}

// Labels and annotations of the provider's objects.
const (
	labelManaged = "app.kubernetes.io/managed-by"
	managedBy    = "sandlot"
	// labelSandbox names the sandbox a claim, a cold Sandbox or a key
	// Secret belongs to.
	labelSandbox = "sandlot.dev/sandbox"
	// labelRole marks every sandbox pod (warm or cold): the network
	// policy selects them.
	labelRole   = "sandlot.dev/role"
	roleSandbox = "sandbox"
	// labelEgress "none" marks a sandbox pod that reaches nothing, not
	// even the egress proxy (a context of network mode none): the
	// NetworkPolicy sandlot-sandboxes leaves it out and sandlot-sandboxes-
	// none, which allows no egress, selects it. A cold pod has it from its
	// template; a warm pod is labelled once its claim is bound, before it
	// is enrolled (its labels were the pool's).
	labelEgress = "sandlot.dev/egress"
	egressNone  = "none"
	// labelTemplate names the sandlot template of a pod or pool.
	labelTemplate = "sandlot.dev/template"
	// annPodUID is the uid of the pod a sandbox was enrolled in: another
	// pod behind the same Sandbox (the controller made a new one after an
	// eviction) holds none of its state.
	annPodUID = "sandlot.dev/pod-uid"
	// annPodName is agent-sandbox's annotation of a Sandbox's pod.
	annPodName = "agents.x-k8s.io/pod-name"
	// The key Secret's items: the sandbox's key (for any replica that
	// attaches), and a cold pod's enrollment key (the only item mounted).
	secretKey    = "key"
	secretEnroll = "enroll"
	// secretCACert and secretCAKey are the sandbox's egress CA, with which
	// any replica's proxy terminates TLS to inject its secrets. The pod
	// mounts neither (only its enrollment key).
	secretCACert = "egress-ca.crt"
	secretCAKey  = "egress-ca.key"
	// The pod's paths.
	keyDir      = "/var/run/sandlot"
	keyPath     = keyDir + "/key"
	healthPort  = 49999
	agentImage  = "agent"
	networkName = "sandlot-sandboxes"
	// networkNameNone is the NetworkPolicy of the pods with no egress.
	networkNameNone = networkName + "-none"
)

func obj(apiVersion, kind, namespace, name string, labels map[string]string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": apiVersion, "kind": kind}}
	u.SetNamespace(namespace)
	u.SetName(name)
	if len(labels) > 0 {
		u.SetLabels(labels)
	}
	return u
}

func strMap(m map[string]string) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// resources is a container's resources for lim: limits as asked, and
// requests of an eighth of the memory and a tenth of the CPU. A sandbox
// idles most of its life (a kernel waiting for its next cell), and
// requests equal to limits held a 2-core node to one sandbox and its warm
// pod: the scheduler refused the next as out of capacity. Under memory
// pressure a sandbox above its request may be evicted first (lost).
func resources(lim contexts.Limits) map[string]any {
	return map[string]any{
		"limits": map[string]any{
			"memory": strconv.FormatInt(lim.MemoryBytes, 10),
			"cpu":    milliCPU(lim.CPUs),
		},
		"requests": map[string]any{
			"memory": strconv.FormatInt(lim.MemoryBytes/8, 10),
			"cpu":    milliCPU(lim.CPUs / 10),
		},
	}
}

func milliCPU(cpus float64) string {
	return strconv.FormatInt(max(1, int64(math.Ceil(cpus*1000))), 10) + "m"
}

// podSpec is a sandbox pod: the template's pod image, whose entrypoint is
// `sandlot-agent pod`, with the key of secretName mounted (items: only the
// item named item, as "key"), non-root with nothing to escalate to, no
// service account token, and writable emptyDirs for the home and /tmp
// under a read-only root.
func (p *Provider) podSpec(t templateConf, lim contexts.Limits, secretName, item string, prestart []string) map[string]any {
	args := []any{"--pool-key-file", keyPath, "--listen", fmt.Sprintf(":%d", p.port), "--home", "/home/user"}
	if len(prestart) > 0 {
		s := ""
		for i, l := range prestart {
			if i > 0 {
				s += ","
			}
			s += l
		}
		args = append(args, "--prestart", s)
	}
	disk := strconv.FormatInt(lim.DiskBytes, 10)
	container := map[string]any{
		"name":      agentImage,
		"image":     t.image,
		"args":      args,
		"ports":     []any{map[string]any{"name": "agent", "containerPort": int64(p.port), "protocol": "TCP"}},
		"resources": resources(lim),
		"readinessProbe": map[string]any{
			"httpGet":       map[string]any{"path": "/health", "port": int64(healthPort)},
			"periodSeconds": int64(1),
		},
		"securityContext": map[string]any{
			"runAsNonRoot":             true,
			"allowPrivilegeEscalation": false,
			"readOnlyRootFilesystem":   !t.writableRoot,
			"capabilities":             map[string]any{"drop": []any{"ALL"}},
			"seccompProfile":           map[string]any{"type": "RuntimeDefault"},
		},
		"volumeMounts": []any{
			map[string]any{"name": "home", "mountPath": "/home/user"},
			map[string]any{"name": "tmp", "mountPath": "/tmp"},
			map[string]any{"name": "key", "mountPath": keyDir, "readOnly": true},
		},
	}
	spec := map[string]any{
		"automountServiceAccountToken": false,
		"enableServiceLinks":           false,
		"restartPolicy":                "Never",
		// The agent is the pod's PID 1 and ignores signals (nothing in the
		// sandbox may stop it), so a deleted pod would hold its node's
		// requests for the default 30 s grace before the kill. A sandbox
		// has nothing to flush: the kill comes after one second.
		"terminationGracePeriodSeconds": int64(1),
		"securityContext": map[string]any{
			"runAsNonRoot":   true,
			"runAsUser":      int64(1000),
			"runAsGroup":     int64(1000),
			"fsGroup":        int64(1000),
			"seccompProfile": map[string]any{"type": "RuntimeDefault"},
		},
		"containers": []any{container},
		"volumes": []any{
			map[string]any{"name": "home", "emptyDir": map[string]any{"sizeLimit": disk}},
			map[string]any{"name": "tmp", "emptyDir": map[string]any{"sizeLimit": disk}},
			map[string]any{"name": "key", "secret": map[string]any{
				"secretName":  secretName,
				"defaultMode": int64(0o440),
				"items":       []any{map[string]any{"key": item, "path": "key"}},
			}},
		},
	}
	if p.runtimeClass != "" {
		spec["runtimeClassName"] = p.runtimeClass
	}
	return spec
}

// podTemplate wraps a pod spec with the labels every sandbox pod has.
func podTemplate(spec map[string]any, template string) map[string]any {
	return map[string]any{
		"metadata": map[string]any{"labels": map[string]any{labelRole: roleSandbox, labelTemplate: template, labelManaged: managedBy}},
		"spec":     spec,
	}
}

// templateObjects are a pooled template's SandboxTemplate and
// SandboxWarmPool, and the Secret with its pool key.
func (p *Provider) templateObjects(t templateConf, poolKey []byte) (tmpl, pool, secret *unstructured.Unstructured) {
	name := objectName(t.name)
	labels := map[string]string{labelManaged: managedBy, labelTemplate: t.name}
	secret = obj("v1", "Secret", p.ns, name+"-pool", labels)
	secret.Object["type"] = "Opaque"
	secret.Object["data"] = map[string]any{secretKey: b64(poolKey)}
	lim := p.poolLimits(t)
	tmpl = obj("extensions.agents.x-k8s.io/v1beta1", "SandboxTemplate", p.ns, name, labels)
	tmpl.Object["spec"] = map[string]any{
		"podTemplate": podTemplate(p.podSpec(t, lim, secret.GetName(), secretKey, p.prestart), t.name),
		// sandlot's own policy (networkPolicy) covers warm and cold pods
		// alike; a managed one would be a second, wider policy (policies
		// add up).
		"networkPolicyManagement": "Unmanaged",
		"envVarsInjectionPolicy":  "Disallowed",
	}
	pool = obj("extensions.agents.x-k8s.io/v1beta1", "SandboxWarmPool", p.ns, name, labels)
	pool.Object["spec"] = map[string]any{
		"replicas":           int64(t.pool),
		"sandboxTemplateRef": map[string]any{"name": name},
	}
	return tmpl, pool, secret
}

// networkPolicy lets sandbox pods be reached by sandlot's pods alone (on
// any port: the agent, and the ports the front door forwards) and reach
// nothing but sandlot's egress proxy; without a proxy, nothing at all.
func (p *Provider) networkPolicy() *unstructured.Unstructured {
	np := obj("networking.k8s.io/v1", "NetworkPolicy", p.ns, networkName, map[string]string{labelManaged: managedBy})
	daemons := map[string]any{"podSelector": map[string]any{"matchLabels": strMap(p.daemonLabels)}}
	egress := []any{}
	if p.proxyPort > 0 {
		egress = append(egress, map[string]any{
			"to":    []any{daemons},
			"ports": []any{map[string]any{"protocol": "TCP", "port": int64(p.proxyPort)}},
		})
	}
	np.Object["spec"] = map[string]any{
		// Policies add up: a pod this one selected would reach the proxy
		// whatever another policy said, so the pods with no egress are
		// left out here (networkPolicyNone).
		"podSelector": map[string]any{
			"matchLabels":      map[string]any{labelRole: roleSandbox},
			"matchExpressions": []any{map[string]any{"key": labelEgress, "operator": "NotIn", "values": []any{egressNone}}},
		},
		"policyTypes": []any{"Ingress", "Egress"},
		"ingress":     []any{map[string]any{"from": []any{daemons}}},
		"egress":      egress,
	}
	return np
}

// networkPolicyNone is the NetworkPolicy of the sandbox pods with no
// egress (network mode none): ingress from sandlot's pods, as for every
// sandbox pod, and no egress at all.
func (p *Provider) networkPolicyNone() *unstructured.Unstructured {
	np := obj("networking.k8s.io/v1", "NetworkPolicy", p.ns, networkNameNone, map[string]string{labelManaged: managedBy})
	daemons := map[string]any{"podSelector": map[string]any{"matchLabels": strMap(p.daemonLabels)}}
	np.Object["spec"] = map[string]any{
		"podSelector": map[string]any{"matchLabels": map[string]any{labelRole: roleSandbox, labelEgress: egressNone}},
		"policyTypes": []any{"Ingress", "Egress"},
		"ingress":     []any{map[string]any{"from": []any{daemons}}},
		"egress":      []any{},
	}
	return np
}

// keySecret is a sandbox's key Secret: its key, and for a cold pod the
// enrollment key its pod mounts.
func (p *Provider) keySecret(id string, key, enroll []byte, egressCA map[string][]byte, labels map[string]string, annotations map[string]string) *unstructured.Unstructured {
	s := obj("v1", "Secret", p.ns, id, labels)
	s.Object["type"] = "Opaque"
	data := map[string]any{secretKey: b64(key)}
	if enroll != nil {
		data[secretEnroll] = b64(enroll)
	}
	for k, v := range egressCA {
		data[k] = b64(v)
	}
	s.Object["data"] = data
	if len(annotations) > 0 {
		s.SetAnnotations(annotations)
	}
	return s
}

// claim is a warm create: a SandboxClaim on the template's pool, with no
// env (env on a claim forces a cold start; the configuration goes to the
// agent at enrollment).
func (p *Provider) claim(id, template string, labels, annotations map[string]string) *unstructured.Unstructured {
	c := obj("extensions.agents.x-k8s.io/v1beta1", "SandboxClaim", p.ns, id, labels)
	if len(annotations) > 0 {
		c.SetAnnotations(annotations)
	}
	// No additionalPodMetadata: agent-sandbox takes pod labels there only
	// in domains its operator allowed, and the pod is found through the
	// claim anyway.
	c.Object["spec"] = map[string]any{"warmPoolRef": map[string]any{"name": objectName(template)}}
	return c
}

// coldSandbox is a Sandbox of its own for id, with the limits asked for
// and the enrollment key of its key Secret.
func (p *Provider) coldSandbox(id string, t templateConf, lim contexts.Limits, prestart []string, noEgress bool, labels, annotations map[string]string) *unstructured.Unstructured {
	s := obj("agents.x-k8s.io/v1beta1", "Sandbox", p.ns, id, labels)
	if len(annotations) > 0 {
		s.SetAnnotations(annotations)
	}
	pt := podTemplate(p.podSpec(t, lim, id, secretEnroll, prestart), t.name)
	pt["metadata"].(map[string]any)["labels"].(map[string]any)[labelSandbox] = id
	if noEgress {
		pt["metadata"].(map[string]any)["labels"].(map[string]any)[labelEgress] = egressNone
	}
	s.Object["spec"] = map[string]any{"podTemplate": pt, "operatingMode": "Running"}
	return s
}
