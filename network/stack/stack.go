// Package stack is the daemon's sandbox networking put together: the
// network Manager (namespaces, veths, kernel rules, spares), the egress
// proxy, the resolver, the operator's caps and the tenants' secrets. The
// local provider asks it for a sandbox's network (Setup, Teardown), the
// edges ask it what a policy may be (Check) and change one (Update), and
// the ports route asks it where a sandbox is (Target). Every connection
// and question the proxy and the resolver handle goes to Config.Audit.
//
// docs/network.md describes the design; this package only wires it.
package stack

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/network"
	"github.com/sandlot/sandlot/network/audit"
	"github.com/sandlot/sandlot/network/egress"
	"github.com/sandlot/sandlot/network/netns"
	"github.com/sandlot/sandlot/network/policy"
	"github.com/sandlot/sandlot/network/ports"
	"github.com/sandlot/sandlot/network/resolver"
	"github.com/sandlot/sandlot/network/secret"
	"github.com/sandlot/sandlot/runtime"
)

// Secret is one of a tenant's secrets as a sandbox gets it.
type Secret struct {
	secret.Secret
	// Env is the environment variable that holds the placeholder in the
	// sandbox; "" sets none (the placeholder can still be written out).
	Env string
}

// SecretsFunc returns the named secrets of tenant, with their values; nil
// names: all of them. A name the tenant has no secret of fails with
// errdefs.ErrInvalidArgument.
type SecretsFunc func(ctx context.Context, tenant string, names []string) ([]Secret, error)

// AuditFunc receives the events of the proxy and the resolver with the
// execution context of the sandbox ("" when unknown), within each
// sandbox's audit rate (Config.AuditRate; past it, a ProtoLimited event
// counts the rest). It is called on the connection's goroutine and must
// not block (serve hands events to the store's audit.Writer).
type AuditFunc func(ev audit.Event, contextID string)

// Config configures a Stack.
type Config struct {
	// Network configures the Manager; StateDir is required.
	Network network.Config
	// Operator caps what tenants may ask for; nil: the zero caps
	// (allowlists of public destinations, no mode open).
	Operator *policy.Operator
	// Upstream are the name servers ("ip:port") the resolver asks;
	// default: those of the host's /etc/resolv.conf.
	Upstream []string
	// Secrets looks tenants' secrets up; nil refuses policies that name any.
	Secrets SecretsFunc
	// Audit receives the proxy's and the resolver's events; nil: none.
	Audit AuditFunc
	// AuditRate is how many events a second one sandbox may send to
	// Audit, in bursts of AuditBurst; past it they are counted (0:
	// DefaultAuditRate and DefaultAuditBurst; a negative rate: no limit).
	AuditRate  float64
	AuditBurst int
	// DNSRate is how many questions a second one sandbox may ask the
	// resolver, in bursts of DNSBurst; past it they are refused (0:
	// resolver.DefaultRate and resolver.DefaultBurst; negative: no limit).
	DNSRate  float64
	DNSBurst int
	// Limits bound the descriptors the egress proxy holds per sandbox,
	// per tenant and in all, and the process's watermark (zero fields:
	// egress.Limits' defaults).
	Limits egress.Limits
	// PortsTimeout bounds the ports route's wait for a sandbox's answer
	// (ports.Config.ResponseTimeout; zero: its default).
	PortsTimeout time.Duration
	// RootCAs verifies servers on the TLS-terminating path (nil: the
	// host's trust store). For tests.
	RootCAs *x509.CertPool
	Log     *slog.Logger
}

// Stack is the running sandbox networking. Its methods are safe for
// concurrent use.
type Stack struct {
	cfg Config
	mgr *network.Manager
	reg *egress.Registry
	res *resolver.Resolver
	px  *egress.Proxy
	log *slog.Logger
	lim *auditLimiter

	// domain is the ports domain, set by Ports (before Start); "" until
	// then, and sandboxes are not told of a route.
	domain string

	pl, dl net.Listener
	pc     net.PacketConn
	served sync.WaitGroup
	warns  []string
}

