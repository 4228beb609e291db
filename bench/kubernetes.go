package bench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/provider/kubernetes"
	"github.com/sandlot/sandlot/store"
	"github.com/sandlot/sandlot/store/memory"
)

// KubeEnv is the cluster the kubernetes group runs on: sandlot's
// kubernetes provider (provider/kubernetes) with the default template's
// pod image and a warm pool, in a namespace of its own.
type KubeEnv struct {
	// Client is the cluster's dynamic client; nil: the group is not run
	// and the report says NotRun.
	Client dynamic.Interface
	// NotRun is why there is no cluster (reported when Client is nil).
	NotRun string
	// Namespace holds every object the group makes; it must exist.
	Namespace string
	// Image is the default template's pod image (pinned).
	Image string
	// RuntimeClass of the pods: gvisor, kata or none.
	RuntimeClass string
	// Limits of the warm pods (the provider's defaults); zero: the
	// provider's.
	Limits contexts.Limits
	// Pool is the warm pool's size; 0: 2.
	Pool int
	// MemoryOf reads the memory a pod holds from its cgroup, by the pod's
	// uid (PodMemory on the node the bench runs on); nil leaves the
	// measured figure out.
	MemoryOf func(podUID string) (int64, error)
	Logger   *slog.Logger
}

// KubeSizes are the kubernetes group's sample counts.
type KubeSizes struct {
	Warm    int // claims from the warm pool to the first result (and agent-sandbox's own claims)
	Cold    int // cold pods to the first result
	Idle    int // idle sandboxes whose memory is measured
	Creates int // creates through two replicas
}

// DefaultKubeSizes is what `sandlot bench` runs without flags: about three
// minutes on the 2-core test node (each warm sample waits for the pool to
// refill, a cold pod's start).
var DefaultKubeSizes = KubeSizes{Warm: 20, Cold: 5, Idle: 5, Creates: 10}

const (
	targetKubeWarmP50 = 200.0
	targetKubeWarmP95 = 400.0
	kubeGroup         = "kubernetes"
)

var (
	kubeClaims     = schema.GroupVersionResource{Group: "extensions.agents.x-k8s.io", Version: "v1beta1", Resource: "sandboxclaims"}
	kubeSandboxes  = schema.GroupVersionResource{Group: "agents.x-k8s.io", Version: "v1beta1", Resource: "sandboxes"}
	kubeWarmPools  = schema.GroupVersionResource{Group: "extensions.agents.x-k8s.io", Version: "v1beta1", Resource: "sandboxwarmpools"}
	kubeSecrets    = schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
	kubePods       = schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	kubeNodes      = schema.GroupVersionResource{Version: "v1", Resource: "nodes"}
	kubePoolObject = "sandlot-default" // the provider's SandboxWarmPool of the default template
)

// KubeCaseNames are the names of the group's cases (and "kubernetes", the
// one that says it was not run), so a --cases pattern can tell whether
// the cluster is needed before it is set up.
func KubeCaseNames() []string {
	names := []string{kubeGroup}
	for _, c := range kubeCases(KubeEnv{}, KubeSizes{}) {
		names = append(names, c.Name)
	}
	return names
}

// KubeCases is the kubernetes group, or one case that reports why it was
// not run.
func KubeCases(env KubeEnv, sz KubeSizes) []Case {
	if env.Client == nil {
		why := env.NotRun
		if why == "" {
			why = "no cluster given"
		}
		return []Case{{Name: "kubernetes", Group: kubeGroup, Run: func(context.Context) ([]Figure, error) {
			return nil, errors.New("not run: " + why)
		}}}
	}
	if env.Pool <= 0 {
		env.Pool = 2
	}
	return kubeCases(env, sz)
}

func kubeCases(env KubeEnv, sz KubeSizes) []Case {
	return []Case{
		{Name: "kubernetes: claim from the warm pool to first result", Group: kubeGroup, Run: func(ctx context.Context) ([]Figure, error) {
			return kubeWarm(ctx, env, sz.Warm)
		}},
		{Name: "kubernetes: cold pod to first result", Group: kubeGroup, Run: func(ctx context.Context) ([]Figure, error) {
			return kubeCold(ctx, env, sz.Cold)
		}},
		{Name: "kubernetes: idle sandboxes per node", Group: kubeGroup, Run: func(ctx context.Context) ([]Figure, error) {
			return kubeIdle(ctx, env, sz.Idle)
		}},
		{Name: "kubernetes: creates per second, two replicas", Group: kubeGroup, Run: func(ctx context.Context) ([]Figure, error) {
			return kubeReplicas(ctx, env, sz.Creates)
		}},
	}
}

