package kubernetes

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	dynfake "k8s.io/client-go/dynamic/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/agent/podchannel"
	"github.com/sandlot/sandlot/agent/server"
)

// cluster is client-go's dynamic fake with a stand-in for agent-sandbox's
// controller and the kubelet: it binds claims to Sandboxes it makes, makes
// their pods, and runs each pod's agent in this process (the real
// agent/server on the pod channel) on an address of its own on the
// loopback network (127.0.0.N, one port for all, as pods share one
// port). What it does is plain; the provider under test does the rest.
type cluster struct {
	t      *testing.T
	client *dynfake.FakeDynamicClient
	ns     string
	port   int

	stepMu sync.Mutex // held by the stand-in's loop for each step (react)

	mu          sync.Mutex
	next        int                  // the last loopback address used
	started     map[string]bool      // sandboxes whose pod runs
	unscheduled bool                 // pods cannot be placed
	stall       bool                 // claims are never bound
	impostor    bool                 // pods run an agent with a key of its own
	poolEmpty   bool                 // warm pools report no ready pod
	sameName    bool                 // pods are named as their Sandbox (agent-sandbox's own pods)
	claimIPs    []string             // the addresses a bound claim's status names, if not its pod's
	agents      map[string]func()    // pod name -> stop its agent
	beforeBind  func(sandbox string) // called before a claim is bound to sandbox
}

func newCluster(t *testing.T) *cluster {
	t.Helper()
	c := &cluster{
		t:       t,
		client:  dynfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), ListKinds),
		ns:      "sandlot-test",
		port:    freePort(t),
		next:    1,
		started: map[string]bool{},
		agents:  map[string]func(){},
	}
	node := obj("v1", "Node", "", "node-1", nil)
	if _, err := c.client.Resource(gvrNode).Create(context.Background(), node, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); c.run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-done
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, stop := range c.agents {
			stop()
		}
	})
	return c
}

// react puts fn first in the client's reactions to verb on resource,
// between two of the stand-in's steps: client-go's fake does not guard
// its reaction list against calls made while it is changed.
func (c *cluster) react(verb, resource string, fn k8stesting.ReactionFunc) {
	c.stepMu.Lock()
	defer c.stepMu.Unlock()
	c.client.PrependReactor(verb, resource, fn)
}

func freePort(t *testing.T) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

func (c *cluster) provider(t *testing.T, cfg Config) *Provider {
	t.Helper()
	cfg.Client = c.client
	cfg.Namespace = c.ns
	cfg.AgentPort = c.port
	if cfg.Registry == "" {
		cfg.Registry = "registry.test:5000/sandlot"
	}
	if cfg.ReadyTimeout == 0 {
		cfg.ReadyTimeout = 20 * time.Second
	}
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

func (c *cluster) res(gvr schema.GroupVersionResource) interface {
	List(context.Context, metav1.ListOptions) (*unstructured.UnstructuredList, error)
	Get(context.Context, string, metav1.GetOptions, ...string) (*unstructured.Unstructured, error)
	Update(context.Context, *unstructured.Unstructured, metav1.UpdateOptions, ...string) (*unstructured.Unstructured, error)
	Create(context.Context, *unstructured.Unstructured, metav1.CreateOptions, ...string) (*unstructured.Unstructured, error)
	Delete(context.Context, string, metav1.DeleteOptions, ...string) error
} {
	if gvr == gvrNode {
		return c.client.Resource(gvr)
	}
	return c.client.Resource(gvr).Namespace(c.ns)
}

// count is how many objects of gvr there are.
func (c *cluster) count(gvr schema.GroupVersionResource) int {
	l, err := c.res(gvr).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		c.t.Fatal(err)
	}
	return len(l.Items)
}

// run is the controller's loop: claims get a Sandbox (a warm one, named
// apart from the claim, as adoption does), Sandboxes get a pod and an
// agent. Polling keeps it plain.
func (c *cluster) run(ctx context.Context) {
	for ctx.Err() == nil {
		c.stepMu.Lock()
		c.step(ctx)
		c.stepMu.Unlock()
		select {
		case <-ctx.Done():
		case <-time.After(2 * time.Millisecond):
		}
	}
}