// New validates cfg and assembles the stack. Nothing on the host changes
// until Start.
func New(cfg Config) (*Stack, error) {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Operator == nil {
		cfg.Operator = &policy.Operator{}
	}
	if err := cfg.Operator.Validate(); err != nil {
		return nil, fmt.Errorf("network policy of the operator: %w", err)
	}
	if cfg.Network.Log == nil {
		cfg.Network.Log = cfg.Log
	}
	mgr, err := network.New(cfg.Network)
	if err != nil {
		return nil, err
	}
	s := &Stack{cfg: cfg, mgr: mgr, reg: egress.NewRegistry(), log: cfg.Log, lim: newAuditLimiter(cfg.AuditRate, cfg.AuditBurst)}
	s.res, err = resolver.New(resolver.Config{
		Lookup: func(src netip.Addr) (resolver.Sandbox, bool) {
			sb, ok := s.reg.Lookup(src)
			if !ok {
				return resolver.Sandbox{}, false
			}
			return resolver.Sandbox{ID: sb.ID, Tenant: sb.Tenant, Policy: sb.Policy}, true
		},
		Upstream: cfg.Upstream, Internal: mgr.Internal, Audit: s.audit, Log: cfg.Log,
		Rate: cfg.DNSRate, Burst: cfg.DNSBurst,
	})
	if err != nil {
		return nil, err
	}
	s.px, err = egress.New(s.reg, egress.Config{
		Resolve: s.res.LookupIP, Names: s.res.NameFor, Internal: mgr.Internal,
		RootCAs: cfg.RootCAs, Audit: s.audit, Log: cfg.Log, Limits: cfg.Limits,
	})
	if err != nil {
		return nil, err
	}
	return s, nil
}

// Manager is the network Manager (for its addresses, and for tests).
func (s *Stack) Manager() *network.Manager { return s.mgr }

// Warnings are the problems Start found that do not stop it (mode open
// allowed while the host does not forward), for the operator.
func (s *Stack) Warnings() []string { return s.warns }

// Start prepares the host, takes over the networks of the sandboxes keep
// accepts (the ones still running after a daemon restart; nil keeps all)
// and removes the others, and starts the proxy and the resolver.
func (s *Stack) Start(ctx context.Context, keep func(sandboxID string) bool) error {
	restored, err := s.mgr.Start(ctx, keep)
	if err != nil {
		return err
	}
	for _, n := range restored {
		if err := s.register(ctx, n); err != nil {
			// The sandbox keeps its network; only its secrets are missing.
			s.log.Warn("network: restoring a sandbox's secrets failed", "sandbox", n.SandboxID, "err", err)
			s.reg.Register(n.Addr, &egress.Sandbox{ID: n.SandboxID, Tenant: n.Policy.Tenant, Policy: n.Policy, CA: n.CA})
		}
	}
	if s.pl, err = netns.Listen(ctx, "", "tcp4", s.mgr.ProxyAddr().String()); err != nil {
		return fmt.Errorf("egress proxy: %w", err)
	}
	if s.pc, err = netns.ListenPacket(ctx, "", "udp4", s.mgr.DNSAddr().String()); err != nil {
		s.pl.Close()
		return fmt.Errorf("resolver: %w", err)
	}
	if s.dl, err = netns.Listen(ctx, "", "tcp4", s.mgr.DNSAddr().String()); err != nil {
		s.pl.Close()
		s.pc.Close()
		return fmt.Errorf("resolver: %w", err)
	}
	s.served.Add(1)
	go func() {
		defer s.served.Done()
		if err := s.px.Serve(s.pl); err != nil {
			s.log.Error("egress proxy stopped", "err", err)
		}
	}()
	s.res.Serve(s.pc, s.dl)
	s.checkForwarding()
	lim := s.px.Limits()
	s.log.Info("sandbox networks ready", "pool", s.mgr.Pool().String(), "gateway", s.mgr.Gateway().String(),
		"restored", len(restored), "spares", s.cfg.Network.Spares, "fdsPerSandbox", lim.PerSandbox,
		"fdsPerTenant", lim.PerTenant, "fds", lim.Total, "fdWatermark", lim.Watermark)
	return nil
}

