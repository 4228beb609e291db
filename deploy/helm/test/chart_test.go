package test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/common/util"
	"helm.sh/helm/v4/pkg/chart/v2/lint"
	"helm.sh/helm/v4/pkg/chart/v2/lint/support"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/engine"
	"sigs.k8s.io/yaml"
)

const chartDir = "../sandlot"

// ciValues are the values an install must give (ci/values.yaml).
func ciValues(t *testing.T) map[string]any {
	t.Helper()
	v, err := common.ReadValuesFile(filepath.Join(chartDir, "ci", "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestLint is `helm lint --strict` with the CI values: warnings fail too.
func TestLint(t *testing.T) {
	res := lint.RunAll(chartDir, ciValues(t), "sandlot")
	for _, m := range res.Messages {
		if m.Severity >= support.WarningSev {
			t.Errorf("lint: %s", m)
		} else {
			t.Logf("lint: %s", m)
		}
	}
}

// object is a rendered manifest, decoded loosely.
type object struct {
	Kind     string `json:"kind"`
	Metadata struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
	} `json:"metadata"`
	Rules []struct {
		APIGroups []string `json:"apiGroups"`
		Resources []string `json:"resources"`
		Verbs     []string `json:"verbs"`
	} `json:"rules"`
	Data     map[string]string `json:"data"`
	Spec     map[string]any    `json:"spec"`
	RoleRef  map[string]string `json:"roleRef"`
	Subjects []map[string]string
	Raw      string `json:"-"`
}

// render renders the chart with the CI values and overrides (a YAML
// document) as `helm template sandlot -n sandlot` does, and returns the
// objects by kind/name.
func render(t *testing.T, overrides string) map[string]object {
	t.Helper()
	objs, err := tryRender(t, overrides)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

func tryRender(t *testing.T, overrides string) (map[string]object, error) {
	t.Helper()
	ch, err := loader.Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	vals := ciValues(t)
	if overrides != "" {
		o, err := common.ReadValues([]byte(overrides))
		if err != nil {
			t.Fatal(err)
		}
		vals = util.MergeTables(o, vals)
	}
	rv, err := util.ToRenderValues(ch, vals, common.ReleaseOptions{Name: "sandlot", Namespace: "sandlot", IsInstall: true}, common.DefaultCapabilities)
	if err != nil {
		return nil, err
	}
	out, err := engine.Render(ch, rv)
	if err != nil {
		return nil, err
	}
	objs := map[string]object{}
	for name, body := range out {
		if !strings.HasSuffix(name, ".yaml") {
			continue
		}
		for _, doc := range strings.Split(body, "\n---") {
			if strings.TrimSpace(doc) == "" {
				continue
			}
			var o object
			if err := yaml.Unmarshal([]byte(doc), &o); err != nil {
				t.Fatalf("%s: %v\n%s", name, err, doc)
			}
			if o.Kind == "" {
				continue
			}
			o.Raw = doc
			objs[o.Kind+"/"+o.Metadata.Name] = o
		}
	}
	return objs, nil
}

type rule struct {
	Group, Resource string
	Verbs           []string
}

func rules(o object) []rule {
	var out []rule
	for _, r := range o.Rules {
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				out = append(out, rule{g, res, slices.Sorted(slices.Values(r.Verbs))})
			}
		}
	}
	slices.SortFunc(out, func(a, b rule) int { return strings.Compare(a.Group+"/"+a.Resource, b.Group+"/"+b.Resource) })
	return out
}

// TestRBAC: the daemon's account may do what the kubernetes provider does
// and nothing else: the sandboxes' objects in their namespace, a Lease in
// its own, get nodes; no wildcard, no other cluster-wide right.
func TestRBAC(t *testing.T) {
	crud := []string{"create", "delete", "get", "list", "patch", "update", "watch"}
	for _, tc := range []struct {
		name, overrides, sandboxNS string
		nodes                      bool
	}{
		{name: "defaults", sandboxNS: "sandlot", nodes: true},
		{name: "own sandbox namespace, no node reads", overrides: "kubernetes: {namespace: sandboxes, nodeReads: false}", sandboxNS: "sandboxes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := render(t, tc.overrides)
			sb, ok := objs["Role/sandlot-sandboxes"]
			if !ok {
				t.Fatalf("no Role sandlot-sandboxes among %v", keys(objs))
			}
			if sb.Metadata.Namespace != tc.sandboxNS {
				t.Errorf("the sandboxes' Role is in %q, want %q", sb.Metadata.Namespace, tc.sandboxNS)
			}
			want := []rule{
				{"", "pods", []string{"get", "list", "patch", "watch"}},
				{"", "secrets", []string{"create", "delete", "get", "list", "update"}},
				{"agents.x-k8s.io", "sandboxes", crud},
				{"extensions.agents.x-k8s.io", "sandboxclaims", crud},
				{"extensions.agents.x-k8s.io", "sandboxtemplates", crud},
				{"extensions.agents.x-k8s.io", "sandboxwarmpools", crud},
				{"networking.k8s.io", "networkpolicies", []string{"create", "delete", "get", "list", "patch", "update"}},
			}
			if diff := cmp.Diff(want, rules(sb)); diff != "" {
				t.Errorf("the sandboxes' Role (-want +got):\n%s", diff)
			}
			leader := objs["Role/sandlot-leader"]
			if leader.Metadata.Namespace != "sandlot" {
				t.Errorf("the Lease's Role is in %q, want the release's namespace", leader.Metadata.Namespace)
			}
			if diff := cmp.Diff([]rule{{"coordination.k8s.io", "leases", []string{"create", "get", "update"}}}, rules(leader)); diff != "" {
				t.Errorf("the Lease's Role (-want +got):\n%s", diff)
			}
			for _, b := range []string{"RoleBinding/sandlot-sandboxes", "RoleBinding/sandlot-leader"} {
				rb := objs[b]
				if len(rb.Subjects) != 1 || rb.Subjects[0]["name"] != "sandlot" || rb.Subjects[0]["namespace"] != "sandlot" || rb.RoleRef["kind"] != "Role" {
					t.Errorf("%s binds %v to %v, want the ServiceAccount sandlot/sandlot to a Role", b, rb.Subjects, rb.RoleRef)
				}
			}
			var clusterRoles []object
			for _, o := range objs {
				if o.Kind == "ClusterRole" {
					clusterRoles = append(clusterRoles, o)
				}
				for _, r := range o.Rules {
					if slices.Contains(r.Verbs, "*") || slices.Contains(r.Resources, "*") || slices.Contains(r.APIGroups, "*") {
						t.Errorf("%s/%s has a wildcard rule %+v", o.Kind, o.Metadata.Name, r)
					}
				}
			}
			if !tc.nodes {
				if len(clusterRoles) != 0 {
					t.Errorf("cluster roles %v with nodeReads off", clusterRoles)
				}
				return
			}
			if len(clusterRoles) != 1 {
				t.Fatalf("%d cluster roles, want one (nodes)", len(clusterRoles))
			}
			if diff := cmp.Diff([]rule{{"", "nodes", []string{"get"}}}, rules(clusterRoles[0])); diff != "" {
				t.Errorf("the ClusterRole (-want +got):\n%s", diff)
			}
		})
	}
}

