package daemon

import (
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/internal/testenv"
	"github.com/sandlot/sandlot/store"
	"github.com/sandlot/sandlot/tenant"
)

// needRuntime skips (fails in CI) without what a daemon with real
// sandboxes needs: root, the OCI runtimes and the agent binary.
func needRuntime(t *testing.T) {
	t.Helper()
	testenv.RequireRoot(t)
	testenv.RequireBinary(t, "crun")
	testenv.RequireBinary(t, "runc")
	t.Setenv("SANDLOT_AGENT_BIN", testenv.AgentBinary(t))
}

// testDaemon is New over cfg and a store, served on a loopback port, with
// one tenant whose key is key.
type testDaemon struct {
	*Daemon
	url, key string
	st       store.Backend
	stopOnce sync.Once
	stopFn   func()
}

// start builds the daemon over cfg and the store at storeURL ("":
// memory:), creates a tenant and serves until stop (also at the test's
// end), which ends the tenant's contexts first.
func start(t *testing.T, storeURL string, cfg Config) *testDaemon {
	t.Helper()
	ctx := context.Background()
	if storeURL == "" {
		storeURL = "memory:"
	}
	st, err := store.Open(ctx, storeURL)
	if err != nil {
		t.Fatal(err)
	}
	key, err := tenant.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	tn := &tenant.Tenant{Name: "test", KeyPrefix: tenant.Prefix(key), GuardMode: tenant.GuardEnforce}
	if err := st.CreateTenant(ctx, tn, tenant.HashKey(key)); err != nil {
		t.Fatal(err)
	}
	d, err := New(ctx, cfg, st)
	if err != nil {
		st.Close()
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- d.Serve(sctx, ln) }()
	td := &testDaemon{Daemon: d, url: "http://" + ln.Addr().String(), key: key, st: st}
	td.stopFn = func() {
		cctx, ccancel := context.WithTimeout(context.Background(), time.Minute)
		defer ccancel()
		recs, _ := d.Manager().List(cctx, contexts.Filter{TenantID: tn.ID, States: []contexts.State{contexts.StateCreating, contexts.StateReady}, Limit: 1000})
		for _, r := range recs {
			d.Manager().Terminate(cctx, tn.ID, r.ID, contexts.ReasonDeleted)
		}
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("serve: %v", err)
		}
		if err := d.Close(cctx); err != nil {
			t.Errorf("close: %v", err)
		}
		st.Close()
	}
	t.Cleanup(td.stop)
	return td
}

func (td *testDaemon) stop() { td.stopOnce.Do(td.stopFn) }
