// Package install installs sandlot on the test cluster of internal/kubetest
// as an operator would: the daemon image and the default template's pod
// image pushed to the cluster's registry, the Helm chart (deploy/helm/sandlot)
// rendered with Helm's library (deploy/helm/test's helmtemplate command, so
// Helm stays out of sandlot's go.mod) and applied with kubectl, N replicas
// with the kubernetes provider and a warm pool, sharing a Postgres of the
// install's own on the pods' gateway address (the machine's other Postgres
// on 127.0.0.1 is not touched). e2e/k8s tests through it and `make k8s-up`
// runs it for people.
package install

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sandlot/sandlot/image/podimage"
	"github.com/sandlot/sandlot/internal/kubetest"
)

// Release is the chart's release name; its Service and Deployment are
// named so.
const Release = "sandlot"

// Options says what to install.
type Options struct {
	// Namespace is the release's (and the sandboxes'); it must exist.
	Namespace string
	// Daemon and Pod are the daemon image and the default template's pod image.
	Daemon, Pod v1.Image
	// Sandlot is a sandlot binary for this host (`sandlot tenant create`
	// against the shared store).
	Sandlot string
	// Replicas of the daemon (2 when 0) and warm pods of the default template
	// (1 when 0).
	Replicas, Pool int
	// Config holds more daemon settings by flag name (the chart's config value).
	Config map[string]any
	// ReadyTimeout bounds the wait for every replica Ready (5 minutes when 0).
	ReadyTimeout time.Duration
	// Logf receives progress lines (none when nil).
	Logf func(format string, args ...any)
}

// Install is a running install.
type Install struct {
	// URL is the Service's address (its cluster IP, reachable from the node).
	URL string
	// APIKey is the key of the tenant "e2e", made in the shared store.
	APIKey string
	// Namespace is the release's.
	Namespace string
	// Ready is the time from the manifests applied to every replica Ready.
	Ready time.Duration
	// PostgresURL is the shared store's.
	PostgresURL string
	// DaemonImage and PodImage are the pushed images' pinned references.
	DaemonImage, PodImage string

	c         *kubetest.Cluster
	manifests string
	pg        *postgres
}

// Run installs sandlot on c. On error nothing it made is left.
func Run(ctx context.Context, c *kubetest.Cluster, o Options) (in *Install, err error) {
	if o.Replicas == 0 {
		o.Replicas = 2
	}
	if o.Pool == 0 {
		o.Pool = 1
	}
	if o.ReadyTimeout == 0 {
		o.ReadyTimeout = 5 * time.Minute
	}
	logf := o.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	in = &Install{c: c, Namespace: o.Namespace}
	defer func() {
		if err != nil {
			in.Close()
			in = nil
		}
	}()

	daemon, err := podimage.Push(ctx, o.Daemon, c.Registry+"/sandlot/daemon:e2e", nil)
	if err != nil {
		return in, fmt.Errorf("push the daemon image: %w", err)
	}
	in.DaemonImage = daemon.String()
	// Where the provider looks for a template's image: --kube-registry/NAME:latest.
	pod, err := podimage.Push(ctx, o.Pod, c.Registry+"/sandlot/templates/default:latest", nil)
	if err != nil {
		return in, fmt.Errorf("push the pod image: %w", err)
	}
	in.PodImage = pod.String()
	logf("images pushed: %s, %s", in.DaemonImage, in.PodImage)

	if err := bridgeUp(ctx, c, o.Namespace); err != nil {
		return in, err
	}
	in.pg, err = startPostgres(ctx, c.PodGateway(), podNetwork(c.PodGateway()))
	if err != nil {
		return in, err
	}
	in.PostgresURL = in.pg.url
	logf("postgres on %s", c.PodGateway())
	// The tenant first: this migrates the schema before any replica starts,
	// and the replicas then find a tenant and make none of their own.
	in.APIKey, err = createTenant(ctx, o.Sandlot, in.PostgresURL)
	if err != nil {
		return in, err
	}

	in.manifests, err = render(ctx, c, o, daemon.Context().Name(), daemon.DigestStr(), in.PostgresURL)
	if err != nil {
		return in, err
	}
	start := time.Now()
	if out, err := kubectl(ctx, c, in.manifests, "apply", "-n", o.Namespace, "-f", "-"); err != nil {
		return in, fmt.Errorf("kubectl apply: %v\n%s", err, out)
	}
	if err := waitReady(ctx, c, o.Namespace, o.Replicas, o.ReadyTimeout); err != nil {
		return in, err
	}
	in.Ready = time.Since(start)
	logf("%d replicas Ready in %s", o.Replicas, in.Ready.Round(time.Millisecond))
	svc, err := c.Client().CoreV1().Services(o.Namespace).Get(ctx, Release, metav1.GetOptions{})
	if err != nil {
		return in, err
	}
	in.URL = "http://" + net.JoinHostPort(svc.Spec.ClusterIP, "7423")
	// Ready replicas are not yet a Service that answers: kube-proxy
	// programs the Service's address a moment later (under load, seconds).
	if err := waitServing(ctx, in.URL+"/healthz", 2*time.Minute); err != nil {
		return in, err
	}
	return in, nil
}