func (c *cluster) step(ctx context.Context) {
	c.mu.Lock()
	stall, empty := c.stall, c.poolEmpty
	c.mu.Unlock()
	// Pools report their replicas ready: the stand-in keeps no warm
	// Sandboxes (a claim gets one made for it), so none linger to count.
	pools, _ := c.res(gvrWarmPool).List(ctx, metav1.ListOptions{})
	for _, pl := range pools.Items {
		n, _, _ := unstructured.NestedInt64(pl.Object, "spec", "replicas")
		if empty {
			n = 0
		}
		if cur, ok, _ := unstructured.NestedInt64(pl.Object, "status", "readyReplicas"); !ok || cur != n {
			unstructured.SetNestedField(pl.Object, n, "status", "readyReplicas")
			c.res(gvrWarmPool).Update(ctx, &pl, metav1.UpdateOptions{})
		}
	}
	claims, _ := c.res(gvrClaim).List(ctx, metav1.ListOptions{})
	for _, cl := range claims.Items {
		if name, _, _ := unstructured.NestedString(cl.Object, "status", "sandbox", "name"); name != "" || stall {
			continue
		}
		pool, _, _ := unstructured.NestedString(cl.Object, "spec", "warmPoolRef", "name")
		tmpl, err := c.res(gvrTemplate).Get(ctx, pool, metav1.GetOptions{})
		if err != nil {
			continue
		}
		pt, _, _ := unstructured.NestedMap(tmpl.Object, "spec", "podTemplate")
		sb := obj("agents.x-k8s.io/v1beta1", "Sandbox", c.ns, "warm-"+cl.GetName(), map[string]string{"agents.x-k8s.io/warm-pool-sandbox": pool})
		sb.Object["spec"] = map[string]any{"podTemplate": pt}
		if _, err := c.res(gvrSandbox).Create(ctx, sb, metav1.CreateOptions{}); err != nil {
			continue
		}
		// A warm pool's pod runs before the claim: the claim is bound
		// with the pod's addresses in its status, as agent-sandbox
		// mirrors the Sandbox's (or with claimIPs, a stale status).
		c.mu.Lock()
		c.started[sb.GetName()] = true
		unsched, stale := c.unscheduled, c.claimIPs
		c.mu.Unlock()
		ip := ""
		if unsched {
			setCondition(sb, "PodScheduled", "False", "Unschedulable", "0/1 nodes are available: 1 Insufficient memory.")
			c.res(gvrSandbox).Update(ctx, sb, metav1.UpdateOptions{})
		} else {
			ip = c.startPod(ctx, sb)
		}
		c.mu.Lock()
		hook := c.beforeBind
		c.mu.Unlock()
		if hook != nil {
			hook(sb.GetName())
		}
		unstructured.SetNestedField(cl.Object, sb.GetName(), "status", "sandbox", "name")
		if ip != "" {
			ips := []string{ip}
			if stale != nil {
				ips = stale
			}
			unstructured.SetNestedStringSlice(cl.Object, ips, "status", "sandbox", "podIPs")
		}
		c.res(gvrClaim).Update(ctx, &cl, metav1.UpdateOptions{})
	}
	sandboxes, _ := c.res(gvrSandbox).List(ctx, metav1.ListOptions{})
	for _, sb := range sandboxes.Items {
		c.mu.Lock()
		started := c.started[sb.GetName()]
		c.started[sb.GetName()] = true
		unsched := c.unscheduled
		c.mu.Unlock()
		if started {
			continue
		}
		if unsched {
			setCondition(&sb, "PodScheduled", "False", "Unschedulable", "0/1 nodes are available: 1 Insufficient memory.")
			c.res(gvrSandbox).Update(ctx, &sb, metav1.UpdateOptions{})
			continue
		}
		c.startPod(ctx, &sb)
	}
}