// kubeProvider is one replica's provider.
func kubeProvider(env KubeEnv) (*kubernetes.Provider, error) {
	return kubernetes.New(kubernetes.Config{
		Client:       env.Client,
		Namespace:    env.Namespace,
		RuntimeClass: env.RuntimeClass,
		Templates:    map[string]kubernetes.Template{"default": {Image: env.Image, Pool: env.Pool}},
		Limits:       env.Limits,
		ReadyTimeout: 5 * time.Minute,
		// The warm pods start the python kernel at boot, as the manager's own
		// pools do (contexts.Config.PoolPrestart): a claim's first cell then
		// runs on a kernel that is up.
		Prestart: []string{agent.Python},
		Logger:   env.Logger,
	})
}

// kubeManager is one replica: a Manager over st with the kubernetes
// provider and no pool of its own (agent-sandbox keeps the warm pods, as
// in sandlot serve). limits other than the provider's make every create a
// cold pod.
func kubeManager(ctx context.Context, env KubeEnv, st store.Backend, node string, limits contexts.Limits) (*contexts.Manager, func(), error) {
	p, err := kubeProvider(env)
	if err != nil {
		return nil, nil, err
	}
	// The template's objects and its pool, as sandlot serve makes them at
	// start. Replicas prepare one after the other: two first creates at
	// once both update the NetworkPolicy, and the later one fails on the
	// conflict.
	if err := p.Prepare(ctx); err != nil {
		return nil, nil, err
	}
	cfg := contexts.Config{PoolSize: -1, Node: node, Limits: limits, CleanupInterval: time.Hour,
		MaxPerTenant: -1, MaxPerConversation: -1, MaxExecutionsPerContext: -1}
	m := contexts.NewManager(st, p, cfg)
	if err := m.Start(ctx); err != nil {
		return nil, nil, err
	}
	return m, func() {
		c := context.WithoutCancel(ctx)
		terminateAll(c, m)
		m.Close(c)
	}, nil
}