func keys(m map[string]object) []string {
	return slices.Sorted(func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	})
}

// podSpec digs the pod template's spec out of the Deployment.
func podSpec(t *testing.T, objs map[string]object) map[string]any {
	t.Helper()
	d, ok := objs["Deployment/sandlot"]
	if !ok {
		t.Fatalf("no Deployment among %v", keys(objs))
	}
	return d.Spec["template"].(map[string]any)["spec"].(map[string]any)
}

// TestSecurityContext: the daemon runs as a non-root user with no
// capabilities, no privilege escalation, a read-only root and the runtime's
// seccomp profile: in the cluster it makes no namespaces, cgroups or rules.
func TestSecurityContext(t *testing.T) {
	spec := podSpec(t, render(t, ""))
	pod := spec["securityContext"].(map[string]any)
	if pod["runAsNonRoot"] != true || pod["runAsUser"] == float64(0) || pod["seccompProfile"].(map[string]any)["type"] != "RuntimeDefault" {
		t.Errorf("pod security context %v", pod)
	}
	c := spec["containers"].([]any)[0].(map[string]any)
	sc := c["securityContext"].(map[string]any)
	want := map[string]any{"allowPrivilegeEscalation": false, "readOnlyRootFilesystem": true, "privileged": false,
		"capabilities": map[string]any{"drop": []any{"ALL"}}}
	if diff := cmp.Diff(want, sc); diff != "" {
		t.Errorf("container security context (-want +got):\n%s", diff)
	}
	mounts := map[string]bool{}
	for _, m := range c["volumeMounts"].([]any) {
		mounts[m.(map[string]any)["mountPath"].(string)] = true
	}
	for _, p := range []string{"/var/lib/sandlot", "/run/sandlot", "/tmp", "/etc/sandlot/config.yaml"} {
		if !mounts[p] {
			t.Errorf("no volume at %s (the root is read-only)", p)
		}
	}
}

