// Package kubernetes is the contexts.Provider that runs sandboxes as pods
// of kubernetes-sigs/agent-sandbox: a sandlot template is a
// SandboxTemplate and a SandboxWarmPool, a create is a SandboxClaim on the
// pool (or, without a pool or with limits of its own, a cold Sandbox),
// and the daemon reaches the pod's sandlot-agent over the pod channel
// (agent/channel.go): TLS 1.3 with the handshake bound to the session.
// Every pod starts with a key that only enrolls it (the template's pool
// key, or a cold pod's own); the daemon enrolls it with a fresh sandbox
// key and the context's configuration, and only that key opens it from
// then on. The key lives in a Secret named after the sandbox, so any
// replica attaches. docs/kubernetes-provider.md, "The kubernetes provider".
package kubernetes

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/dynamic"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/agent/podchannel"
	"github.com/sandlot/sandlot/agent/typescript"
	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/errdefs"
)

// Name is the provider name stored in contexts.Record.Provider.
const Name = "kubernetes"

// IDPrefix starts every sandbox id of this provider (a valid object name).
const IDPrefix = "k8s-"

// ClientQPS and ClientBurst are the request rate a client of the provider
// should allow itself (rest.Config's QPS and Burst). client-go's defaults
// (5 and 10) queue a busy daemon's requests in the client: a create reads
// and writes about ten objects, a connection through the egress proxy
// reads six, the readiness check lists three kinds; under load the queue,
// not the API server, set the create's latency (1.9 s warm, measured).
const (
	ClientQPS   = 100
	ClientBurst = 200
)

// Template configures one sandlot template on the cluster.
type Template struct {
	// Image is the template's pod image (`sandlot template push`); "":
	// Config.Registry + "/" + the template's name + ":latest".
	Image string
	// Pool is the warm pool's size; 0: no pool, every create is cold.
	Pool int
	// WritableRoot leaves the pod's root writable, for images whose
	// programs write outside /home/user and /tmp.
	WritableRoot bool
	// Limits are the template's defaults for the zero fields of a spec's
	// limits (the desktop's 2 GiB and 1 GiB of disk, desktop.Resources),
	// before Config.Limits: a template's resources on one host
	// (templates.Resources) are its pods' here. Its pool's pods have them.
	Limits contexts.Limits
}

// Config configures a Provider.
type Config struct {
	// Client is the dynamic client of the cluster (required).
	Client dynamic.Interface
	// Namespace holds every object the provider makes; "": "default".
	Namespace string
	// RuntimeClass is the pods' runtimeClassName: gvisor, kata, or none
	// ("" is none: the cluster's default runtime).
	RuntimeClass string
	// Templates configures the templates by name; one not named here gets
	// the Registry's image and no pool.
	Templates map[string]Template
	// Registry prefixes the pod image of a template without an Image.
	Registry string
	// DaemonLabels select sandlot's own pods: the only pods that may reach
	// a sandbox pod, and where its egress proxy runs. nil:
	// app.kubernetes.io/name=sandlot.
	DaemonLabels map[string]string
	// EgressProxy is the egress proxy's address (host:port) that sandbox
	// pods are given as their HTTP(S) proxy and may reach; "": sandbox
	// pods reach nothing, and a spec asking for egress is refused.
	EgressProxy string
	// EgressKey, with EgressProxy and Egress, turns on the egress proxy's
	// per-sandbox identity (network/egress, ForwardConfig): each pod gets
	// a proxy credential made with it, and modes allowlist, secrets and
	// header rules are served. nil: none and open only.
	EgressKey []byte
	// Egress checks a network policy against the operator's cap and gives
	// the env it adds to the pod (its secrets' placeholders).
	Egress Egress
	// Limits are the defaults for zero fields of contexts.Spec.Limits
	// after the template's own (Template.Limits); 2 GiB, 1 CPU, 512 MiB of
	// disk when zero there too. A pool's pods have the limits of a spec
	// with these (the manager's creates); a spec that asks for others
	// gets a cold pod.
	Limits contexts.Limits
	// Prestart names kernels the agent starts at boot.
	Prestart []string
	// ReadyTimeout bounds a create from the claim (or Sandbox) to a
	// connected agent; 0: 2 minutes (a cold pod may pull its image).
	ReadyTimeout time.Duration
	// AgentPort is the agent's port in the pod; 0: agent.PodPort.
	AgentPort int
	// Logger; nil discards.
	Logger *slog.Logger
}