// ipForward is the host's IPv4 forwarding switch.
var ipForward = "/proc/sys/net/ipv4/ip_forward"

// checkForwarding warns when a tenant may ask for mode open while the
// host does not forward: open sandboxes would reach nothing but what the
// proxy carries (TCP), silently. The daemon never changes host sysctls.
func (s *Stack) checkForwarding() {
	op := s.cfg.Operator
	open := op.Default.AllowOpen
	for _, c := range op.Tenants {
		open = open || c.AllowOpen
	}
	if !open {
		return
	}
	b, err := os.ReadFile(ipForward)
	if err == nil && strings.TrimSpace(string(b)) == "1" {
		return
	}
	w := "network mode open is allowed but the host does not forward IPv4 (net.ipv4.ip_forward=0): open sandboxes get TCP through the proxy, and their UDP and ICMP go nowhere; set net.ipv4.ip_forward=1 (sysctl -w net.ipv4.ip_forward=1, and in /etc/sysctl.d) to give them the rest"
	s.warns = append(s.warns, w)
	s.log.Warn(w)
}

// Close stops the proxy, the resolver and the spare builder. Sandbox
// networks stay: they outlive the daemon, and the next Start takes them
// over.
func (s *Stack) Close(ctx context.Context) error {
	var errs []error
	if s.pl != nil {
		errs = append(errs, s.pl.Close())
	}
	s.px.Close()
	errs = append(errs, s.res.Shutdown(ctx))
	s.served.Wait()
	for _, ev := range s.lim.flush() {
		s.record(ev)
	}
	errs = append(errs, s.mgr.Close(ctx))
	return errors.Join(ignoreClosed(errs)...)
}

func ignoreClosed(errs []error) []error {
	out := errs[:0]
	for _, e := range errs {
		if e != nil && !errors.Is(e, net.ErrClosed) {
			out = append(out, e)
		}
	}
	return out
}

// Check applies the operator's caps to a policy a tenant asks for, as
// Setup and Update will: the edges call it before they create anything,
// so a refused policy is a 400 or 403 and nothing else.
func (s *Stack) Check(tenant string, p policy.Policy) error {
	_, err := s.cfg.Operator.Apply(tenant, p)
	if err == nil && len(p.Secrets) > 0 && s.cfg.Secrets == nil {
		err = fmt.Errorf("secrets are not enabled on this daemon: %w", errdefs.ErrFailedPrecondition)
	}
	return err
}

// AllowsOpen reports whether tenant's cap allows mode open with public
// ports: what E2B's own default for a create without a network needs
// (serve's --e2b-internet).
func (s *Stack) AllowsOpen(tenant string) bool {
	return s.Check(tenant, policy.Policy{Mode: policy.Open, Ingress: policy.Ingress{Public: true}}) == nil
}

// Setup builds sandboxID's network under p for tenant (implementing
// provider/local's Networks). The environment it returns maps each
// granted secret's variable to its placeholder. On error nothing is left.
func (s *Stack) Setup(ctx context.Context, sandboxID, tenant, contextID string, p policy.Policy) (*runtime.Network, map[string]string, error) {
	eff, err := s.cfg.Operator.Apply(tenant, p)
	if err != nil {
		return nil, nil, err
	}
	eff.Context = contextID
	secrets, err := s.secrets(ctx, tenant, p.Secrets)
	if err != nil {
		return nil, nil, err
	}
	set, err := secretSet(secrets)
	if err != nil {
		return nil, nil, err
	}
	n, err := s.mgr.Setup(ctx, sandboxID, eff)
	if err != nil {
		return nil, nil, err
	}
	s.reg.Register(n.Addr, &egress.Sandbox{ID: sandboxID, Tenant: tenant, Policy: eff, Secrets: set, CA: n.CA})
	env := map[string]string{}
	for _, sec := range secrets {
		if sec.Env != "" {
			env[sec.Env] = sec.Placeholder()
		}
	}
	rn := &runtime.Network{Path: n.Path, ResolvConf: n.ResolvConf(), CACerts: n.CA.CertPEM()}
	if s.domain != "" {
		f, err := ports.ChromiumRules(s.domain, n.Gateway)
		if err != nil { // the domain was checked when the stack was made
			s.Teardown(ctx, sandboxID)
			return nil, nil, err
		}
		rn.Files = append(rn.Files, f)
	}
	return rn, env, nil
}

