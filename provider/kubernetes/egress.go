package kubernetes

import (
	"context"
	"fmt"
	"net/netip"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/network/ca"
	"github.com/sandlot/sandlot/network/egress"
	"github.com/sandlot/sandlot/network/policy"
)

// Egress is the daemon's side of a sandbox pod's network, as a create
// needs it.
type Egress interface {
	// Prepare checks p against the operator's cap for tenant and returns
	// the env the policy adds to the sandbox (its secrets' placeholders).
	Prepare(ctx context.Context, tenant string, p policy.Policy) (map[string]string, error)
}

// netSetup is what a create's network adds to the key Secret and the
// enrollment.
type netSetup struct {
	ca     map[string][]byte // the egress CA's items of the key Secret
	caCert []byte            // PEM, for the pod's trust store
	// proxied: the pod is given the egress proxy. One that is not (no
	// network, or mode none without secrets or header rules) reaches
	// nothing at all: its pod is labelled for the policy without egress.
	proxied bool
}

// network checks spec's network and adds its proxy variables to env.
// Without an egress identity (Config.EgressKey) the proxy cannot hold a
// pod to rules of its own: only none and open are given, and the rest is
// refused rather than given as open.
func (p *Provider) network(ctx context.Context, id string, spec contexts.Spec, env map[string]string) (netSetup, error) {
	n := spec.Network
	if n == nil {
		return netSetup{}, nil
	}
	mode := n.Mode.Normalize()
	if p.egressKey == nil {
		switch {
		case mode == policy.None && len(n.Secrets) == 0:
			return netSetup{}, nil
		case mode != policy.Open || len(n.Secrets) > 0 || len(n.Headers) > 0:
			return netSetup{}, fmt.Errorf("network mode %q with secrets or headers: this kubernetes provider has no egress identity and gives none or open egress only: %w", n.Mode, errdefs.ErrFailedPrecondition)
		case p.proxy == "":
			return netSetup{}, fmt.Errorf("open egress needs an egress proxy (kubernetes.egressProxy): %w", errdefs.ErrFailedPrecondition)
		}
		setProxy(env, "http://"+p.proxy)
		return netSetup{proxied: true}, nil
	}
	add, err := p.egress.Prepare(ctx, spec.Labels[contexts.LabelTenant], *n)
	if err != nil {
		return netSetup{}, err
	}
	if mode == policy.None && len(n.Secrets) == 0 && len(n.Headers) == 0 {
		// No credential, and no route to the proxy either.
		return netSetup{}, nil
	}
	for k, v := range add {
		env[k] = v
	}
	setProxy(env, egress.ProxyURL(p.egressKey, id, p.proxy))
	c, err := ca.New(id, ca.DefaultValidity)
	if err != nil {
		return netSetup{}, fmt.Errorf("sandbox %s: egress CA: %w", id, err)
	}
	keyPEM, err := c.KeyPEM()
	if err != nil {
		return netSetup{}, fmt.Errorf("sandbox %s: egress CA: %w", id, err)
	}
	return netSetup{ca: map[string][]byte{secretCACert: c.CertPEM(), secretCAKey: keyPEM}, caCert: c.CertPEM(), proxied: true}, nil
}

func setProxy(env map[string]string, url string) {
	for _, k := range []string{"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY", "all_proxy"} {
		env[k] = url
	}
}

// Peer is what the egress proxy learns of a sandbox from the cluster.
type Peer struct {
	// Tenant and Context are the create's labels, as the key Secret keeps
	// them: the caller checks them against the context's record.
	Tenant, Context string
	// Addrs are the addresses of the pod the sandbox was enrolled in.
	Addrs []netip.Addr
	// CA is the sandbox's egress CA; nil for a sandbox made without one.
	CA *ca.CA
}

// EgressPeer returns the sandbox's pod addresses, verified as Attach does
// (the pod the sandbox was enrolled in, running), and its egress CA. A
// lost or unknown sandbox is not_found.
func (p *Provider) EgressPeer(ctx context.Context, sandboxID string) (Peer, error) {
	if err := checkID(sandboxID); err != nil {
		return Peer{}, err
	}
	s, err := p.c.Resource(gvrSecret).Namespace(p.ns).Get(ctx, sandboxID, metav1.GetOptions{})
	if err != nil {
		return Peer{}, apiErr("sandbox "+sandboxID, err)
	}
	pod, err := p.currentPod(ctx, sandboxID)
	if err != nil {
		return Peer{}, err
	}
	ann := s.GetAnnotations()
	if want := ann[annPodUID]; want == "" || want != pod.uid {
		return Peer{}, fmt.Errorf("sandbox %s: its pod %s is not the one it was enrolled in (lost): %w", sandboxID, pod.name, errdefs.ErrNotFound)
	}
	peer := Peer{Tenant: ann[contexts.LabelTenant], Context: ann[contexts.LabelContext]}
	for _, ip := range pod.ips {
		if a, err := netip.ParseAddr(ip); err == nil {
			peer.Addrs = append(peer.Addrs, a.Unmap())
		}
	}
	if len(peer.Addrs) == 0 {
		return Peer{}, fmt.Errorf("sandbox %s: its pod %s has no address: %w", sandboxID, pod.name, errdefs.ErrNotFound)
	}
	cert, cerr := secretData(s, secretCACert)
	key, kerr := secretData(s, secretCAKey)
	if cerr == nil && kerr == nil {
		if peer.CA, err = ca.Parse(cert, key); err != nil {
			return Peer{}, fmt.Errorf("sandbox %s: egress CA: %w", sandboxID, err)
		}
	}
	return peer, nil
}

// labelNoEgress labels a claimed warm pod as one with no egress, so the
// NetworkPolicy without egress selects it instead of the one that lets
// sandbox pods reach the egress proxy. The pod's uid is a precondition:
// a pod that replaced it meanwhile is not labelled in its stead.
func (p *Provider) labelNoEgress(ctx context.Context, pod podRef) error {
	patch := fmt.Sprintf(`{"metadata":{"uid":%q,"labels":{%q:%q}}}`, pod.uid, labelEgress, egressNone)
	if _, err := p.c.Resource(gvrPod).Namespace(p.ns).Patch(ctx, pod.name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		return apiErr("label pod "+pod.name+" for no egress", err)
	}
	return nil
}

// labelled is the outcome of a label patched before the pod's read.
type labelled struct {
	name, uid string // the pod labelled
	err       error
}

// labelNoEgressEarly labels the pod named name (the bound Sandbox's, by
// its name) as labelNoEgress does, but before the pod's read gives its
// uid, so without that precondition: the label only takes egress away,
// and a pod that replaced the one meant loses nothing it should have. It
// reports the uid of the pod it labelled, which the create checks
// against the read's (labelNoEgress again when they differ).
func (p *Provider) labelNoEgressEarly(ctx context.Context, name string) labelled {
	patch := fmt.Sprintf(`{"metadata":{"labels":{%q:%q}}}`, labelEgress, egressNone)
	u, err := p.c.Resource(gvrPod).Namespace(p.ns).Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	if err != nil {
		return labelled{name: name, err: apiErr("label pod "+name+" for no egress", err)}
	}
	return labelled{name: name, uid: string(u.GetUID())}
}
