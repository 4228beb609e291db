package stack

import (
	"context"
	"log/slog"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/internal/testenv"
	"github.com/sandlot/sandlot/network"
	"github.com/sandlot/sandlot/network/audit"
	"github.com/sandlot/sandlot/network/nettest"
	"github.com/sandlot/sandlot/network/policy"
	"github.com/sandlot/sandlot/network/secret"
	"github.com/sandlot/sandlot/provider/local"
	"github.com/sandlot/sandlot/provider/local/localtest"
)

func TestMain(m *testing.M) { nettest.Main(m) }

// The runtimes every sandbox test covers.
var kinds = []string{"crun", "runc", "runsc"}

// env is the daemon's sandbox networking on this host, in the private
// namespace nettest.Main made, in front of a fake internet: the stack
// (manager, proxy, resolver) and the tenants' secrets.
type env struct {
	world *nettest.World
	st    *Stack
	cfg   Config
	logs  *testenv.Buffer

	mu      sync.Mutex
	secrets map[string]Secret // by tenant + "/" + name
	events  []audit.Event
	ctxIDs  []string
}

// newEnv starts a stack; spares is Config.Network.Spares.
func newEnv(t testing.TB, spares int) *env {
	t.Helper()
	return newEnvWith(t, spares, nil)
}

// newEnvWith is newEnv with mod applied to the configuration before the
// stack starts.
func newEnvWith(t testing.TB, spares int, mod func(*Config)) *env {
	t.Helper()
	nettest.Require(t)
	e := &env{world: nettest.NewWorld(t), logs: &testenv.Buffer{}, secrets: map[string]Secret{}}
	log := slog.New(slog.NewTextHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	e.cfg = Config{
		Network: network.Config{StateDir: t.TempDir(), NetnsDir: t.TempDir(), Spares: spares},
		Operator: &policy.Operator{
			Default: policy.TenantCap{AllowOpen: true},
			Tenants: map[string]policy.TenantCap{"closed": {}},
		},
		Upstream: []string{nettest.DNSAddr.String()},
		Secrets:  e.lookupSecrets,
		Audit: func(ev audit.Event, contextID string) {
			e.mu.Lock()
			e.events = append(e.events, ev)
			e.ctxIDs = append(e.ctxIDs, contextID)
			e.mu.Unlock()
		},
		RootCAs: e.world.CA,
		Log:     log,
	}
	if mod != nil {
		mod(&e.cfg)
	}
	e.st = e.start(t)
	return e
}

// start starts a stack on e's configuration (again, for a restart).
func (e *env) start(t testing.TB) *Stack {
	t.Helper()
	st, err := New(e.cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := st.Start(ctx, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		st.Close(ctx)
		st.Manager().Purge(ctx)
	})
	return st
}

func (e *env) addSecret(tenant, name, env string, hosts []string, value string) Secret {
	s := Secret{Secret: secret.Secret{ID: strings.ToLower(name) + "-0123456789ab", Hosts: hosts, Value: value}, Env: env}
	e.mu.Lock()
	e.secrets[tenant+"/"+name] = s
	e.mu.Unlock()
	return s
}

func (e *env) lookupSecrets(ctx context.Context, tenant string, names []string) ([]Secret, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []Secret
	if names == nil {
		for k, s := range e.secrets {
			if strings.HasPrefix(k, tenant+"/") {
				out = append(out, s)
			}
		}
		return out, nil
	}
	for _, n := range names {
		s, ok := e.secrets[tenant+"/"+n]
		if !ok {
			return nil, errdefs.ErrInvalidArgument
		}
		out = append(out, s)
	}
	return out, nil
}

func (e *env) auditEvents() []audit.Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]audit.Event(nil), e.events...)
}

// newProvider is a local provider on runtime kind whose sandboxes get
// their networks from st.
func newProvider(t testing.TB, kind string, st *Stack) *local.Provider {
	t.Helper()
	return localtest.New(t, local.Config{Runtime: kind, Networks: st})
}

var _ local.Networks = (*Stack)(nil)

// create makes a sandbox of tenant with policy pol (nil: no network).
func create(t testing.TB, p *local.Provider, tenant string, pol *policy.Policy) *agent.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	sb, err := p.Create(ctx, contexts.Spec{Network: pol, Labels: map[string]string{contexts.LabelTenant: tenant, contexts.LabelContext: "ctx-" + tenant}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sb.Close() })
	return sb.(*local.Sandbox).Client
}

// sh runs a shell command in the sandbox and returns stdout+stderr and
// the exit code.
func sh(t testing.TB, c *agent.Client, cmd string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	r, err := c.Exec(ctx, agent.ExecParams{Shell: cmd, TimeoutMs: 60000}, nil)
	if err != nil {
		t.Fatalf("exec %q: %v", cmd, err)
	}
	return r.Stdout + r.Stderr, r.ExitCode
}

func rules(ss ...string) []policy.Rule {
	out := make([]policy.Rule, len(ss))
	for i, s := range ss {
		out[i] = policy.MustRule(s)
	}
	return out
}

func addr(s string) netip.Addr { return netip.MustParseAddr(s) }