// waitPoolFull waits until the warm pool has all its pods ready, so each
// warm sample starts from the same state (the refill is not timed).
func waitPoolFull(ctx context.Context, env KubeEnv) error {
	deadline := time.Now().Add(5 * time.Minute)
	last := "no status"
	for time.Now().Before(deadline) {
		u, err := env.Client.Resource(kubeWarmPools).Namespace(env.Namespace).Get(ctx, kubePoolObject, metav1.GetOptions{})
		if err == nil {
			n, _, _ := unstructured.NestedInt64(u.Object, "status", "readyReplicas")
			if n >= int64(env.Pool) {
				return nil
			}
			last = fmt.Sprintf("%d of %d ready", n, env.Pool)
		} else {
			last = err.Error()
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return fmt.Errorf("the warm pool %s is not full within 5 minutes (%s)", kubePoolObject, last)
}

// kubeWarm times a new context served by a claim on a full warm pool,
// from GetOrCreate to python's 1+1, and, interleaved under the same load,
// agent-sandbox's own claim on the same pool to the claim's Ready: the
// floor of the first, which sandlot adds the agent's enrollment, the
// connection and the kernel's first cell to.
func kubeWarm(ctx context.Context, env KubeEnv, n int) ([]Figure, error) {
	m, stop, err := kubeManager(ctx, env, memory.New(), "", env.Limits)
	if err != nil {
		return nil, err
	}
	defer stop()
	var first, get, floor []time.Duration
	served := 0
	for i := 0; i < n+1; i++ {
		if err := waitPoolFull(ctx, env); err != nil {
			return nil, err
		}
		d, err := claimToReady(ctx, env, fmt.Sprintf("bench-claim-%d", i))
		if err != nil {
			return nil, fmt.Errorf("agent-sandbox claim: %w", err)
		}
		if err := waitPoolFull(ctx, env); err != nil {
			return nil, err
		}
		id := ident(fmt.Sprintf("kube-warm-%d", i))
		t0 := time.Now()
		rec, err := m.GetOrCreate(ctx, id, contexts.CreateOptions{})
		if err != nil {
			return nil, err
		}
		g := time.Since(t0)
		res, err := m.Execute(ctx, id, contexts.ExecuteRequest{Language: "python", Code: "1+1"}, nil)
		if err != nil {
			return nil, err
		}
		f := time.Since(t0)
		if err := check(res, "2"); err != nil {
			return nil, err
		}
		warm, err := claimed(ctx, env, rec.SandboxID)
		if err != nil {
			return nil, err
		}
		if err := m.Terminate(ctx, benchTenant, rec.ID, contexts.ReasonDeleted); err != nil {
			return nil, err
		}
		if i == 0 { // the first warms the daemon's connections and caches
			continue
		}
		if warm {
			served++
		}
		first, get, floor = append(first, f), append(get, g), append(floor, d)
	}
	ff := Latency("kubernetes: claim from the warm pool to first result: python 1+1 (GetOrCreate + Execute)", first)
	ff.Target = fmt.Sprintf("p50 < %g ms, p95 < %g ms", targetKubeWarmP50, targetKubeWarmP95)
	met := ff.P50 < targetKubeWarmP50 && ff.P95 < targetKubeWarmP95
	ff.Met = &met
	ff.Note = fmt.Sprintf("%d of %d served by a claim on the pool; floor: agent-sandbox's claim to Ready below", served, len(first))
	fg := Latency("kubernetes: claim from the warm pool: GetOrCreate (pod enrolled, agent connected)", get)
	fl := Latency("kubernetes: floor: agent-sandbox's own claim on the warm pool to Ready (no sandlot)", floor)
	fl.Note = "a SandboxClaim made and watched directly, interleaved with the figure above"
	if fl.P50 > 0 {
		ff.Note += fmt.Sprintf("; %.1fx that floor's p50", ff.P50/fl.P50)
	}
	return []Figure{ff, fg, fl}, nil
}

// claimed reports whether the sandbox was served by a claim on the warm
// pool (the provider names the claim after the sandbox, and a cold
// Sandbox has none).
func claimed(ctx context.Context, env KubeEnv, sandboxID string) (bool, error) {
	c, err := env.Client.Resource(kubeClaims).Namespace(env.Namespace).Get(ctx, sandboxID, metav1.GetOptions{})
	if err != nil {
		if apiNotFound(err) {
			return false, nil
		}
		return false, err
	}
	name, _, _ := unstructured.NestedString(c.Object, "status", "sandbox", "name")
	return name != "" && name != sandboxID, nil // a claim served cold binds a Sandbox of its own name
}

// claimToReady makes a SandboxClaim on the warm pool and watches it until
// its Ready condition is True, then deletes it and its Sandbox.
func claimToReady(ctx context.Context, env KubeEnv, name string) (time.Duration, error) {
	res := env.Client.Resource(kubeClaims).Namespace(env.Namespace)
	w, err := res.Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name})
	if err != nil {
		return 0, err
	}
	defer w.Stop()
	c := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "extensions.agents.x-k8s.io/v1beta1", "kind": "SandboxClaim",
		"metadata": map[string]any{"name": name, "namespace": env.Namespace},
		"spec":     map[string]any{"warmPoolRef": map[string]any{"name": kubePoolObject}},
	}}
	t0 := time.Now()
	if _, err := res.Create(ctx, c, metav1.CreateOptions{}); err != nil {
		return 0, err
	}
	defer deleteClaim(context.WithoutCancel(ctx), env, name)
	timeout := time.After(5 * time.Minute)
	for {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				return 0, errors.New("the watch of the claim ended")
			}
			u, ok := ev.Object.(*unstructured.Unstructured)
			if !ok {
				continue
			}
			if readyTrue(u) {
				return time.Since(t0), nil
			}
		case <-timeout:
			return 0, fmt.Errorf("claim %s not Ready within 5 minutes", name)
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
}

func readyTrue(u *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == "Ready" && m["status"] == "True" {
			return true
		}
	}
	return false
}

// deleteClaim deletes the claim and the Sandbox it bound (the garbage
// collector may lag behind the next sample).
func deleteClaim(ctx context.Context, env KubeEnv, name string) {
	res := env.Client.Resource(kubeClaims).Namespace(env.Namespace)
	if c, err := res.Get(ctx, name, metav1.GetOptions{}); err == nil {
		if sb, _, _ := unstructured.NestedString(c.Object, "status", "sandbox", "name"); sb != "" {
			env.Client.Resource(kubeSandboxes).Namespace(env.Namespace).Delete(ctx, sb, metav1.DeleteOptions{})
		}
	}
	res.Delete(ctx, name, metav1.DeleteOptions{})
}

