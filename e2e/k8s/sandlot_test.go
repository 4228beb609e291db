package k8s

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/sandlot/sandlot/client"
	"github.com/sandlot/sandlot/image/daemonimage"
	"github.com/sandlot/sandlot/image/debian/debiantest"
	"github.com/sandlot/sandlot/image/podimage"
	"github.com/sandlot/sandlot/internal/kubetest"
	"github.com/sandlot/sandlot/internal/kubetest/install"
	"github.com/sandlot/sandlot/internal/testenv"
	"github.com/sandlot/sandlot/tools"
)

// TestSandlotOnCluster installs sandlot with the Helm chart on the test
// cluster, two replicas behind the Service with the kubernetes provider
// and a warm pool of the default template (internal/kubetest/install), and
// runs against the Service: the /v1 API (state kept across calls, files, a
// command, terminate), a claim served from the warm pool, the official E2B
// JS SDK, with calls spread over both replicas, and one replica killed
// under load, after which every context answers with its state through the
// other. At the end no Sandbox, SandboxClaim or key Secret of a sandbox is
// left.
func TestSandlotOnCluster(t *testing.T) {
	testenv.Require(t, os.Geteuid() == 0, "root (the test cluster)")
	testenv.RequireBinary(t, "node")
	c := kubetest.Shared(t)
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()

	daemon, pod := images(t)
	ns := namespace(t, c, "sandlot")
	start := time.Now()
	in, err := install.Run(ctx, c, install.Options{
		Namespace: ns, Daemon: daemon, Pod: pod, Sandlot: testenv.SandlotBinary(t),
		Replicas: 2, Pool: 1, Logf: t.Logf,
		// The replica-kill part makes about a thousand calls per context;
		// at the default 100 a context rotates (by design: a fresh
		// sandbox, its state gone).
		Config: map[string]any{"max-executions": -1},
	})
	if err != nil {
		t.Fatalf("install: %v", err)
	}
	t.Cleanup(in.Close)
	t.Logf("installed in %s; both replicas Ready %s after the manifests were applied; %s",
		time.Since(start).Round(time.Millisecond), in.Ready.Round(time.Millisecond), in.URL)

	// Each call on a connection of its own, so the Service spreads them
	// over the replicas.
	hc := &http.Client{Timeout: 2 * time.Minute, Transport: &http.Transport{
		DisableKeepAlives: true,
		DialContext:       (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
	}}
	cl := client.New(in.URL, client.WithAPIKey(in.APIKey), client.WithHTTPClient(hc))

	poll(t, 5*time.Minute, "the warm pool ready", func() (bool, string) {
		u, err := c.Dynamic().Resource(warmPools).Namespace(ns).Get(ctx, "sandlot-default", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		ready, _, _ := unstructured.NestedInt64(u.Object, "status", "readyReplicas")
		return ready >= 1, fmt.Sprintf("status %v", u.Object["status"])
	})

	t.Run("v1", func(t *testing.T) { testV1(t, c, ns, cl) })
	t.Run("e2b sdk", func(t *testing.T) { testE2B(t, in) })
	t.Run("replica killed under load", func(t *testing.T) { testReplicaKill(t, c, in, cl) })

	// Every context is terminated by now (each subtest deletes its own).
	poll(t, 3*time.Minute, "no sandbox object left", func() (bool, string) {
		got := sandboxObjects(t, c, ns)
		return got["sandboxclaims"] == 0 && got["sandboxes"] == 0 && got["secrets"] == 0, fmt.Sprint(got, objectNames(t, c, ns))
	})
	t.Logf("left after terminate: %v", sandboxObjects(t, c, ns))
}

// images builds the daemon image (its Debian base cached in the tests'
// shared store, a static sandlot built here) and the default template's
// pod image.
func images(t *testing.T) (daemon, pod v1.Image) {
	t.Helper()
	ctx := context.Background()
	s, base := debiantest.Image(t, daemonimage.BaseConfig(), "sandlot-daemon-base")
	b, err := s.V1(ctx, base.Digest)
	if err != nil {
		t.Fatal(err)
	}
	agentBin, err := os.ReadFile(testenv.AgentBinary(t))
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "sandlot")
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", out, "github.com/sandlot/sandlot/cmd/sandlot")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if o, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("static sandlot: %v\n%s", err, o)
	}
	sandlotBin, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	daemon, err = daemonimage.Build(ctx, b, sandlotBin, agentBin, "e2e")
	if err != nil {
		t.Fatal(err)
	}
	ps, pbase := debiantest.Default(t)
	pb, err := ps.V1(ctx, pbase.Digest)
	if err != nil {
		t.Fatal(err)
	}
	podAgentBin, err := os.ReadFile(testenv.PodAgentBinary(t))
	if err != nil {
		t.Fatal(err)
	}
	pod, err = podimage.Build(ctx, pb, podAgentBin)
	if err != nil {
		t.Fatal(err)
	}
	return daemon, pod
}

