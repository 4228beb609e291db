package local

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/image"
	"github.com/sandlot/sandlot/image/build"
	"github.com/sandlot/sandlot/image/recipe"
	"github.com/sandlot/sandlot/network/policy"
	"github.com/sandlot/sandlot/runtime"
	"github.com/sandlot/sandlot/store/memory"
	"github.com/sandlot/sandlot/templates"
	"github.com/sandlot/sandlot/templates/builds"
	"github.com/sandlot/sandlot/templates/templatestest"
	"github.com/sandlot/sandlot/tenant"
)

// errNetStop ends a build step at its network: the test needs what the
// step asked for, not a network. Its sentence is public, so the build's
// reason shows it (a server fault's chain would go to the log only).
var errNetStop = errdefs.Public(fmt.Errorf("the test's network stops here: %w", errdefs.ErrUnavailable), "the test's network stops here")

// capNetworks is a Networks that checks policies against a real operator
// policy, as network/stack does, and records every Setup.
type capNetworks struct {
	op *policy.Operator
	mu sync.Mutex
	// setups are the Setups asked for: tenant and allow rules.
	setups []netSetup
}

type netSetup struct {
	tenant string
	allow  []string
}

func (n *capNetworks) Setup(ctx context.Context, sandboxID, tenant, contextID string, p policy.Policy) (*runtime.Network, map[string]string, error) {
	var allow []string
	for _, r := range p.Allow {
		allow = append(allow, r.String())
	}
	n.mu.Lock()
	n.setups = append(n.setups, netSetup{tenant: tenant, allow: allow})
	n.mu.Unlock()
	if _, err := n.op.Apply(tenant, p); err != nil {
		return nil, nil, err
	}
	return nil, nil, errNetStop
}

func (n *capNetworks) Teardown(ctx context.Context, sandboxID string) error { return nil }

func (n *capNetworks) Check(tenant string, p policy.Policy) error {
	_, err := n.op.Apply(tenant, p)
	return err
}

func (n *capNetworks) taken() []netSetup {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := n.setups
	n.setups = nil
	return out
}

// TestWallBuildNetworkCap: a tenant's build runs its RUN steps with at
// most what the tenant's network cap allows, intersected with the
// daemon's build allowlist (deb.debian.org, security.debian.org,
// registry.npmjs.org): a cap bounded to *.npmjs.org gets npm's registry
// only, a cap of one rule gets one rule, a cap that allows none of the
// allowlist gets no network (and its step runs), and an open cap gets the
// allowlist, no more. Before, every tenant's step asked for the whole
// build allowlist as no tenant at all (the default cap): a narrower
// tenant got what its cap forbids, or its build failed.
func TestWallBuildNetworkCap(t *testing.T) {
	ctx := context.Background()
	s := busyboxStore(t)
	if _, err := s.Put(ctx, templatestest.Image(t, "base"), image.PutOptions{Name: templates.Default}); err != nil {
		t.Fatal(err)
	}
	nets := &capNetworks{op: &policy.Operator{Tenants: map[string]policy.TenantCap{
		"narrow": {Domains: []string{"*.npmjs.org"}},
		"one":    {MaxRules: 1},
		"closed": {Domains: []string{"pkgs.internal.example"}},
		"open":   {AllowOpen: true},
	}}}
	p := newProviderWith(t, Config{Runtime: "crun", Images: s, Networks: nets})
	st := memory.New()
	for id := range nets.op.Tenants {
		if err := st.CreateTenant(ctx, &tenant.Tenant{ID: id}, tenant.HashKey("k-"+id)); err != nil {
			t.Fatal(err)
		}
	}
	cat := templates.New(templates.Config{Store: st, Images: s})
	allow, err := BuildNetwork(DefaultBuildAllow)
	if err != nil {
		t.Fatal(err)
	}
	q := builds.New(builds.Config{Builder: build.New(build.Config{Store: s, Runner: p.BuildRunner(BuildConfig{Network: allow})}),
		Images: s, Catalog: cat})
	rec, err := recipe.ParseDockerfile(strings.NewReader("FROM default\nRUN echo step\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		tenant string
		want   []string // the step's allow rules; nil: no network
	}{
		{"narrow", []string{"registry.npmjs.org"}},
		{"one", DefaultBuildAllow[:1]},
		{"closed", nil},
		{"open", DefaultBuildAllow},
	} {
		t.Run(tc.tenant, func(t *testing.T) {
			b, err := q.Request(ctx, tc.tenant, builds.Request{Spec: templates.BuildSpec{Name: "app"}, Lease: true})
			if err != nil {
				t.Fatal(err)
			}
			if err := q.Start(ctx, b, rec); err != nil {
				t.Fatal(err)
			}
			snap := waitBuild(t, b)
			got := nets.taken()
			if tc.want == nil {
				if len(got) != 0 || snap.Status != builds.Ready {
					t.Fatalf("a step of a tenant whose cap allows none of the allowlist: networks %+v, build %+v", got, snap)
				}
				return
			}
			if len(got) != 1 || got[0].tenant != tc.tenant || !slices.Equal(got[0].allow, tc.want) {
				t.Fatalf("the step's network: %+v, want one for %s allowing %v (build %+v)", got, tc.tenant, tc.want, snap)
			}
			if snap.Status != builds.Error || !strings.Contains(snap.Reason, "the test's network stops here") {
				t.Errorf("build %+v, want it stopped at the test's network", snap)
			}
		})
	}
}

// waitBuild polls b until it ends (bounded).
func waitBuild(t *testing.T, b *builds.Build) builds.Snapshot {
	t.Helper()
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if s := b.Snapshot(0); s.Status == builds.Ready || s.Status == builds.Error {
			return s
		}
	}
	t.Fatal("the build did not end")
	return builds.Snapshot{}
}