// Provider runs sandboxes as agent-sandbox pods. Safe for concurrent use.
type Provider struct {
	c            dynamic.Interface
	ns           string
	runtimeClass string
	templates    map[string]Template
	registry     string
	daemonLabels map[string]string
	proxy        string
	proxyPort    int
	egressKey    []byte
	egress       Egress
	limits       contexts.Limits
	prestart     []string
	ready        time.Duration
	port         int
	log          *slog.Logger

	// mu guards ensured, the templates whose objects this process made
	// or found, so a create does not ask the API server again, and
	// poolKeys, the pool keys read so far.
	mu       sync.Mutex
	ensured  map[string]*ensure
	poolKeys map[string][]byte

	cacheOnce sync.Once
	cache     *objCache // set by startCache
}

var _ contexts.Provider = (*Provider)(nil)

// New checks cfg; it does not reach the cluster (the first create does).
func New(cfg Config) (*Provider, error) {
	if cfg.Client == nil {
		return nil, fmt.Errorf("kubernetes provider: no client: %w", errdefs.ErrInvalidArgument)
	}
	p := &Provider{
		c: cfg.Client, ns: cfg.Namespace, templates: cfg.Templates, registry: strings.TrimSuffix(cfg.Registry, "/"),
		daemonLabels: cfg.DaemonLabels, proxy: cfg.EgressProxy, limits: cfg.Limits, prestart: cfg.Prestart,
		ready: cfg.ReadyTimeout, port: cfg.AgentPort, log: cfg.Logger, ensured: map[string]*ensure{}, poolKeys: map[string][]byte{},
	}
	if cfg.EgressProxy != "" && len(cfg.EgressKey) > 0 && cfg.Egress != nil {
		p.egressKey, p.egress = cfg.EgressKey, cfg.Egress
	}
	if p.ns == "" {
		p.ns = "default"
	}
	switch cfg.RuntimeClass {
	case "", "none":
	case "gvisor", "kata":
		p.runtimeClass = cfg.RuntimeClass
	default:
		return nil, fmt.Errorf("kubernetes provider: runtime class %q: want gvisor, kata or none: %w", cfg.RuntimeClass, errdefs.ErrInvalidArgument)
	}
	if p.daemonLabels == nil {
		p.daemonLabels = map[string]string{"app.kubernetes.io/name": "sandlot"}
	}
	if p.proxy != "" {
		_, port, err := net.SplitHostPort(p.proxy)
		n, perr := strconv.Atoi(port)
		if err != nil || perr != nil || n <= 0 || n > 65535 {
			return nil, fmt.Errorf("kubernetes provider: egress proxy %q: want host:port: %w", p.proxy, errdefs.ErrInvalidArgument)
		}
		p.proxyPort = n
	}
	if p.ready <= 0 {
		p.ready = 2 * time.Minute
	}
	if p.port <= 0 {
		p.port = agent.PodPort
	}
	if p.log == nil {
		p.log = slog.New(slog.DiscardHandler)
	}
	for name := range cfg.Templates {
		if _, err := p.template(name); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// Name implements contexts.Provider.
func (p *Provider) Name() string { return Name }

// Capabilities implements contexts.Provider: shared, as every replica
// reaches a sandbox's pod by id (its address from the Sandbox's status,
// its key from its Secret); no pause, as agent-sandbox's suspend deletes
// the pod (its memory with it), and no usage yet.
func (p *Provider) Capabilities() contexts.Capabilities { return contexts.CapShared }

// Pause implements contexts.Provider: NotSupported.
func (p *Provider) Pause(context.Context, string) error {
	return contexts.NotSupported(Name, contexts.CapPause)
}

// Resume implements contexts.Provider: NotSupported.
func (p *Provider) Resume(context.Context, string) error {
	return contexts.NotSupported(Name, contexts.CapPause)
}

// Usage implements contexts.Provider: NotSupported.
func (p *Provider) Usage(context.Context, string) (contexts.ResourceUsage, error) {
	return contexts.ResourceUsage{}, contexts.NotSupported(Name, contexts.CapUsage)
}

// templateConf is a template as the provider uses it.
type templateConf struct {
	name         string
	image        string
	pool         int
	writableRoot bool
	limits       contexts.Limits // the template's defaults (Template.Limits)
}

// envName is a variable name the agent's environment takes.
var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// nameRE is what a template's name may be to name objects after it.
var nameRE = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,40}[a-z0-9])?$`)

func objectName(template string) string { return "sandlot-" + template }

func (p *Provider) template(name string) (templateConf, error) {
	if name == "" {
		name = "default"
	}
	if !nameRE.MatchString(name) {
		return templateConf{}, fmt.Errorf("template %q: on kubernetes a template's name is lower-case letters, digits and '-' (at most 42): %w", name, errdefs.ErrInvalidArgument)
	}
	t := p.templates[name]
	c := templateConf{name: name, image: t.Image, pool: t.Pool, writableRoot: t.WritableRoot, limits: t.Limits}
	if c.image == "" {
		if p.registry == "" {
			return templateConf{}, fmt.Errorf("template %q has no pod image and no registry is configured: %w", name, errdefs.ErrFailedPrecondition)
		}
		c.image = p.registry + "/" + name + ":latest"
	}
	return c, nil
}

// limitsFor are the limits of a pod of template t for a spec's limits l:
// each field l sets, else t's default, else the provider's (Config.Limits),
// else 2 GiB, 256 processes, 1 CPU, 512 MiB of disk. The daemon's limits
// (--sandbox-memory, ...) come in l, as on one host, where they win over
// a public template's resources too.
func (p *Provider) limitsFor(t templateConf, l contexts.Limits) contexts.Limits {
	return contexts.Limits{
		MemoryBytes: firstPositive(int64(2<<30), l.MemoryBytes, t.limits.MemoryBytes, p.limits.MemoryBytes),
		PIDs:        firstPositive(int64(256), l.PIDs, t.limits.PIDs, p.limits.PIDs),
		CPUs:        firstPositive(1.0, l.CPUs, t.limits.CPUs, p.limits.CPUs),
		DiskBytes:   firstPositive(int64(512<<20), l.DiskBytes, t.limits.DiskBytes, p.limits.DiskBytes),
	}
}

// poolLimits are the limits of t's warm pods: those of a create whose
// spec has the provider's limits, as the manager's creates do. A create
// with other limits gets a cold pod.
func (p *Provider) poolLimits(t templateConf) contexts.Limits {
	return p.limitsFor(t, p.limits)
}

func newKey() []byte {
	k := make([]byte, agent.KeySize)
	rand.Read(k)
	return k
}

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

// NewID returns a fresh sandbox id: IDPrefix and 12 hex digits.
func NewID() string {
	var b [6]byte
	rand.Read(b[:])
	return fmt.Sprintf("%s%x", IDPrefix, b)
}

// checkID refuses an id that is not this provider's (it names objects).
func checkID(id string) error {
	if !strings.HasPrefix(id, IDPrefix) || len(validation.IsDNS1123Label(id)) > 0 {
		return fmt.Errorf("sandbox id %q: %w", id, errdefs.ErrInvalidArgument)
	}
	return nil
}

// meta are the labels and annotations of a sandbox's objects: sandlot's
// own labels, and the spec's labels as annotations (a tenant's id need not
// be a valid label value).
func meta(id, template string, specLabels map[string]string) (labels, annotations map[string]string) {
	labels = map[string]string{labelManaged: managedBy, labelSandbox: id, labelTemplate: template}
	annotations = map[string]string{}
	for k, v := range specLabels {
		if len(validation.IsQualifiedName(k)) == 0 {
			annotations[k] = v
		}
	}
	return labels, annotations
}

// Attach implements contexts.Provider: the sandbox's key from its Secret,
// its pod from its claim or Sandbox. A pod that is gone, failed (evicted),
// on a node that is gone, or is not the one enrolled is a lost sandbox:
// not_found.
func (p *Provider) Attach(ctx context.Context, sandboxID string) (contexts.Sandbox, error) {
	if err := checkID(sandboxID); err != nil {
		return nil, err
	}
	s, err := p.c.Resource(gvrSecret).Namespace(p.ns).Get(ctx, sandboxID, metav1.GetOptions{})
	if err != nil {
		return nil, apiErr("sandbox "+sandboxID, err)
	}
	key, err := secretData(s, secretKey)
	if err != nil {
		return nil, fmt.Errorf("sandbox %s: %v: %w", sandboxID, err, errdefs.ErrNotFound)
	}
	pod, err := p.currentPod(ctx, sandboxID)
	if err != nil {
		return nil, err
	}
	if want := s.GetAnnotations()[annPodUID]; want == "" || want != pod.uid {
		return nil, fmt.Errorf("sandbox %s: its pod %s is not the one it was enrolled in (lost): %w", sandboxID, pod.name, errdefs.ErrNotFound)
	}
	addr := net.JoinHostPort(pod.ip, strconv.Itoa(p.port))
	var c *agent.Client
	if err := retryDial(ctx, func() (err error) {
		c, err = podchannel.DialPod(ctx, addr, agent.ClientConfig{SandboxID: sandboxID, Key: key, Logger: p.log})
		return err
	}); err != nil {
		return nil, err
	}
	if err := c.Ping(ctx); err != nil {
		c.Close()
		return nil, err
	}
	return &Sandbox{c}, nil
}

// List implements contexts.Provider: the ids on the provider's claims,
// cold Sandboxes and key Secrets (a create that died halfway leaves one
// of them; the manager's sweep destroys it), except those of creates that
// may still be under way: every replica lists every sandbox, and another
// replica's sweep must not take one whose record is not written yet. An
// object younger than the create bound (and a margin) marks its id as in
// creation; a create that takes longer has failed and cleaned up itself.
func (p *Provider) List(ctx context.Context) ([]string, error) {
	sel := metav1.ListOptions{LabelSelector: labelManaged + "=" + managedBy + "," + labelSandbox}
	young := time.Now().Add(-(p.ready + 30*time.Second))
	seen := map[string]bool{}
	creating := map[string]bool{}
	var ids []string
	for _, gvr := range []struct {
		r    dynamicResource
		what string
	}{{p.c.Resource(gvrClaim).Namespace(p.ns), "claims"}, {p.c.Resource(gvrSandbox).Namespace(p.ns), "sandboxes"}, {p.c.Resource(gvrSecret).Namespace(p.ns), "secrets"}} {
		l, err := gvr.r.List(ctx, sel)
		if err != nil {
			return nil, apiErr("list "+gvr.what, err)
		}
		for _, it := range l.Items {
			id := it.GetLabels()[labelSandbox]
			if checkID(id) != nil {
				continue
			}
			if it.GetCreationTimestamp().Time.After(young) {
				creating[id] = true
			}
			if !seen[id] {
				seen[id] = true
				ids = append(ids, id)
			}
		}
	}
	out := ids[:0]
	for _, id := range ids {
		if !creating[id] {
			out = append(out, id)
		}
	}
	return out, nil
}

type dynamicResource interface {
	List(ctx context.Context, opts metav1.ListOptions) (*unstructured.UnstructuredList, error)
}

// Destroy implements contexts.Provider: the claim, the Sandbox it bound
// (or the cold one) and the key Secret. Unknown ids are not an error.
func (p *Provider) Destroy(ctx context.Context, sandboxID string) error {
	if err := checkID(sandboxID); err != nil {
		return err
	}
	var errs []error
	del := func(r dynamic.ResourceInterface, name, what string) {
		bg := metav1.DeletePropagationBackground
		if err := r.Delete(ctx, name, metav1.DeleteOptions{PropagationPolicy: &bg}); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, apiErr("delete "+what+" "+name, err))
		}
	}
	claims := p.c.Resource(gvrClaim).Namespace(p.ns)
	if c, err := claims.Get(ctx, sandboxID, metav1.GetOptions{}); err == nil {
		// The claim owns the Sandbox it adopted, but the garbage
		// collector may be slow or absent: delete it by name too.
		if name, _, _ := unstructured.NestedString(c.Object, "status", "sandbox", "name"); name != "" {
			del(p.c.Resource(gvrSandbox).Namespace(p.ns), name, "sandbox")
		}
		del(claims, sandboxID, "claim")
	} else if !apierrors.IsNotFound(err) {
		errs = append(errs, apiErr("read the claim", err))
	}
	del(p.c.Resource(gvrSandbox).Namespace(p.ns), sandboxID, "sandbox")
	del(p.c.Resource(gvrSecret).Namespace(p.ns), sandboxID, "key secret")
	return errors.Join(errs...)
}

func secretData(s *unstructured.Unstructured, item string) ([]byte, error) {
	v, ok, _ := unstructured.NestedString(s.Object, "data", item)
	if !ok {
		return nil, fmt.Errorf("secret %s has no %q", s.GetName(), item)
	}
	b, err := base64.StdEncoding.DecodeString(v)
	if err != nil || len(b) < 16 {
		return nil, fmt.Errorf("secret %s: %q is not a key", s.GetName(), item)
	}
	return b, nil
}

// mergePrestart is the provider's boot kernels plus the spec's, once each.
func mergePrestart(base, extra []string) []string {
	out := append([]string(nil), base...)
	for _, k := range extra {
		if !contains(out, k) {
			out = append(out, k)
		}
	}
	return out
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// Sandbox is a pod's agent client, with TypeScript transpiled on the host
// as for local sandboxes (package agent/typescript).
type Sandbox struct{ *agent.Client }

// RunCode implements contexts.Sandbox.
func (s *Sandbox) RunCode(ctx context.Context, p agent.RunCodeParams, out func(agent.OutputEvent)) (*agent.RunCodeResult, error) {
	return typescript.RunCode(ctx, s.Client, p, out)
}

// firstPositive is the first of v above zero, or def.
func firstPositive[T int64 | float64](def T, v ...T) T {
	for _, x := range v {
		if x > 0 {
			return x
		}
	}
	return def
}
