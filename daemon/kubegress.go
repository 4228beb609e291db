package daemon

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/internal/logkey"
	"github.com/sandlot/sandlot/network/audit"
	"github.com/sandlot/sandlot/network/egress"
	"github.com/sandlot/sandlot/network/policy"
	"github.com/sandlot/sandlot/network/secret"
	"github.com/sandlot/sandlot/network/stack"
	"github.com/sandlot/sandlot/provider/kubernetes"
	"github.com/sandlot/sandlot/store"
	storeaudit "github.com/sandlot/sandlot/store/audit"
)

// EgressKey derives the key of sandbox pods' proxy credentials from the
// store's secrets key, which every replica has: any replica checks any
// pod's credential, and the credential opens nothing else.
func EgressKey(secretsKey []byte) []byte {
	m := hmac.New(sha256.New, secretsKey)
	m.Write([]byte("sandlot kubernetes egress proxy credentials"))
	return m.Sum(nil)
}

// kubeEgress is the egress proxy of sandbox pods on Kubernetes
// (docs/kubernetes-provider.md, "Egress"): a forward proxy on every replica that
// knows a pod by its credential and its source address, and judges,
// injects and audits as the proxy of one host.
type kubeEgress struct {
	op      *policy.Operator
	st      store.Backend
	secrets stack.SecretsFunc
	prov    *kubernetes.Provider
	px      *egress.Proxy
	ln      net.Listener
	// verify checks an E2B traffic access token (the E2B surface's), for
	// the ports route; set before the front door serves.
	verify func(ctx context.Context, sid, token string) (string, error)

	// mu guards contexts: each identified sandbox's context id, for the
	// audit rows.
	mu       sync.Mutex
	contexts map[string]string
}

var _ kubernetes.Egress = (*kubeEgress)(nil)

// newKubeEgress builds the proxy; serve starts it once the provider
// exists (the provider and the proxy need each other).
func newKubeEgress(cfg Config, st store.Backend, trail *storeaudit.Writer, log *slog.Logger) (*kubeEgress, error) {
	op, err := cfg.Network.operator()
	if err != nil {
		return nil, err
	}
	var r net.Resolver
	k := &kubeEgress{op: op, st: st, secrets: secretsFrom(st), contexts: map[string]string{}}
	k.px, err = egress.New(egress.NewRegistry(), egress.Config{
		Resolve: func(ctx context.Context, name string) ([]netip.Addr, error) {
			return r.LookupNetIP(ctx, "ip4", name)
		},
		Audit: func(ev audit.Event) {
			trail.Add(stack.StoreEvent(ev, k.contextOf(ev.SandboxID)))
		},
		Limits: cfg.Network.Limits,
		Log:    log,
	})
	if err != nil {
		return nil, err
	}
	return k, nil
}

// maxContexts bounds the sandbox-to-context map the audit reads; past it
// the map starts over (a connection identifies its sandbox again first).
const maxContexts = 1 << 16

func (k *kubeEgress) contextOf(id string) string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.contexts[id]
}

func (k *kubeEgress) remember(id, contextID string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if len(k.contexts) >= maxContexts {
		clear(k.contexts)
	}
	k.contexts[id] = contextID
}

// Prepare implements kubernetes.Egress.
func (k *kubeEgress) Prepare(ctx context.Context, tenant string, p policy.Policy) (map[string]string, error) {
	if _, err := k.op.Apply(tenant, p); err != nil {
		return nil, err
	}
	ss, err := k.secrets(ctx, tenant, p.Secrets)
	if err != nil {
		return nil, err
	}
	env := map[string]string{}
	for _, s := range ss {
		if s.Env != "" {
			env[s.Env] = s.Placeholder()
		}
	}
	return env, nil
}

// identify is the forward proxy's Identify: the pod the cluster says the
// sandbox runs in, and the policy its context's record holds now, so an
// update through any replica holds at the next connection.
func (k *kubeEgress) identify(ctx context.Context, id string) (*egress.Sandbox, []netip.Addr, error) {
	peer, err := k.prov.EgressPeer(ctx, id)
	if err != nil {
		return nil, nil, err
	}
	rec, err := k.st.Get(ctx, peer.Context)
	if err != nil {
		return nil, nil, err
	}
	switch {
	case rec.SandboxID != id || rec.TenantID != peer.Tenant:
		return nil, nil, fmt.Errorf("its context's record names another sandbox: %w", errdefs.ErrPermissionDenied)
	case rec.State != contexts.StateReady:
		return nil, nil, fmt.Errorf("its context is %s: %w", rec.State, errdefs.ErrFailedPrecondition)
	case rec.Network == nil:
		return nil, nil, fmt.Errorf("its context has no network: %w", errdefs.ErrFailedPrecondition)
	}
	eff, err := k.op.Apply(rec.TenantID, *rec.Network)
	if err != nil {
		return nil, nil, err
	}
	eff.Context = rec.ID
	k.remember(id, rec.ID)
	ss, err := k.secrets(ctx, rec.TenantID, rec.Network.Secrets)
	if err != nil {
		return nil, nil, err
	}
	list := make([]secret.Secret, len(ss))
	for i, s := range ss {
		list[i] = s.Secret
	}
	set, err := secret.NewSet(list)
	if err != nil {
		return nil, nil, err
	}
	if set.Len() > 0 && peer.CA == nil {
		return nil, nil, errors.New("a sandbox with secrets but no egress CA")
	}
	return &egress.Sandbox{ID: id, Tenant: rec.TenantID, Policy: eff, Secrets: set, CA: peer.CA}, peer.Addrs, nil
}

// serve listens on addr and serves the forward proxy with key.
func (k *kubeEgress) serve(addr string, key []byte, log *slog.Logger) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("kubernetes egress proxy on %s: %w", addr, err)
	}
	k.ln = ln
	go func() {
		if err := k.px.ServeForward(ln, egress.ForwardConfig{Key: key, Identify: k.identify}); err != nil {
			log.Error("kubernetes egress proxy stopped", slog.String(logkey.Err, err.Error()))
		}
	}()
	log.Info("kubernetes egress proxy listening", slog.String("addr", ln.Addr().String()))
	return nil
}

// Addr is where the proxy listens; nil before serve.
func (k *kubeEgress) Addr() net.Addr {
	if k == nil || k.ln == nil {
		return nil
	}
	return k.ln.Addr()
}

func (k *kubeEgress) close() {
	if k == nil {
		return
	}
	if k.ln != nil {
		k.ln.Close()
	}
	k.px.Close()
}