// Teardown removes sandboxID's network (after its processes are gone).
func (s *Stack) Teardown(ctx context.Context, sandboxID string) error {
	if n, ok := s.mgr.Get(sandboxID); ok {
		s.reg.Unregister(n.Addr)
		s.px.Recheck(sandboxID)
	}
	s.res.Forget(sandboxID)
	if ev := s.lim.forget(sandboxID); ev != nil {
		s.record(*ev)
	}
	return s.mgr.Teardown(ctx, sandboxID)
}

// Update replaces the policy of a running sandbox's network, and closes
// the proxied connections the new policy forbids. A sandbox
// created without a network cannot be given one
// (errdefs.ErrFailedPrecondition): its namespace is fixed at create.
// Variables for newly granted secrets are not added to its environment;
// their placeholders work wherever the sandbox writes them.
func (s *Stack) Update(ctx context.Context, sandboxID, tenant string, p policy.Policy) (*policy.Effective, error) {
	old, ok := s.mgr.Get(sandboxID)
	if !ok {
		return nil, fmt.Errorf("the sandbox was created without a network of its own, so its network cannot be changed: %w", errdefs.ErrFailedPrecondition)
	}
	eff, err := s.cfg.Operator.Apply(tenant, p)
	if err != nil {
		return nil, err
	}
	eff.Context = old.Policy.Context
	secrets, err := s.secrets(ctx, tenant, p.Secrets)
	if err != nil {
		return nil, err
	}
	set, err := secretSet(secrets)
	if err != nil {
		return nil, err
	}
	n, err := s.mgr.Update(ctx, sandboxID, eff)
	if err != nil {
		return nil, err
	}
	s.reg.Register(n.Addr, &egress.Sandbox{ID: sandboxID, Tenant: tenant, Policy: eff, Secrets: set, CA: n.CA})
	// A stricter policy also ends the open connections it forbids.
	s.px.Recheck(sandboxID)
	return eff, nil
}

// Claim gives the network of a warm sandbox, set up before it had an
// owner (contexts.PoolSpec), to tenant's execution context contextID,
// with the tenant's own view of p: its caps, secrets and audit events,
// and the ports route's lookup by the context's id.
func (s *Stack) Claim(ctx context.Context, sandboxID, tenant, contextID string, p policy.Policy) error {
	old, ok := s.mgr.Get(sandboxID)
	if !ok {
		return fmt.Errorf("warm sandbox %s has no network: %w", sandboxID, errdefs.ErrFailedPrecondition)
	}
	if old.Policy.Context != "" {
		return fmt.Errorf("the network of sandbox %s belongs to context %s: %w", sandboxID, old.Policy.Context, errdefs.ErrFailedPrecondition)
	}
	eff, err := s.cfg.Operator.Apply(tenant, p)
	if err != nil {
		return err
	}
	eff.Context = contextID
	secrets, err := s.secrets(ctx, tenant, p.Secrets)
	if err != nil {
		return err
	}
	set, err := secretSet(secrets)
	if err != nil {
		return err
	}
	n, err := s.mgr.Update(ctx, sandboxID, eff)
	if err != nil {
		return err
	}
	s.reg.Register(n.Addr, &egress.Sandbox{ID: sandboxID, Tenant: tenant, Policy: eff, Secrets: set, CA: n.CA})
	return nil
}

// Policy returns the policy a sandbox's network enforces.
func (s *Stack) Policy(sandboxID string) (*policy.Effective, bool) {
	n, ok := s.mgr.Get(sandboxID)
	if !ok {
		return nil, false
	}
	return n.Policy, true
}

