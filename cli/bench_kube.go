package cli

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/spf13/pflag"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/sandlot/sandlot/bench"
	"github.com/sandlot/sandlot/image"
	"github.com/sandlot/sandlot/image/podimage"
	"github.com/sandlot/sandlot/provider/kubernetes"
	"github.com/sandlot/sandlot/provider/local"
)

// benchKubeFlags select the cluster of the kubernetes group.
type benchKubeFlags struct {
	config, registry, runtimeClass string
	pool                           int
	sz                             bench.KubeSizes
}

func (f *benchKubeFlags) register(fs *pflag.FlagSet) {
	f.sz = bench.DefaultKubeSizes
	fs.StringVar(&f.config, "kube-config", "", "kubeconfig of the cluster the kubernetes group runs on (default $KUBECONFIG); without one the group is reported as not run")
	fs.StringVar(&f.registry, "kube-registry", "", "registry the cluster pulls from (HOST:PORT[/PREFIX]); the bench pushes the default template's pod image there as PREFIX/sandlot/templates/default:bench")
	fs.StringVar(&f.runtimeClass, "kube-runtime-class", "gvisor", "sandbox pods' runtime class: gvisor, kata or none")
	fs.IntVar(&f.pool, "kube-pool", 2, "the default template's warm pool (SandboxWarmPool) size")
	fs.IntVar(&f.sz.Warm, "kube-warm-n", f.sz.Warm, "claims from the warm pool to first result (and as many agent-sandbox claims, the floor)")
	fs.IntVar(&f.sz.Cold, "kube-cold-n", f.sz.Cold, "cold pods to first result")
	fs.IntVar(&f.sz.Idle, "kube-idle-n", f.sz.Idle, "idle sandboxes whose memory is read from their pod cgroups")
	fs.IntVar(&f.sz.Creates, "kube-creates-n", f.sz.Creates, "creates through two replicas, for creates per second")
}

var kubeNamespaces = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}

// benchKube connects to the cluster, pushes the default template's pod
// image (the image store's "default" image plus the agent beside this
// binary) and makes a namespace of the run's own. Whatever is missing or
// fails leaves env.Client nil and env.NotRun saying why; stop deletes the
// namespace and everything in it.
func benchKube(ctx context.Context, f benchKubeFlags, imagesDir string, log *slog.Logger) (env bench.KubeEnv, stop func()) {
	stop = func() {}
	path := f.config
	if path == "" {
		path = os.Getenv("KUBECONFIG")
	}
	if path == "" {
		env.NotRun = "no cluster: give --kube-config (or $KUBECONFIG) and --kube-registry"
		return env, stop
	}
	if f.registry == "" {
		env.NotRun = "no --kube-registry: the registry the cluster pulls from, where the bench pushes the default template's pod image"
		return env, stop
	}
	fail := func(format string, a ...any) (bench.KubeEnv, func()) {
		return bench.KubeEnv{NotRun: fmt.Sprintf(format, a...)}, stop
	}
	rc, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		return fail("kubeconfig %s: %v", path, err)
	}
	rc.QPS, rc.Burst = kubernetes.ClientQPS, kubernetes.ClientBurst
	client, err := dynamic.NewForConfig(rc)
	if err != nil {
		return fail("kubernetes client: %v", err)
	}
	ref, err := pushDefaultPodImage(ctx, imagesDir, f.registry+"/sandlot/templates/default:bench", log)
	if err != nil {
		return fail("the default template's pod image: %v", err)
	}
	ns, err := benchNamespace(ctx, client)
	if err != nil {
		return fail("namespace: %v", err)
	}
	stop = func() {
		client.Resource(kubeNamespaces).Delete(context.WithoutCancel(ctx), ns, metav1.DeleteOptions{})
	}
	return bench.KubeEnv{Client: client, Namespace: ns, Image: ref, RuntimeClass: f.runtimeClass, Pool: f.pool,
		MemoryOf: bench.PodMemory, Logger: log}, stop
}

// pushDefaultPodImage builds the pod image of the image store's default
// image with the agent `template push` would use, and pushes it to ref
// with the docker config's credentials; it returns the pinned reference.
func pushDefaultPodImage(ctx context.Context, imagesDir, ref string, log *slog.Logger) (string, error) {
	if _, err := podimage.ParseRef(ref); err != nil {
		return "", err
	}
	agentPath, err := agentBinary("")
	if err != nil {
		return "", err
	}
	agentBin, err := os.ReadFile(agentPath)
	if err != nil {
		return "", err
	}
	s, err := image.Open(imagesDir, image.Config{Logger: log})
	if err != nil {
		return "", err
	}
	img, err := s.Get(ctx, local.DefaultTemplate)
	if err != nil {
		return "", fmt.Errorf("image store %s has no %q image (sandlot serve builds it; or pass --images-dir): %w", imagesDir, local.DefaultTemplate, err)
	}
	lease, err := s.Lease(ctx)
	if err != nil {
		return "", err
	}
	defer lease.Release()
	base, err := s.V1(ctx, img.Digest)
	if err != nil {
		return "", err
	}
	pi, err := podimage.Build(ctx, base, agentBin)
	if err != nil {
		return "", err
	}
	pinned, err := podimage.Push(ctx, pi, ref, authn.DefaultKeychain)
	if err != nil {
		return "", err
	}
	return pinned.String(), nil
}

// benchNamespace makes sandlot-bench-<random> and waits for its default
// service account, without which no pod is admitted.
func benchNamespace(ctx context.Context, client dynamic.Interface) (string, error) {
	var b [4]byte
	rand.Read(b[:])
	name := "sandlot-bench-" + hex.EncodeToString(b[:])
	ns := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace",
		"metadata": map[string]any{"name": name}}}
	if _, err := client.Resource(kubeNamespaces).Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		return "", err
	}
	sa := schema.GroupVersionResource{Version: "v1", Resource: "serviceaccounts"}
	deadline := time.Now().Add(time.Minute)
	for {
		_, err := client.Resource(sa).Namespace(name).Get(ctx, "default", metav1.GetOptions{})
		if err == nil {
			return name, nil
		}
		if time.Now().After(deadline) {
			client.Resource(kubeNamespaces).Delete(context.WithoutCancel(ctx), name, metav1.DeleteOptions{})
			return "", fmt.Errorf("namespace %s has no default service account after a minute: %v", name, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