// testV1: run code with state kept across calls, files, a command, and
// terminate, on a context whose sandbox was claimed from the warm pool.
func testV1(t *testing.T, c *kubetest.Cluster, ns string, cl *client.Client) {
	ctx := context.Background()
	warm := readySandboxes(t, c, ns)
	target := client.Target{ConversationID: "v1-" + randSuffix()}
	r, err := cl.RunCode(ctx, client.RunCodeRequest{Target: target, Language: "python", Code: "x = 41"})
	if err != nil || !r.Success {
		t.Fatalf("run code: %+v, %v", r, err)
	}
	id, sandbox := r.ContextID, r.SandboxID
	t.Logf("context %s on sandbox %s", id, sandbox)

	// The claim bound one of the pool's ready sandboxes, not a cold one.
	cl0, err := c.Dynamic().Resource(claims).Namespace(ns).Get(ctx, sandbox, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the context's SandboxClaim: %v", err)
	}
	bound, _, _ := unstructured.NestedString(cl0.Object, "status", "sandbox", "name")
	if !slices.Contains(warm, bound) {
		t.Errorf("the claim bound %q, not one of the warm pool's ready sandboxes %v", bound, warm)
	}

	for i := range 4 { // several calls: both replicas serve them
		r, err = cl.RunCode(ctx, client.RunCodeRequest{Target: target, Language: "python", Code: "x += 1\nprint(x)"})
		if err != nil || strings.TrimSpace(r.Stdout) != fmt.Sprint(42+i) {
			t.Fatalf("state kept: %+v, %v", r, err)
		}
	}
	ft := client.FileTarget{ContextID: id}
	if _, err := cl.Upload(ctx, ft, "notes.txt", strings.NewReader("kept on the pod")); err != nil {
		t.Fatalf("upload: %v", err)
	}
	var buf bytes.Buffer
	if _, err := cl.Download(ctx, ft, "notes.txt", &buf, nil); err != nil || buf.String() != "kept on the pod" {
		t.Fatalf("download: %q, %v", buf.String(), err)
	}
	var br tools.BashResult
	if err := cl.Tool(ctx, "bash", target, map[string]any{"command": "cat notes.txt; echo; id -u"}, &br); err != nil {
		t.Fatalf("bash: %v", err)
	}
	if br.ExitCode != 0 || br.Stdout != "kept on the pod\n1000\n" {
		t.Errorf("bash: %+v", br)
	}
	if err := cl.DeleteContext(ctx, id); err != nil {
		t.Fatalf("terminate: %v", err)
	}
	got, err := cl.GetContext(ctx, id)
	if err != nil || got.Status != "terminated" {
		t.Errorf("after terminate: %+v, %v", got, err)
	}
	poll(t, 2*time.Minute, "the terminated context's claim gone", func() (bool, string) {
		_, err := c.Dynamic().Resource(claims).Namespace(ns).Get(ctx, sandbox, metav1.GetOptions{})
		return err != nil && strings.Contains(err.Error(), "not found"), fmt.Sprint(err)
	})
}

// testE2B runs e2e/e2b/cluster.mjs (the official SDK) against the Service.
func testE2B(t *testing.T, in *install.Install) {
	src, err := kubetest.SourceDir()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(src, "e2e", "e2b")
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@e2b", "code-interpreter", "package.json")); err != nil {
		cmd := exec.Command(testenv.RequireBinary(t, "npm"), "ci", "--no-audit", "--no-fund")
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("npm ci: %v\n%s", err, out)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", "cluster.mjs")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "E2B_API_KEY="+in.APIKey, "E2B_API_URL="+in.URL, "E2B_SANDBOX_URL="+in.URL, "E2B_DEBUG=")
	out, err := cmd.CombinedOutput()
	t.Logf("node cluster.mjs:\n%s", out)
	if err != nil || !strings.Contains(string(out), "cluster: ok") {
		t.Fatalf("the E2B SDK against the cluster: %v", err)
	}
}

// objectNames names the claims and Sandboxes in ns with their labels, for
// failure messages.
func objectNames(t *testing.T, c *kubetest.Cluster, ns string) string {
	t.Helper()
	var b strings.Builder
	for _, r := range []schema.GroupVersionResource{claims, sandboxes} {
		l, err := c.Dynamic().Resource(r).Namespace(ns).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return err.Error()
		}
		for _, u := range l.Items {
			fmt.Fprintf(&b, "; %s %s %v %v", r.Resource, u.GetName(), u.GetLabels(), u.GetAnnotations())
		}
	}
	return b.String()
}