// Target is where the ports route reaches a sandbox; a sandbox without a
// network has no address (the route answers 502).
func (s *Stack) Target(sandboxID string) ports.Target {
	n, ok := s.mgr.Get(sandboxID)
	if !ok {
		return ports.Target{}
	}
	return ports.Target{Addr: n.Addr, Ingress: n.Policy.Policy.Ingress, Tenant: n.Policy.Tenant, Context: n.Policy.Context}
}

// RefreshSecrets loads the secrets of tenant's sandboxes again, after the
// tenant changed or deleted one: the next connection uses the new value,
// and a deleted secret is no longer injected.
func (s *Stack) RefreshSecrets(ctx context.Context, tenant string) {
	for _, n := range s.mgr.List() {
		if n.Policy.Tenant != tenant {
			continue
		}
		if err := s.register(ctx, n); err != nil {
			s.log.Warn("network: refreshing a sandbox's secrets failed", "sandbox", n.SandboxID, "err", err)
		}
	}
}

// register (re)registers a network with the proxy, loading its secrets. A
// secret deleted meanwhile is left out.
func (s *Stack) register(ctx context.Context, n *network.Net) error {
	var secrets []Secret
	var errs []error
	names := n.Policy.Policy.Secrets
	if len(names) == 0 {
		var err error
		secrets, err = s.secrets(ctx, n.Policy.Tenant, nil)
		errs = append(errs, err)
	}
	for _, name := range names {
		got, err := s.secrets(ctx, n.Policy.Tenant, []string{name})
		if err != nil {
			errs = append(errs, err)
			continue
		}
		secrets = append(secrets, got...)
	}
	set, err := secretSet(secrets)
	if err != nil {
		return err
	}
	s.reg.Register(n.Addr, &egress.Sandbox{ID: n.SandboxID, Tenant: n.Policy.Tenant, Policy: n.Policy, Secrets: set, CA: n.CA})
	return errors.Join(errs...)
}

// secrets loads the named secrets of tenant; no names: all of them (a
// policy that names none gets every secret of its tenant: placeholders are
// harmless, and a value still only travels to its hosts, when the policy
// lets the sandbox reach them).
func (s *Stack) secrets(ctx context.Context, tenant string, names []string) ([]Secret, error) {
	if s.cfg.Secrets == nil {
		if len(names) == 0 {
			return nil, nil
		}
		return nil, fmt.Errorf("secrets are not enabled on this daemon: %w", errdefs.ErrFailedPrecondition)
	}
	if len(names) == 0 {
		names = nil
	}
	return s.cfg.Secrets(ctx, tenant, names)
}

func secretSet(ss []Secret) (*secret.Set, error) {
	if len(ss) == 0 {
		return nil, nil
	}
	plain := make([]secret.Secret, len(ss))
	for i, s := range ss {
		plain[i] = s.Secret
	}
	return secret.NewSet(plain)
}

// audit hands an event to Config.Audit within the sandbox's audit rate.
func (s *Stack) audit(ev audit.Event) {
	if s.cfg.Audit == nil {
		return
	}
	ok, suppressed := s.lim.allow(ev)
	if suppressed != nil {
		s.record(*suppressed)
	}
	if ok {
		s.record(ev)
	}
}

// record hands an event to Config.Audit with the sandbox's context.
func (s *Stack) record(ev audit.Event) {
	if s.cfg.Audit == nil {
		return
	}
	ctxID := ""
	if eff, ok := s.Policy(ev.SandboxID); ok {
		ctxID = eff.Context
	}
	s.cfg.Audit(ev, ctxID)
}

// Find returns the network of a sandbox by its id or by the id of the
// execution context it serves (the E2B sandboxID, which the ports route
// carries).
func (s *Stack) Find(id string) (*network.Net, bool) {
	if n, ok := s.mgr.Get(id); ok {
		return n, true
	}
	for _, n := range s.mgr.List() {
		if n.Policy.Context == id {
			return n, true
		}
	}
	return nil, false
}
