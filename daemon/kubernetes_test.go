package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/klog/v2"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/internal/testenv"
	"github.com/sandlot/sandlot/provider/kubernetes"
	"github.com/sandlot/sandlot/store/memory"
)

// deadKubeconfig is a kubeconfig whose API server does not answer.
func deadKubeconfig(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	cfg := `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "http://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestKubernetesSettingsRefused: kubernetes settings that do not parse
// stop New with an invalid_argument naming the setting.
func TestKubernetesSettingsRefused(t *testing.T) {
	for _, tc := range []struct {
		name string
		k    Kubernetes
		want string
	}{
		{"no kubeconfig", Kubernetes{Kubeconfig: "/nonexistent/kubeconfig"}, "--kube-config"},
		{"runtime class", Kubernetes{Kubeconfig: deadKubeconfig(t), RuntimeClass: "runc"}, "runtime class"},
		{"egress proxy", Kubernetes{Kubeconfig: deadKubeconfig(t), EgressProxy: "no-port"}, "egress proxy"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			d, err := New(ctx, Config{DataDir: filepath.Join(dir, "data"), StateDir: filepath.Join(dir, "run"),
				Providers: []string{"kubernetes"}, Kubernetes: tc.k}, memory.New())
			if err == nil {
				d.Close(ctx)
				t.Fatal("New accepted them")
			}
			if !errors.Is(err, errdefs.ErrInvalidArgument) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New: %v, want invalid_argument naming %s", err, tc.want)
			}
		})
	}
}

// TestKubernetesAPIServerDown: a daemon whose cluster does not answer
// starts, answers a tool call with a 503 that says so, and stays up.
func TestKubernetesAPIServerDown(t *testing.T) {
	dir := t.TempDir()
	d := start(t, "", Config{DataDir: filepath.Join(dir, "data"), StateDir: filepath.Join(dir, "run"),
		Providers: []string{"kubernetes"}, PoolSize: 0, ShutdownTimeout: 5 * time.Second,
		Kubernetes: Kubernetes{Kubeconfig: deadKubeconfig(t), Registry: "registry.test/sandlot"}})
	for range 2 {
		req, _ := http.NewRequest("POST", d.url+"/v1/tools/run_code", strings.NewReader(`{"conversationId":"k","args":{"language":"python","code":"1+1"}}`))
		req.Header.Set("X-API-KEY", d.key)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var body struct{ Code, Message string }
		json.Unmarshal(b, &body)
		if resp.StatusCode != http.StatusServiceUnavailable || body.Code != "unavailable" || !strings.Contains(body.Message, "Kubernetes cluster") {
			t.Fatalf("run_code: %d %s, want 503 unavailable naming the cluster", resp.StatusCode, b)
		}
	}
}

// TestKubernetesTemplates: pools come from --pool-sizes and --pool-size
// (the default template's; -1 the manager's default), images from
// --kube-images; the manager keeps no pool of its own and knows every
// template named.
func TestKubernetesTemplates(t *testing.T) {
	c := Config{Providers: []string{"kubernetes"}, PoolSize: -1, PoolSizes: map[string]int{"python": 3, "off": 0},
		Kubernetes: Kubernetes{Images: map[string]string{"python": "r.test/py@sha256:abc", "node": "r.test/node:1", "desktop": "r.test/desktop:1"}}}
	want := map[string]kubernetes.Template{
		"default": {Pool: 2},
		"python":  {Pool: 3, Image: "r.test/py@sha256:abc"},
		"off":     {},
		"node":    {Image: "r.test/node:1"},
		// the desktop's resources (desktop.Resources), as on one host
		"desktop": {Image: "r.test/desktop:1", Limits: contexts.Limits{MemoryBytes: 2 << 30, PIDs: 512, DiskBytes: 1 << 30}},
	}
	if diff := cmp.Diff(want, c.kubernetesTemplates()); diff != "" {
		t.Errorf("templates (-want +got):\n%s", diff)
	}
	m := c.managerConfig()
	if m.PoolSize != -1 || m.PoolSizes != nil {
		t.Errorf("manager pool %d %v, want none", m.PoolSize, m.PoolSizes)
	}
	// Every template the configuration names can be created, not only
	// the default (a pool of 0 still names its template).
	if diff := cmp.Diff([]string{"default", "desktop", "node", "off", "python"}, m.Templates); diff != "" {
		t.Errorf("manager templates (-want +got):\n%s", diff)
	}
}

// TestKubernetesClientLog: what client-go says (its errors; it keeps
// quiet at its default verbosity while the API server is away) reaches the
// daemon's log as the daemon's own lines, not stderr in klog's format.
func TestKubernetesClientLog(t *testing.T) {
	dir := t.TempDir()
	var log testenv.Buffer
	start(t, "", Config{DataDir: filepath.Join(dir, "data"), StateDir: filepath.Join(dir, "run"),
		Providers: []string{"kubernetes"}, PoolSize: 0, ShutdownTimeout: 5 * time.Second,
		Logger:     slog.New(slog.NewJSONHandler(&log, nil)),
		Kubernetes: Kubernetes{Kubeconfig: deadKubeconfig(t), Registry: "registry.test/sandlot"}})
	klog.ErrorS(errors.New("refused"), "Failed to watch", "reflector", "probe")
	for _, line := range strings.Split(log.String(), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil && m["component"] == "client-go" && m["msg"] == "Failed to watch" && m["level"] == "ERROR" {
			return
		}
	}
	t.Fatalf("client-go's error is not in the daemon's log:\n%s", log.String())
}