// daemonConfig is the rendered config file.
func daemonConfig(t *testing.T, objs map[string]object) map[string]any {
	t.Helper()
	var cfg map[string]any
	if err := yaml.Unmarshal([]byte(objs["ConfigMap/sandlot"].Data["config.yaml"]), &cfg); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestValues: the values reach the daemon's config file, the Deployment
// and the Service.
func TestValues(t *testing.T) {
	objs := render(t, `
replicaCount: 3
image: {repository: registry.example:5000/sandlot/daemon, digest: "sha256:0123456789012345678901234567890123456789012345678901234567890123"}
kubernetes: {namespace: sandboxes, runtimeClass: kata, pools: {default: 4, data-tools: 1}}
network: {egressProxy: {port: 3130}}
ports: {domain: sb.example.com, tls: {enabled: true, secretName: wildcard-tls}}
resources: {limits: {cpu: "2", memory: 2Gi}}
config: {context-ttl: 45m, log-level: debug}
`)
	cfg := daemonConfig(t, objs)
	want := map[string]any{
		"addr": "0.0.0.0:7423", "data-dir": "/var/lib/sandlot", "state-dir": "/run/sandlot", "default-image": "none",
		"providers": "kubernetes", "kube-namespace": "sandboxes", "kube-runtime-class": "kata",
		"kube-registry": "registry.example:5000/sandlot/templates", "kube-egress-proxy": "sandlot.sandlot.svc:3130", "kube-egress-listen": "0.0.0.0:3130",
		"pool-sizes":   map[string]any{"default": float64(4), "data-tools": float64(1)},
		"ports-domain": "sb.example.com", "tls-addr": "0.0.0.0:7443", "tls-cert": "/etc/sandlot/tls/tls.crt", "tls-key": "/etc/sandlot/tls/tls.key",
		"context-ttl": "45m", "log-level": "debug",
	}
	if diff := cmp.Diff(want, cfg); diff != "" {
		t.Errorf("daemon config (-want +got):\n%s", diff)
	}
	d := objs["Deployment/sandlot"]
	if d.Spec["replicas"] != float64(3) {
		t.Errorf("replicas %v", d.Spec["replicas"])
	}
	if pdb, ok := objs["PodDisruptionBudget/sandlot"]; !ok || pdb.Spec["maxUnavailable"] != float64(1) {
		t.Errorf("no PodDisruptionBudget taking one replica at a time: %v", pdb.Spec)
	}
	if _, ok := render(t, "replicaCount: 1")["PodDisruptionBudget/sandlot"]; ok {
		t.Error("a PodDisruptionBudget for one replica would block every drain")
	}
	spec := podSpec(t, objs)
	c := spec["containers"].([]any)[0].(map[string]any)
	if c["image"] != "registry.example:5000/sandlot/daemon@sha256:0123456789012345678901234567890123456789012345678901234567890123" {
		t.Errorf("image %v", c["image"])
	}
	if lim := c["resources"].(map[string]any)["limits"].(map[string]any); lim["cpu"] != "2" || lim["memory"] != "2Gi" {
		t.Errorf("limits %v", lim)
	}
	env := map[string]any{}
	for _, e := range c["env"].([]any) {
		env[e.(map[string]any)["name"].(string)] = e.(map[string]any)["valueFrom"]
	}
	wantEnv := map[string]any{
		"SANDLOT_NODE":        map[string]any{"fieldRef": map[string]any{"fieldPath": "metadata.name"}},
		"SANDLOT_STORE":       map[string]any{"secretKeyRef": map[string]any{"name": "sandlot-postgres", "key": "url"}},
		"SANDLOT_SECRETS_KEY": map[string]any{"secretKeyRef": map[string]any{"name": "sandlot-secrets-key", "key": "key"}},
	}
	if diff := cmp.Diff(wantEnv, env); diff != "" {
		t.Errorf("env (-want +got):\n%s", diff)
	}
	// The Postgres URL is in a Secret, never in the config or the Deployment.
	for k, o := range objs {
		if o.Kind != "Secret" && strings.Contains(o.Raw, "postgres.example") {
			t.Errorf("%s holds the Postgres URL", k)
		}
	}
	var ports []string
	for _, p := range objs["Service/sandlot"].Spec["ports"].([]any) {
		pm := p.(map[string]any)
		ports = append(ports, pm["name"].(string)+":"+strings.TrimSuffix(strings.TrimSuffix(yamlString(t, pm["port"]), "\n"), ".0"))
	}
	if diff := cmp.Diff([]string{"http:7423", "egress:3130", "https:443"}, ports); diff != "" {
		t.Errorf("service ports (-want +got):\n%s", diff)
	}

	t.Run("existing secrets", func(t *testing.T) {
		objs := render(t, `{postgres: {url: "", existingSecret: pg, existingSecretKey: dsn}, secretsKey: {value: "", existingSecret: sk}, e2b: {tokenSecret: {existingSecret: e2b, existingSecretKey: tok}}}`)
		for k := range objs {
			// sandlot-keys holds nothing of the operator's: the replicas'
			// shared guard key and metrics token, made by the chart.
			if strings.HasPrefix(k, "Secret/") && k != "Secret/sandlot-keys" {
				t.Errorf("the chart made %s though existing Secrets were named", k)
			}
		}
		if !strings.Contains(objs["Deployment/sandlot"].Raw, "name: pg") || !strings.Contains(objs["Deployment/sandlot"].Raw, "key: dsn") {
			t.Errorf("the Deployment does not read the named Secret:\n%s", objs["Deployment/sandlot"].Raw)
		}
		if !strings.Contains(objs["Deployment/sandlot"].Raw, "secretName: e2b") || !strings.Contains(objs["Deployment/sandlot"].Raw, "subPath: tok") {
			t.Errorf("the Deployment does not mount the named E2B token Secret:\n%s", objs["Deployment/sandlot"].Raw)
		}
	})

	// Every replica reads one E2B token key from one Secret, mounted where
	// the daemon reads it (DATA/e2b-secret); a key of one's own is used as given.
	t.Run("e2b token key", func(t *testing.T) {
		objs := render(t, "")
		s := objs["Secret/sandlot-e2b"]
		var sec struct {
			StringData map[string]string `json:"stringData"`
		}
		if err := yaml.Unmarshal([]byte(s.Raw), &sec); err != nil || len(sec.StringData["secret"]) < 32 {
			t.Errorf("the made E2B token Secret: %v\n%s", err, s.Raw)
		}
		d := objs["Deployment/sandlot"].Raw
		if !strings.Contains(d, "mountPath: /var/lib/sandlot/e2b-secret") || !strings.Contains(d, "secretName: sandlot-e2b") {
			t.Errorf("the E2B token key is not mounted at the data dir's e2b-secret:\n%s", d)
		}
		// What serve makes per data dir at first start and the replicas
		// must share: the guard's HMAC key and the metrics token.
		var keys struct {
			StringData map[string]string `json:"stringData"`
		}
		if err := yaml.Unmarshal([]byte(objs["Secret/sandlot-keys"].Raw), &keys); err != nil ||
			len(keys.StringData["guard-hmac-key"]) < 32 || len(keys.StringData["metrics-token"]) < 32 {
			t.Errorf("the replicas' shared keys Secret: %v\n%s", err, objs["Secret/sandlot-keys"].Raw)
		}
		for _, f := range []string{"guard-hmac-key", "metrics-token"} {
			if !strings.Contains(d, "mountPath: /var/lib/sandlot/"+f+"\n              subPath: "+f) {
				t.Errorf("%s is not mounted in the data dir from the keys Secret:\n%s", f, d)
			}
		}
		if !strings.Contains(d, "secretName: sandlot-keys") {
			t.Errorf("the Deployment does not mount Secret sandlot-keys:\n%s", d)
		}
		objs = render(t, `e2b: {tokenSecret: {value: "0123456789abcdef0123456789abcdef"}}`)
		if !strings.Contains(objs["Secret/sandlot-e2b"].Raw, `"0123456789abcdef0123456789abcdef"`) {
			t.Errorf("the given key is not the Secret's:\n%s", objs["Secret/sandlot-e2b"].Raw)
		}
	})
}

func yamlString(t *testing.T, v any) string {
	b, err := yaml.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestRefused: values the daemon could not run with fail the render with
// what to give.
func TestRefused(t *testing.T) {
	for _, tc := range []struct{ name, overrides, says string }{
		{"no postgres", `postgres: {url: ""}`, "postgres.url or postgres.existingSecret is required"},
		{"no secrets key", `secretsKey: {value: ""}`, "secretsKey.value"},
		{"runtime class", `kubernetes: {runtimeClass: runc}`, "runtimeClass"},
		{"tls without a secret", `ports: {tls: {enabled: true}}`, "ports.tls.secretName is required"},
		// values.schema.json
		{"replicas a string", `replicaCount: two`, "replicaCount"},
		{"negative pool", `kubernetes: {pools: {default: -1}}`, "pools"},
		{"pool of a bad template name", `kubernetes: {pools: {"Bad Name": 1}}`, "Bad Name"},
		{"not a postgres URL", `postgres: {url: "mysql://x"}`, "postgres"},
		{"egress port out of range", `network: {egressProxy: {port: 70000}}`, "port"},
		{"short e2b token key", `e2b: {tokenSecret: {value: short}}`, "tokenSecret"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tryRender(t, tc.overrides)
			if err == nil || !strings.Contains(err.Error(), tc.says) {
				t.Errorf("render: %v, want an error saying %q", err, tc.says)
			}
		})
	}
}

// TestConfigKeysAreFlags: every key the chart writes into the daemon's
// config file is a flag of `sandlot serve` ($SANDLOT_BIN), which refuses
// unknown keys at start. The kubernetes provider's keys (kube-*) are
// checked as soon as the binary has any kube- flag: the provider's flags
// come from its own branch, and until it is merged this binary has none.
func TestConfigKeysAreFlags(t *testing.T) {
	bin := os.Getenv("SANDLOT_BIN")
	if bin == "" {
		t.Fatal("SANDLOT_BIN (make test sets it) names the sandlot binary whose flags the config keys must be")
	}
	help, err := exec.Command(bin, "serve", "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("sandlot serve --help: %v\n%s", err, help)
	}
	flags := map[string]bool{}
	for _, m := range regexp.MustCompile(`--([a-z0-9-]+)`).FindAllStringSubmatch(string(help), -1) {
		flags[m[1]] = true
	}
	cfg := daemonConfig(t, render(t, `{ports: {domain: sb.example.com, tls: {enabled: true, secretName: s}}}`))
	kube := false
	for f := range flags {
		kube = kube || strings.HasPrefix(f, "kube-")
	}
	for k := range cfg {
		if strings.HasPrefix(k, "kube-") && !kube {
			t.Logf("config key %s: this sandlot has no kubernetes provider flags yet", k)
			continue
		}
		if !flags[k] {
			t.Errorf("config key %q is no flag of sandlot serve", k)
		}
	}
}

// TestConfigValuesStayValues: a value holding YAML of its own (a newline
// and a key) stays one string of the config file; it cannot add or
// replace a setting such as the provider.
func TestConfigValuesStayValues(t *testing.T) {
	objs := render(t, `{ports: {domain: "sb.example.com\nproviders: local\nguard-mode: off"}, kubernetes: {imageRegistry: "r.example/x\"\nnetwork: true"}}`)
	cfg := daemonConfig(t, objs)
	if cfg["providers"] != "kubernetes" || cfg["guard-mode"] != nil || cfg["network"] != nil {
		t.Errorf("a value added settings: %v", cfg)
	}
	if cfg["ports-domain"] != "sb.example.com\nproviders: local\nguard-mode: off" || cfg["kube-registry"] != "r.example/x\"\nnetwork: true" {
		t.Errorf("the values did not stay whole: %q %q", cfg["ports-domain"], cfg["kube-registry"])
	}
}
