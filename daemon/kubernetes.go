package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/desktop"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/internal/logkey"
	"github.com/sandlot/sandlot/provider/kubernetes"
)

// kubernetesProvider is the "kubernetes" entry of Config.Providers. The
// cluster is not reached here: a daemon whose API server is down starts,
// and its creates answer unavailable until the server is back. Settings
// that do not parse (no kubeconfig, a runtime class that is none of
// gvisor, kata or none) are an error: the daemon does not start.
func kubernetesProvider(c Config, log *slog.Logger, ke *kubeEgress) (*kubernetes.Provider, error) {
	k := c.Kubernetes
	var rc *rest.Config
	var err error
	if k.Kubeconfig != "" {
		rc, err = clientcmd.BuildConfigFromFlags("", k.Kubeconfig)
	} else {
		rc, err = rest.InClusterConfig()
	}
	if err != nil {
		return nil, fmt.Errorf("--kube-config %q: %v: %w", k.Kubeconfig, err, errdefs.ErrInvalidArgument)
	}
	rc.QPS, rc.Burst = kubernetes.ClientQPS, kubernetes.ClientBurst
	// What client-go logs (its errors: a watch it cannot keep, an event it
	// cannot decode, for the provider's copy of its objects) goes to the
	// daemon's log, in its format, not to stderr in klog's.
	klog.SetSlogLogger(log.With(slog.String("component", "client-go")))
	client, err := dynamic.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %v: %w", err, errdefs.ErrInvalidArgument)
	}
	var eg kubernetes.Egress
	var key []byte
	if ke != nil && k.EgressProxy != "" && len(k.EgressKey) > 0 {
		eg, key = ke, k.EgressKey
	}
	return kubernetes.New(kubernetes.Config{
		Client:       client,
		Namespace:    k.Namespace,
		RuntimeClass: k.RuntimeClass,
		Templates:    c.kubernetesTemplates(),
		Registry:     k.Registry,
		EgressProxy:  k.EgressProxy,
		EgressKey:    key,
		Egress:       eg,
		Limits:       c.Limits,
		ReadyTimeout: k.CreateTimeout,
		// The warm pods start the python kernel at boot, as the manager's own
		// pools do (contexts.Config.PoolPrestart): a claim's first cell then
		// runs on a kernel that is up.
		Prestart: []string{agent.Python},
		Logger:   log,
	})
}

// prepareKubernetes makes the configured pools at start, so their warm
// pods are ready before the first create. It runs beside the daemon's
// start, bounded: a cluster that does not answer is logged, and each
// create makes what is missing.
func prepareKubernetes(p *kubernetes.Provider, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := p.Prepare(ctx); err != nil {
		log.Warn("kubernetes: the warm pools are not made yet; the first create of each template makes them", slog.String(logkey.Err, err.Error()))
	}
}

// kubernetesTemplates are the templates the configuration names: their
// pools (PoolSizes, and PoolSize for the default template: -1 is the
// manager's default size, 0 none), pod images, and the desktop's limits.
func (c Config) kubernetesTemplates() map[string]kubernetes.Template {
	ts := map[string]kubernetes.Template{}
	switch {
	case c.PoolSize > 0:
		ts["default"] = kubernetes.Template{Pool: c.PoolSize}
	case c.PoolSize < 0:
		ts["default"] = kubernetes.Template{Pool: contexts.DefaultPoolSize}
	}
	for name, n := range c.PoolSizes {
		t := ts[name]
		t.Pool = n
		ts[name] = t
	}
	for name, img := range c.Kubernetes.Images {
		t := ts[name]
		t.Image = img
		ts[name] = t
	}
	// The desktop template's resources (its memory, processes and disk
	// for Chromium and XFCE) are its pods' defaults, as on one host.
	if t, ok := ts[desktop.Template]; ok {
		r := desktop.Resources
		t.Limits = contexts.Limits{MemoryBytes: r.MemoryBytes, PIDs: r.PIDs, CPUs: r.CPUs, DiskBytes: r.DiskBytes}
		ts[desktop.Template] = t
	}
	return ts
}

// egressListen is where the pods' egress proxy listens.
func (k Kubernetes) egressListen() string {
	if k.EgressListen != "" {
		return k.EgressListen
	}
	_, port, _ := net.SplitHostPort(k.EgressProxy)
	return ":" + port
}