// kubeCold times a context whose limits are not the pool's: a Sandbox of
// its own, its pod scheduled, started (gVisor) and enrolled, then the
// first python result.
func kubeCold(ctx context.Context, env KubeEnv, n int) ([]Figure, error) {
	lim := env.Limits
	if lim.MemoryBytes == 0 {
		lim.MemoryBytes = 2 << 30
	}
	lim.MemoryBytes += 1 << 20 // not the pool's limits: a cold pod
	m, stop, err := kubeManager(ctx, env, memory.New(), "", lim)
	if err != nil {
		return nil, err
	}
	defer stop()
	var get, first []time.Duration
	for i := 0; i < n+1; i++ {
		g, f, err := firstResult(ctx, m, ident(fmt.Sprintf("kube-cold-%d", i)))
		if err != nil {
			return nil, err
		}
		if i > 0 { // the first pulls the pod image onto the node
			get, first = append(get, g), append(first, f)
		}
	}
	ff := Latency("kubernetes: cold pod to first result: python 1+1 (a Sandbox of its own)", first)
	fg := Latency("kubernetes: cold pod: GetOrCreate (scheduled, started, enrolled, connected)", get)
	return []Figure{ff, fg}, nil
}

// kubeIdle starts n contexts, runs 1+1 in each (the python kernel up) and
// leaves them idle, then reads each pod's memory from its cgroup and its
// requests from its spec: how many such sandboxes the node holds by what
// they use, and how many the scheduler admits by what they request.
func kubeIdle(ctx context.Context, env KubeEnv, n int) ([]Figure, error) {
	if n <= 0 {
		return nil, errors.New("no idle sandboxes asked for")
	}
	m, stop, err := kubeManager(ctx, env, memory.New(), "", env.Limits)
	if err != nil {
		return nil, err
	}
	defer stop()
	var uids []string
	var node string
	var reqMem, reqCPU int64
	for i := 0; i < n; i++ {
		id := ident(fmt.Sprintf("kube-idle-%d", i))
		res, err := m.Execute(ctx, id, contexts.ExecuteRequest{Language: "python", Code: "1+1"}, nil)
		if err != nil {
			return nil, err
		}
		if err := check(res, "2"); err != nil {
			return nil, err
		}
		rec, err := m.Get(ctx, benchTenant, res.ContextID)
		if err != nil {
			return nil, err
		}
		s, err := env.Client.Resource(kubeSecrets).Namespace(env.Namespace).Get(ctx, rec.SandboxID, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		uid := s.GetAnnotations()["sandlot.dev/pod-uid"]
		if uid == "" {
			return nil, fmt.Errorf("sandbox %s: no pod uid on its key secret", rec.SandboxID)
		}
		uids = append(uids, uid)
		if node == "" {
			pod, err := podByUID(ctx, env, uid)
			if err != nil {
				return nil, err
			}
			node, _, _ = unstructured.NestedString(pod.Object, "spec", "nodeName")
			reqMem, reqCPU = podRequests(pod)
		}
	}
	nodeObj, err := env.Client.Resource(kubeNodes).Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	allocMem, allocCPU := allocatable(nodeObj)
	var out []Figure
	admitted := 0.0
	if reqMem > 0 && reqCPU > 0 {
		admitted = float64(min(allocMem/reqMem, allocCPU/reqCPU))
	}
	out = append(out, Figure{Name: "kubernetes: idle sandboxes per node, by the pods' requests (what the scheduler admits)", Value: admitted, Unit: "sandboxes",
		Note: fmt.Sprintf("node %s allocatable %d MiB, %d mCPU; a pod requests %d MiB, %d mCPU (an eighth of its memory limit, a tenth of its CPU)", node, allocMem>>20, allocCPU, reqMem>>20, reqCPU)})
	if env.MemoryOf == nil {
		return out, nil
	}
	// Idle a moment so the first cell's work settles, then read each pod.
	select {
	case <-ctx.Done():
		return out, ctx.Err()
	case <-time.After(2 * time.Second):
	}
	var sum int64
	for _, uid := range uids {
		b, err := env.MemoryOf(uid)
		if err != nil { // a cluster whose node is another machine
			return append(out, Figure{Name: "kubernetes: memory per idle sandbox pod", Note: "not measured: " + err.Error()}), nil
		}
		sum += b
	}
	mean := sum / int64(len(uids))
	out = append(out,
		Figure{Name: fmt.Sprintf("kubernetes: memory per idle sandbox pod, python kernel up (pod cgroup working set, mean of %d)", n), Value: round(float64(mean)/(1<<20), 1), Unit: "MiB",
			Note: "usage less inactive file pages, the kubelet's working set; under the pod's runtime class (gVisor: the sentry and its page cache count)"},
		Figure{Name: "kubernetes: idle sandboxes per node, by memory held (node allocatable / the mean above)", Value: float64(allocMem / max(mean, 1)), Unit: "sandboxes",
			Note: "what fits if the requests matched what an idle pod holds; the requests admit fewer or more"})
	return out, nil
}

func podByUID(ctx context.Context, env KubeEnv, uid string) (*unstructured.Unstructured, error) {
	l, err := env.Client.Resource(kubePods).Namespace(env.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	for i := range l.Items {
		if string(l.Items[i].GetUID()) == uid {
			return &l.Items[i], nil
		}
	}
	return nil, fmt.Errorf("no pod with uid %s", uid)
}

// podRequests sums the containers' memory (bytes) and CPU (millicores)
// requests.
func podRequests(pod *unstructured.Unstructured) (mem, cpu int64) {
	cs, _, _ := unstructured.NestedSlice(pod.Object, "spec", "containers")
	for _, c := range cs {
		cm, _ := c.(map[string]any)
		r, _, _ := unstructured.NestedStringMap(cm, "resources", "requests")
		mem += quantity(r["memory"], false)
		cpu += quantity(r["cpu"], true)
	}
	return mem, cpu
}

func allocatable(node *unstructured.Unstructured) (mem, cpu int64) {
	a, _, _ := unstructured.NestedStringMap(node.Object, "status", "allocatable")
	return quantity(a["memory"], false), quantity(a["cpu"], true)
}

// kubeReplicas creates n contexts through two managers on one store, each
// with its own provider (two replicas), in parallel, and reports creates
// per second from the first start to the last connected agent. The warm
// pool serves what it holds; the rest are cold pods.
func kubeReplicas(ctx context.Context, env KubeEnv, n int) ([]Figure, error) {
	if n <= 0 {
		return nil, errors.New("no creates asked for")
	}
	if err := waitPoolFull(ctx, env); err != nil {
		return nil, err
	}
	st := memory.New()
	var ms [2]*contexts.Manager
	for i := range ms {
		m, stop, err := kubeManager(ctx, env, st, fmt.Sprintf("bench-replica-%d", i), env.Limits)
		if err != nil {
			return nil, err
		}
		defer stop()
		ms[i] = m
	}
	const perReplica = 2 // creates in flight on each replica
	var next atomic.Int64
	var mu sync.Mutex
	var lat []time.Duration
	var firstErr error
	var wg sync.WaitGroup
	t0 := time.Now()
	for r := range ms {
		for w := 0; w < perReplica; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					i := next.Add(1) - 1
					if i >= int64(n) {
						return
					}
					s := time.Now()
					_, err := ms[r].GetOrCreate(ctx, ident(fmt.Sprintf("kube-replicas-%d", i)), contexts.CreateOptions{})
					mu.Lock()
					if err != nil && firstErr == nil {
						firstErr = err
					}
					if err == nil {
						lat = append(lat, time.Since(s))
					}
					mu.Unlock()
					if err != nil {
						return
					}
				}
			}()
		}
	}
	wg.Wait()
	took := time.Since(t0)
	if firstErr != nil {
		return nil, firstErr
	}
	rate := float64(n) / took.Seconds()
	f := Latency(fmt.Sprintf("kubernetes: create through two replicas, %d at once on each (latency)", perReplica), lat)
	f.Value, f.Unit = round(rate, 2), "creates/s"
	f.Note = fmt.Sprintf("%d creates in %.1f s on one store; the warm pool (%d pods) serves what it holds, the rest are cold pods", n, took.Seconds(), env.Pool)
	return []Figure{f}, nil
}