// startPod makes sb's pod and runs its agent with the key its pod spec
// mounts (the Secret and item named in its key volume); it returns the
// pod's address, "" when it could not start it.
func (c *cluster) startPod(ctx context.Context, sb *unstructured.Unstructured) string {
	vols, _, _ := unstructured.NestedSlice(sb.Object, "spec", "podTemplate", "spec", "volumes")
	var key []byte
	for _, v := range vols {
		vm := v.(map[string]any)
		if vm["name"] != "key" {
			continue
		}
		sec := vm["secret"].(map[string]any)
		s, err := c.res(gvrSecret).Get(ctx, sec["secretName"].(string), metav1.GetOptions{})
		if err != nil {
			c.t.Errorf("pod of %s: its key secret: %v", sb.GetName(), err)
			return ""
		}
		item := sec["items"].([]any)[0].(map[string]any)["key"].(string)
		if key, err = secretData(s, item); err != nil {
			c.t.Errorf("pod of %s: %v", sb.GetName(), err)
			return ""
		}
	}
	c.mu.Lock()
	c.next++
	ip := fmt.Sprintf("127.0.0.%d", c.next)
	if c.impostor {
		key = []byte("an impostor's key, not the pool's")
	}
	c.mu.Unlock()
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(c.port)))
	if err != nil {
		c.t.Errorf("pod of %s: %v", sb.GetName(), err)
		return ""
	}
	keys, err := agent.NewPodKeys(nil, key)
	if err != nil {
		c.t.Errorf("pod of %s: %v", sb.GetName(), err)
		return ""
	}
	podTLS, err := podchannel.NewServer()
	if err != nil {
		c.t.Errorf("pod of %s: %v", sb.GetName(), err)
		return ""
	}
	actx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		server.New(server.Config{Listener: ln, Pod: keys, PodTLS: podTLS, Home: c.t.TempDir()}).Serve(actx)
	}()
	podName := sb.GetName() + "-pod"
	c.mu.Lock()
	if c.sameName {
		podName = sb.GetName()
	}
	c.agents[podName] = func() { stop(); ln.Close(); <-done }
	c.mu.Unlock()
	c.makePod(ctx, podName, ip, "node-1")
	a := sb.GetAnnotations()
	if a == nil {
		a = map[string]string{}
	}
	a[annPodName] = podName
	sb.SetAnnotations(a)
	setCondition(sb, "PodScheduled", "True", "PodScheduled", "")
	setCondition(sb, "Ready", "True", "DependenciesReady", "")
	unstructured.SetNestedStringSlice(sb.Object, []string{ip}, "status", "podIPs")
	c.res(gvrSandbox).Update(ctx, sb, metav1.UpdateOptions{})
	return ip
}

var uids = struct {
	sync.Mutex
	n int
}{}

func (c *cluster) makePod(ctx context.Context, name, ip, node string) {
	// As the kubelet reports a sandbox pod whose agent listens: Ready,
	// with the labels of sandlot's pod template.
	pod := obj("v1", "Pod", c.ns, name, map[string]string{labelRole: roleSandbox})
	setCondition(pod, "Ready", "True", "", "")
	uids.Lock()
	uids.n++
	pod.SetUID(types.UID(fmt.Sprintf("uid-%d", uids.n)))
	uids.Unlock()
	unstructured.SetNestedField(pod.Object, node, "spec", "nodeName")
	unstructured.SetNestedField(pod.Object, ip, "status", "podIP")
	unstructured.SetNestedField(pod.Object, "Running", "status", "phase")
	c.res(gvrPod).Delete(ctx, name, metav1.DeleteOptions{})
	if _, err := c.res(gvrPod).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		c.t.Errorf("pod %s: %v", name, err)
	}
}

func setCondition(u *unstructured.Unstructured, typ, status, reason, msg string) {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	out := []any{}
	for _, c := range conds {
		if c.(map[string]any)["type"] != typ {
			out = append(out, c)
		}
	}
	out = append(out, map[string]any{"type": typ, "status": status, "reason": reason, "message": msg})
	unstructured.SetNestedSlice(u.Object, out, "status", "conditions")
}

// podOfSandbox is the pod object behind sandbox id (claimed or cold).
func (c *cluster) podOfSandbox(t *testing.T, id string) *unstructured.Unstructured {
	t.Helper()
	name := id
	if cl, err := c.res(gvrClaim).Get(context.Background(), id, metav1.GetOptions{}); err == nil {
		name, _, _ = unstructured.NestedString(cl.Object, "status", "sandbox", "name")
	}
	sb, err := c.res(gvrSandbox).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod, err := c.res(gvrPod).Get(context.Background(), sb.GetAnnotations()[annPodName], metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return pod
}

// waitPoolReady waits for the stand-in to report pool's pods ready.
func (c *cluster) waitPoolReady(t *testing.T, pool string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		u, err := c.res(gvrWarmPool).Get(context.Background(), pool, metav1.GetOptions{})
		if err == nil {
			if n, _, _ := unstructured.NestedInt64(u.Object, "status", "readyReplicas"); n > 0 {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("pool %s never ready: %v", pool, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// prepare makes p's pools and waits for them to be ready.
func (c *cluster) prepare(t *testing.T, p *Provider) {
	t.Helper()
	if err := p.Prepare(context.Background()); err != nil {
		t.Fatal(err)
	}
	for name, tmpl := range p.templates {
		if tmpl.Pool > 0 {
			c.waitPoolReady(t, objectName(name))
		}
	}
}
