package contexts_test

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/internal/testenv"
	"github.com/sandlot/sandlot/provider/local"
	"github.com/sandlot/sandlot/store"
	"github.com/sandlot/sandlot/store/postgres/pgtest"
)

// realDaemon is one daemon of a multi-daemon test: its own store
// connection, its own local state dir and a manager with its own node id.
type realDaemon struct {
	t     *testing.T
	ctx   context.Context
	node  string
	url   string
	dir   string
	agent string
	p     *local.Provider
	store contexts.Store
	m     *contexts.Manager
}

func sharedStoreURL(t *testing.T, backend string) string {
	t.Helper()
	if backend == "sqlite" {
		return "sqlite://" + filepath.Join(t.TempDir(), "sandlot.db")
	}
	return pgtest.SchemaURL(t)
}

// newRealDaemon starts a daemon named node over the store at url.
func newRealDaemon(t *testing.T, url, node string) *realDaemon {
	t.Helper()
	testenv.RequireOCIRuntime(t)
	dir, err := os.MkdirTemp("", "sln-") // short: socket paths are bounded
	if err != nil {
		t.Fatal(err)
	}
	d := &realDaemon{t: t, ctx: context.Background(), node: node, url: url, dir: dir, agent: testenv.AgentBinary(t)}
	t.Cleanup(func() {
		p, err := local.New(local.Config{StateDir: dir, AgentPath: d.agent, Logger: slog.New(slog.DiscardHandler)})
		if err == nil {
			ids, _ := p.List(context.Background())
			for _, id := range ids {
				p.Destroy(context.Background(), id)
			}
		}
		os.RemoveAll(dir)
	})
	d.start()
	return d
}

// start opens the store, the provider and the manager (a daemon start:
// Start reconciles).
func (d *realDaemon) start() {
	d.t.Helper()
	st, err := store.Open(d.ctx, d.url)
	if err != nil {
		d.t.Fatalf("open store: %v", err)
	}
	d.store = st
	d.p, err = local.New(local.Config{StateDir: d.dir, AgentPath: d.agent, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		d.t.Fatalf("local provider: %v", err)
	}
	d.m = contexts.NewManager(st, d.p, contexts.Config{Node: d.node, PoolSize: 1, CleanupInterval: time.Hour})
	if err := d.m.Start(d.ctx); err != nil {
		d.t.Fatal(err)
	}
	m := d.m
	d.t.Cleanup(func() { m.Close(context.Background()); st.Close() })
}

// stop detaches the manager (sandboxes keep running) and closes the store.
func (d *realDaemon) stop() {
	d.t.Helper()
	if err := d.m.Close(d.ctx); err != nil {
		d.t.Fatal(err)
	}
	d.store.Close()
}

func (d *realDaemon) exec(id contexts.Identity, code string) (*contexts.ExecuteResult, error) {
	ctx, cancel := context.WithTimeout(d.ctx, 2*time.Minute)
	defer cancel()
	return d.m.Execute(ctx, id, contexts.ExecuteRequest{Language: "python", Code: code, Timeout: time.Minute}, nil)
}

func (d *realDaemon) mustExec(id contexts.Identity, code string) *contexts.ExecuteResult {
	d.t.Helper()
	res, err := d.exec(id, code)
	if err != nil {
		d.t.Fatalf("%s: Execute(%v, %q): %v", d.node, id, code, err)
	}
	return res
}

func (d *realDaemon) cleanup() {
	d.t.Helper()
	if _, err := d.m.Cleanup(d.ctx); err != nil {
		d.t.Fatalf("%s: cleanup: %v", d.node, err)
	}
}

// TestRealTwoDaemonsOneStore: two daemons (their own store connections,
// state dirs and node ids) on one SQLite file and on one Postgres database.
// Neither's start (reconcile), cleanup passes or restart end the other's
// contexts or kill its sandboxes or warm pool; each keeps its state. A call
// that reaches one daemon for a conversation the other serves is refused
// with the owner's name, and the context is not recreated.
func TestRealTwoDaemonsOneStore(t *testing.T) {
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			url := sharedStoreURL(t, backend)
			a := newRealDaemon(t, url, "node-a")
			c1, c2 := ident("t1", "c1", "main"), ident("t1", "c2", "main")
			r1 := a.mustExec(c1, "x = 41")

			b := newRealDaemon(t, url, "node-b") // B's start reconciles the shared store
			r2 := b.mustExec(c2, "y = 1")
			for range 2 { // the sweep's grace is one pass
				b.cleanup()
				a.cleanup()
			}
			for _, r := range []*contexts.ExecuteResult{r1, r2} {
				if rec, err := a.store.Get(a.ctx, r.ContextID); err != nil || rec.State != contexts.StateReady {
					t.Fatalf("context %s after both daemons' start and cleanup: %+v, %v", r.ContextID, rec, err)
				}
			}
			check := func(d *realDaemon, id contexts.Identity, code, want string, prev *contexts.ExecuteResult) {
				t.Helper()
				res := d.mustExec(id, code)
				if mainResult(res) != want || res.ContextID != prev.ContextID || res.SandboxID != prev.SandboxID {
					t.Fatalf("%s: %s in %v = %q in context %s/%s, want %q in %s/%s (error %+v)", d.node, code, id,
						mainResult(res), res.ContextID, res.SandboxID, want, prev.ContextID, prev.SandboxID, res.Error)
				}
			}
			check(a, c1, "x + 1", "42", r1)
			check(b, c2, "y + 1", "2", r2)
			// B's pool refills in the background after its create took
			// the warm sandbox: wait for it, bounded.
			for deadline := time.Now().Add(30 * time.Second); b.m.Stats().PoolSize != 1; time.Sleep(10 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("%s: warm pool %d after the other's cleanup, want 1", b.node, b.m.Stats().PoolSize)
				}
			}

			// A call for A's conversation that lands on B: refused, naming A.
			_, err := b.exec(c1, "x = 0")
			wantCategory(t, err, errdefs.ErrUnavailable)
			if !strings.Contains(err.Error(), "node-a") {
				t.Fatalf("refusal %q does not name the owner", err)
			}
			check(a, c1, "x", "41", r1)

			// A restart of either keeps both.
			b.stop()
			b.start()
			a.stop()
			a.start()
			check(a, c1, "x", "41", r1)
			check(b, c2, "y", "1", r2)
			if rec, err := a.store.Get(a.ctx, r2.ContextID); err != nil || rec.State != contexts.StateReady {
				t.Fatalf("B's record after A's restart: %+v, %v", rec, err)
			}
		})
	}
}