// waitServing waits, up to bound, until url answers 200.
func waitServing(ctx context.Context, url string, bound time.Duration) error {
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	deadline := time.Now().Add(bound)
	last := ""
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := hc.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = resp.Status
		} else {
			last = err.Error()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the Service at %s does not answer within %s: %s", url, bound, last)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Close deletes what the chart made (the daemons first, so none writes to
// the store as it stops) and stops Postgres. The objects the daemons made
// (sandboxes, their pool and policy) stay for the caller to check.
func (in *Install) Close() {
	if in == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if in.manifests != "" {
		_, _ = kubectl(ctx, in.c, in.manifests, "delete", "-n", in.Namespace, "--ignore-not-found", "--wait=true", "-f", "-")
		in.manifests = ""
	}
	in.pg.stop()
	in.pg = nil
}

// PostgresProcess is the Postgres server's pid and directory, for
// KillPostgres when the process holding the install dies.
func (in *Install) PostgresProcess() (int, string) {
	if in.pg == nil || in.pg.cmd == nil || in.pg.cmd.Process == nil {
		return 0, ""
	}
	return in.pg.cmd.Process.Pid, in.pg.dir
}

// Manifests are the rendered chart that was applied.
func (in *Install) Manifests() string { return in.manifests }

// podNetwork is the /24 of the pods' gateway.
func podNetwork(gw string) string {
	ip := net.ParseIP(gw).To4()
	return fmt.Sprintf("%d.%d.%d.0/24", ip[0], ip[1], ip[2])
}

// bridgeUp makes sure the pods' gateway address exists on the node (the CNI
// bridge plugin makes the bridge with the first pod): Postgres listens there.
func bridgeUp(ctx context.Context, c *kubetest.Cluster, ns string) error {
	if hasAddr(c.PodGateway()) {
		return nil
	}
	pods := c.Client().CoreV1().Pods(ns)
	p, err := pods.Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "bridge-"},
		Spec: corev1.PodSpec{
			Containers:                    []corev1.Container{{Name: "probe", Image: c.ProbeImage()}},
			AutomountServiceAccountToken:  new(false),
			TerminationGracePeriodSeconds: new(int64(0)),
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	defer func() {
		_ = pods.Delete(context.Background(), p.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64(0))})
	}()
	deadline := time.Now().Add(2 * time.Minute)
	for !hasAddr(c.PodGateway()) {
		if time.Now().After(deadline) {
			return fmt.Errorf("the pods' bridge has no address %s two minutes after a pod was made", c.PodGateway())
		}
		time.Sleep(200 * time.Millisecond)
	}
	return nil
}

func hasAddr(ip string) bool {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return false
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.String() == ip {
			return true
		}
	}
	return false
}

// createTenant makes the tenant "e2e" in the store and returns its key.
func createTenant(ctx context.Context, sandlot, store string) (string, error) {
	var last []byte
	for range 20 {
		out, err := exec.CommandContext(ctx, sandlot, "tenant", "create", "e2e", "--store", store, "-o", "json").CombinedOutput()
		if err == nil {
			var t struct {
				APIKey string `json:"apiKey"`
			}
			if err := json.Unmarshal(out, &t); err != nil || t.APIKey == "" {
				return "", fmt.Errorf("sandlot tenant create: no key in %q", out)
			}
			return t.APIKey, nil
		}
		last = out
		time.Sleep(500 * time.Millisecond)
	}
	return "", fmt.Errorf("sandlot tenant create: %s", last)
}

