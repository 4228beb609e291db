package daemon

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/guard"
	"github.com/sandlot/sandlot/network"
	"github.com/sandlot/sandlot/network/audit"
	"github.com/sandlot/sandlot/network/policy"
	"github.com/sandlot/sandlot/network/ports"
	"github.com/sandlot/sandlot/network/secret"
	"github.com/sandlot/sandlot/network/stack"
	"github.com/sandlot/sandlot/store"
	storeaudit "github.com/sandlot/sandlot/store/audit"
	"github.com/sandlot/sandlot/tenant"
)

// operator builds the operator policy: the file's, else AllowOpen and
// Reachable.
func (f Network) operator() (*policy.Operator, error) {
	op := &policy.Operator{}
	if f.PolicyFile != "" {
		b, err := os.ReadFile(f.PolicyFile)
		if err != nil {
			return nil, fmt.Errorf("--network-policy: %w", err)
		}
		dec := json.NewDecoder(strings.NewReader(string(b)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(op); err != nil {
			return nil, fmt.Errorf("--network-policy %s: %v: %w", f.PolicyFile, err, errdefs.ErrInvalidArgument)
		}
		if err := op.Validate(); err != nil {
			return nil, fmt.Errorf("--network-policy %s: %w", f.PolicyFile, err)
		}
		return op, nil
	}
	op.Default.AllowOpen = f.AllowOpen
	for _, s := range strings.Split(f.Reachable, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return nil, fmt.Errorf("--network-reachable %q: %v: %w", s, err, errdefs.ErrInvalidArgument)
		}
		op.Default.Reachable = append(op.Default.Reachable, p.Masked())
	}
	return op, nil
}

// netWire is the running sandbox networking of the daemon.
type netWire struct {
	st    *stack.Stack
	ports *ports.Handler
	// authorize checks a traffic access token (set once the E2B surface
	// exists, which issues them).
	verify func(ctx context.Context, sid, token string) (string, error)
	// wake resumes a paused sandbox that asked to be woken by traffic
	// before a request reaches its port (set with verify).
	wake func(ctx context.Context, tenantID, sid string) (bool, error)
	// startErr is why Start failed; New fails on it (the operator asked
	// for networks).
	startErr error
	started  bool
	// forget drops a tenant's cached secret values from the guard.
	forget func(tenantID string)
	// guard is the ports route's guard; wire fills it in once the guard
	// and the manager exist, before the listener serves.
	guard *portsGuard
}

// portsGuard is the egress guard as the ports route applies it
// (ports.Guard): as output of the target's tenant and context, with the
// context's declared and the tenant's stored secrets.
type portsGuard struct {
	g *guard.Guard
	m *contexts.Manager
}

var _ ports.Guard = (*portsGuard)(nil)

func (p *portsGuard) ctx(ctx context.Context, t ports.Target) context.Context {
	return p.m.Masked(ctx, t.Context)
}

func (p *portsGuard) Body(ctx context.Context, t ports.Target) ports.Redactor {
	if p.g.ModeOf(ctx, t.Tenant) == guard.ModeOff {
		return nil
	}
	return p.g.File(p.ctx(ctx, t), t.Tenant)
}

func (p *portsGuard) Message(ctx context.Context, t ports.Target, binary bool) ports.Redactor {
	return p.g.Message(p.ctx(ctx, t), t.Tenant, binary)
}

func (p *portsGuard) Text(ctx context.Context, t ports.Target, s string) string {
	return p.g.Text(p.ctx(ctx, t), t.Tenant, s)
}

// knownValues is the guard's view of the tenants' stored secrets
// (guard.Config.Known): their values, masked in all output.
func knownValues(st secret.Store) func(ctx context.Context, tenantID string) ([]string, error) {
	lookup := secretsFrom(st)
	return func(ctx context.Context, tenantID string) ([]string, error) {
		ss, err := lookup(ctx, tenantID, nil)
		vals := make([]string, len(ss))
		for i, s := range ss {
			vals[i] = s.Value
		}
		return vals, err
	}
}

// portsRoute is the ports handler; nil without networks.
func (w *netWire) portsRoute() *ports.Handler {
	if w == nil {
		return nil
	}
	return w.ports
}

// newNetworks builds the stack (not started: Start needs the provider's
// sandboxes). nil when Network.Enabled is off.
func newNetworks(cfg Config, st store.Backend, trail *storeaudit.Writer, log *slog.Logger) (*netWire, error) {
	f := cfg.Network
	if !f.Enabled {
		return nil, nil
	}
	op, err := f.operator()
	if err != nil {
		return nil, err
	}
	ncfg := network.Config{StateDir: filepath.Join(cfg.DataDir, "net"), Spares: f.Spares, Log: log}
	if f.Pool != "" {
		if ncfg.Pool, err = netip.ParsePrefix(f.Pool); err != nil {
			return nil, fmt.Errorf("--network-pool %q: %v: %w", f.Pool, err, errdefs.ErrInvalidArgument)
		}
	}
	var upstream []string
	for _, s := range strings.Split(f.Upstream, ",") {
		if s = strings.TrimSpace(s); s != "" {
			upstream = append(upstream, s)
		}
	}
	w := &netWire{guard: &portsGuard{}}
	w.st, err = stack.New(stack.Config{Network: ncfg, Operator: op, Upstream: upstream,
		Audit:   func(ev audit.Event, contextID string) { trail.Add(stack.StoreEvent(ev, contextID)) },
		Secrets: secretsFrom(st), Limits: f.Limits, PortsTimeout: f.PortsTimeout, Log: log})
	if err != nil {
		return nil, err
	}
	w.ports, err = w.st.Ports(f.Domain, func(ctx context.Context, id, tenantID, token string) error {
		return w.authorize(ctx, id, tenantID, token, st)
	}, func(ctx context.Context, id, tenantID string) (bool, error) {
		if w.wake == nil {
			return false, nil
		}
		return w.wake(ctx, tenantID, id)
	}, asleepIn(st), w.guard)
	if err != nil {
		return nil, err
	}
	return w, nil
}

// asleepIn finds, for the ports route, an execution context of st
// suspended to disk that had a network (stack.Asleep): the route then
// checks the request's token against its tenant and wakes it.
func asleepIn(st contexts.Store) stack.Asleep {
	return func(ctx context.Context, id string) (string, policy.Policy, bool) {
		if _, err := uuid.Parse(id); err != nil {
			return "", policy.Policy{}, false
		}
		// Unscoped: the route has no tenant yet; the token check that
		// follows is the tenant's.
		rec, err := st.Get(tenant.WithID(ctx, ""), id)
		if err != nil || rec.State != contexts.StateReady || !rec.Suspended() || rec.Network == nil {
			return "", policy.Policy{}, false
		}
		return rec.TenantID, *rec.Network, true
	}
}

// authorize accepts the sandbox's E2B traffic access token, or an API
// key of the sandbox's tenant (for /v1 callers, who get no traffic
// token).
func (w *netWire) authorize(ctx context.Context, id, tenantID, token string, keys tenant.Store) error {
	return authorizeTraffic(ctx, w.verify, id, tenantID, token, keys)
}

// authorizeTraffic is netWire.authorize with verify (the E2B surface's
// traffic token check; nil: none).
func authorizeTraffic(ctx context.Context, verify func(ctx context.Context, sid, token string) (string, error), id, tenantID, token string, keys tenant.Store) error {
	denied := fmt.Errorf("traffic access token: %w", errdefs.ErrPermissionDenied)
	if verify != nil {
		if t, err := verify(ctx, id, token); err == nil {
			if subtle.ConstantTimeCompare([]byte(t), []byte(tenantID)) == 1 {
				return nil
			}
			return denied
		}
	}
	if !tenant.ValidKey(token) {
		return denied
	}
	t, err := keys.TenantByKeyHash(ctx, tenant.HashKey(token))
	if err != nil || t.ID != tenantID {
		return denied
	}
	return nil
}

// start takes over the networks of the sandboxes still running (ids) and
// starts the proxy and the resolver.
func (w *netWire) start(ctx context.Context, running []string) error {
	keep := make(map[string]bool, len(running))
	for _, id := range running {
		keep[id] = true
	}
	if err := w.st.Start(ctx, func(id string) bool { return keep[id] }); err != nil {
		return err
	}
	w.started = true
	return nil
}

func (w *netWire) close(ctx context.Context) error {
	if w == nil {
		return nil
	}
	if w.started {
		return w.st.Close(ctx)
	}
	return nil
}

// policyOnly checks policies against the operator's caps when the daemon
// builds no networks itself (--network off): the E2B provider still
// carries them to its cloud, within the caps.
type policyOnly struct{ op *policy.Operator }

func (p policyOnly) Check(tenant string, pol policy.Policy) error {
	_, err := p.op.Apply(tenant, pol)
	return err
}

func (p policyOnly) Update(context.Context, string, string, policy.Policy) (*policy.Effective, error) {
	return nil, fmt.Errorf("sandbox networks are not enabled on this daemon (sandlot serve --network): %w", errdefs.ErrFailedPrecondition)
}

// secretsFrom is the stack's view of the store's secrets.
func secretsFrom(st secret.Store) stack.SecretsFunc {
	return func(ctx context.Context, tenantID string, names []string) ([]stack.Secret, error) {
		got, err := st.GetSecrets(ctx, tenantID, names)
		if errors.Is(err, errdefs.ErrNotFound) {
			// A policy naming a secret the tenant does not have is a bad
			// request, not a missing sandbox.
			return nil, fmt.Errorf("%v: %w", err, errdefs.ErrInvalidArgument)
		}
		if err != nil {
			return nil, err
		}
		out := make([]stack.Secret, len(got))
		for i, s := range got {
			out[i] = stack.Secret{Secret: s.Secret, Env: s.Env}
		}
		return out, nil
	}
}

// secretsChanged reloads the secrets of tenantID's sandboxes after a
// change through /v1/secrets, off the request.
func (w *netWire) secretsChanged(tenantID string) {
	if w.forget != nil {
		w.forget(tenantID)
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		w.st.RefreshSecrets(ctx, tenantID)
	}()
}