// render writes the values and renders the chart with them.
func render(ctx context.Context, c *kubetest.Cluster, o Options, repo, digest, pgURL string) (string, error) {
	src, err := kubetest.SourceDir()
	if err != nil {
		return "", err
	}
	var key [32]byte
	_, _ = rand.Read(key[:])
	cfg := map[string]any{}
	for k, v := range o.Config {
		cfg[k] = v
	}
	values := map[string]any{
		"replicaCount": o.Replicas,
		"image":        map[string]any{"repository": repo, "digest": digest},
		"kubernetes": map[string]any{
			"runtimeClass":  "gvisor",
			"imageRegistry": c.Registry + "/sandlot/templates",
			"pools":         map[string]any{"default": o.Pool},
		},
		"postgres":   map[string]any{"url": pgURL},
		"secretsKey": map[string]any{"value": base64.StdEncoding.EncodeToString(key[:])},
		// The test node has 2 cores shared with the sandboxes.
		"resources": map[string]any{"requests": map[string]any{"cpu": "100m", "memory": "128Mi"}, "limits": map[string]any{"memory": "1Gi"}},
		"config":    cfg,
	}
	b, err := json.Marshal(values) // JSON is YAML
	if err != nil {
		return "", err
	}
	f, err := os.CreateTemp("", "sandlot-values-*.yaml")
	if err != nil {
		return "", err
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(b); err != nil {
		f.Close()
		return "", err
	}
	f.Close()
	cmd := exec.CommandContext(ctx, "go", "run", "./cmd/helmtemplate", "-chart", "../sandlot",
		"-name", Release, "-namespace", o.Namespace, "-f", f.Name())
	cmd.Dir = filepath.Join(src, "deploy", "helm", "test")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("render the chart: %v\n%s", err, stderr.String())
	}
	return string(out), nil
}

func kubectl(ctx context.Context, c *kubetest.Cluster, stdin string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, c.Kubectl(), append([]string{"--kubeconfig", c.Kubeconfig}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	return cmd.CombinedOutput()
}

// waitReady waits for the Deployment's replicas all Ready on its current
// spec, and says what the pods show when it times out.
func waitReady(ctx context.Context, c *kubetest.Cluster, ns string, replicas int, bound time.Duration) error {
	deadline := time.Now().Add(bound)
	for {
		d, err := c.Client().AppsV1().Deployments(ns).Get(ctx, Release, metav1.GetOptions{})
		if err == nil && d.Status.ObservedGeneration >= d.Generation && int(d.Status.ReadyReplicas) == replicas &&
			int(d.Status.UpdatedReplicas) == replicas && int(d.Status.Replicas) == replicas {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d replicas not Ready within %s: %s", replicas, bound, podsState(ctx, c, ns))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// podsState describes the daemon pods and the end of their logs.
func podsState(ctx context.Context, c *kubetest.Cluster, ns string) string {
	var b strings.Builder
	l, err := c.Client().CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=sandlot"})
	if err != nil {
		return err.Error()
	}
	for _, p := range l.Items {
		fmt.Fprintf(&b, "\npod %s: %s", p.Name, p.Status.Phase)
		for _, cond := range p.Status.Conditions {
			if cond.Status != "True" && cond.Reason != "" {
				fmt.Fprintf(&b, "; %s: %s %s", cond.Type, cond.Reason, cond.Message)
			}
		}
		for _, cs := range p.Status.ContainerStatuses {
			if w := cs.State.Waiting; w != nil {
				fmt.Fprintf(&b, "; waiting: %s %s", w.Reason, w.Message)
			}
			if t := cs.LastTerminationState.Terminated; t != nil {
				fmt.Fprintf(&b, "; last exit %d %s", t.ExitCode, t.Reason)
			}
		}
		out, _ := kubectl(ctx, c, "", "logs", "-n", ns, p.Name, "--tail", "30")
		fmt.Fprintf(&b, "\n%s", out)
	}
	fmt.Fprintf(&b, "\n%s", c.NodeLoad(ctx))
	return b.String()
}
