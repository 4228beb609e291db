package contexts_test

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/image/debian/debiantest"
	"github.com/sandlot/sandlot/internal/testenv"
	"github.com/sandlot/sandlot/provider/local"
	"github.com/sandlot/sandlot/runtime/oci"
	"github.com/sandlot/sandlot/store/memory"
	"github.com/sandlot/sandlot/templates"
	"github.com/sandlot/sandlot/tenant"
	"github.com/sandlot/sandlot/volumes"
)

// suspendEnv is a manager on crun sandboxes of the default image, with a
// catalog that keeps suspended contexts' images, over one memory store
// that outlives a restart.
type suspendEnv struct {
	t      testing.TB
	ctx    context.Context
	dir    string
	store  *memory.Store
	cat    *templates.Catalog
	cfg    local.Config
	p      *local.Provider
	m      *contexts.Manager
	idle   time.Duration                                                      // Config.IdleSuspend
	idleOf func(ctx context.Context, tenantID, template string) time.Duration // Config.IdleSuspendOf
	vols   contexts.VolumeLister                                              // Config.Volumes
	clock  func() time.Time                                                   // Config.Clock
	log    *slog.Logger                                                       // Config.Logger
}

func newSuspendEnv(t testing.TB) *suspendEnv {
	t.Helper()
	return newSuspendEnvOn(t, "crun")
}

// newSuspendEnvOn is newSuspendEnv on runtime kind's sandboxes.
func newSuspendEnvOn(t testing.TB, kind string) *suspendEnv {
	t.Helper()
	testenv.RequireRoot(t)
	testenv.RequireBinary(t, kind)
	imgs, _ := debiantest.Default(t)
	st := memory.New()
	for _, id := range []string{"t1", "t2"} {
		if err := st.CreateTenant(context.Background(), &tenant.Tenant{ID: id}, tenant.HashKey("k"+id)); err != nil {
			t.Fatal(err)
		}
	}
	cat := templates.New(templates.Config{Store: st, Images: imgs, Snapshots: st})
	dir, err := os.MkdirTemp("", "sls-")
	if err != nil {
		t.Fatal(err)
	}
	e := &suspendEnv{t: t, ctx: context.Background(), dir: dir, store: st, cat: cat,
		cfg: local.Config{Runtime: kind, StateDir: dir, AgentPath: testenv.AgentBinary(t), Images: imgs, Templates: cat,
			Logger: slog.New(slog.DiscardHandler)}}
	// The manager's warnings (a fork that fell back to files, a restore
	// that failed) are the first thing a failure needs.
	logs := &testenv.Buffer{}
	e.log = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("manager log:\n%s", logs)
		}
	})
	t.Cleanup(func() {
		if e.p != nil {
			ids, _ := e.p.List(context.Background())
			for _, id := range ids {
				e.p.Destroy(context.Background(), id)
			}
		}
		oci.Purge(dir)
	})
	e.start()
	return e
}

// start is a daemon start: a new provider on the state dir, a new manager
// on the store, reconciled.
func (e *suspendEnv) start() {
	e.t.Helper()
	p, err := local.New(e.cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	e.p = p
	e.m = contexts.NewManager(e.store, p, contexts.Config{PoolSize: -1, CleanupInterval: time.Hour, Catalog: e.cat, IdleSuspend: e.idle, IdleSuspendOf: e.idleOf, MaxPerTenant: 1000, Volumes: e.vols, Clock: e.clock, Logger: e.log})
	if err := e.m.Start(e.ctx); err != nil {
		e.t.Fatal(err)
	}
	m := e.m
	e.t.Cleanup(func() { m.Close(context.Background()) })
}

func (e *suspendEnv) exec(id contexts.Identity, code string) *contexts.ExecuteResult {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(e.ctx, 2*time.Minute)
	defer cancel()
	res, err := e.m.Execute(ctx, id, contexts.ExecuteRequest{Language: "python", Code: code, Timeout: 60 * time.Second}, nil)
	if err != nil {
		e.t.Fatalf("Execute(%q): %v", code, err)
	}
	return res
}

func (e *suspendEnv) running(id string) bool {
	ids, err := e.p.List(e.ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	return slices.Contains(ids, id)
}

// TestRealSuspendWake suspends a context of a crun sandbox to disk: its
// sandbox is gone (memory freed), the record stays ready with the image
// it wakes from, another tenant can neither suspend nor wake it, a
// cleanup pass and a daemon restart leave it alone, and the next call
// wakes it on a new sandbox with its file and without its python variable,
// saying so (Woken, once); the image is freed on wake, and on the end of a
// context ended while suspended.
func TestRealSuspendWake(t *testing.T) {
	e := newSuspendEnv(t)
	a := ident("t1", "suspend", "main")
	res := e.exec(a, "x = 41\nopen('/home/user/kept.txt', 'w').write('kept')")
	if !res.Success {
		t.Fatalf("setup: %+v", res)
	}
	cid, sid := res.ContextID, res.SandboxID

	if _, err := e.m.Suspend(e.ctx, "t2", cid, 0); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("another tenant's suspend: %v, want not_found", err)
	}
	rec, err := e.m.Suspend(e.ctx, "t1", cid, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !rec.Suspended() || !rec.Paused() || rec.SandboxID != "" || rec.State != contexts.StateReady {
		t.Fatalf("suspended record: %+v", rec)
	}
	img := rec.SuspendImage
	if e.running(sid) {
		t.Fatal("the suspended context's sandbox still runs")
	}
	if _, err := e.m.Suspend(e.ctx, "t1", cid, 0); !errors.Is(err, contexts.ErrSuspended) {
		t.Fatalf("second suspend: %v, want ErrSuspended", err)
	}
	if _, err := e.m.Resume(e.ctx, "t2", cid, time.Minute); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("another tenant's wake: %v, want not_found", err)
	}
	list, err := e.cat.List(e.ctx, "t1")
	if err != nil {
		t.Fatal(err)
	}
	for _, tm := range list {
		if tm.ID == img {
			t.Fatalf("the suspended context's image is listed as a template: %+v", tm)
		}
	}

	// A cleanup pass and a restart (reconcile) leave it suspended.
	if _, err := e.m.Cleanup(e.ctx); err != nil {
		t.Fatal(err)
	}
	if err := e.m.Close(e.ctx); err != nil {
		t.Fatal(err)
	}
	e.start()
	got, err := e.m.Get(e.ctx, "t1", cid)
	if err != nil || got.State != contexts.StateReady || got.SuspendImage != img {
		t.Fatalf("after a cleanup pass and a restart: %+v, %v", got, err)
	}

	// The next call wakes it: the same context, a new sandbox, the file
	// kept, the variable gone, and the result says why.
	start := time.Now()
	res = e.exec(a, "x")
	t.Logf("wake to first result: %s", time.Since(start))
	if res.ContextID != cid || res.SandboxID == sid || res.SandboxID == "" || !res.Woken {
		t.Fatalf("first call after suspend: context %s sandbox %s woken %v; want context %s on a new sandbox, woken", res.ContextID, res.SandboxID, res.Woken, cid)
	}
	if res.Error == nil || res.Error.Name != "NameError" {
		t.Fatalf("x after wake: %+v, want NameError (kernels start fresh)", res)
	}
	res = e.exec(a, "open('/home/user/kept.txt').read()")
	if mainResult(res) != "'kept'" || res.Woken {
		t.Fatalf("the file after wake: %+v (%q), want 'kept', not woken again", res, mainResult(res))
	}
	got, _ = e.m.Get(e.ctx, "t1", cid)
	if got.Suspended() || got.Paused() || got.ExecutionCount != 3 {
		t.Fatalf("woken record: %+v, want running with 3 executions", got)
	}
	// The woken context runs on the image's template, which a second
	// suspend captures over (its sandbox's upper dir holds only what
	// changed since the wake) and then drops.
	if got.Template != img {
		t.Fatalf("woken context's template %q, want its image's %q", got.Template, img)
	}
	e.exec(a, "open('/home/user/second.txt', 'w').write('second')")
	rec, err = e.m.Suspend(e.ctx, "t1", cid, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if time.Until(rec.ExpiresAt) < 50*time.Minute {
		t.Fatalf("suspended with keep 1h: expires %s", rec.ExpiresAt)
	}
	if _, err := e.cat.ByID(e.ctx, img); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("the first image after a second suspend: %v, want it deleted", err)
	}
	res = e.exec(a, "open('/home/user/kept.txt').read() + open('/home/user/second.txt').read()")
	if !res.Woken || mainResult(res) != "'keptsecond'" {
		t.Fatalf("after a second suspend: %+v (%q), want both files", res, mainResult(res))
	}

	// Ended while suspended: its image goes with it, and so does the
	// template it ran on.
	running := rec.SuspendImage
	rec, err = e.m.Suspend(e.ctx, "t1", cid, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.m.Terminate(e.ctx, "t1", cid, contexts.ReasonManual); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{rec.SuspendImage, running} {
		if _, err := e.cat.ByID(e.ctx, id); !errors.Is(err, errdefs.ErrNotFound) {
			t.Fatalf("image %s of a context ended while suspended: %v, want it deleted", id, err)
		}
	}

	// Expired while suspended: the cleanup pass ends it and frees its
	// image.
	res = e.exec(ident("t1", "expiring", "main"), "1")
	rec, err = e.m.Suspend(e.ctx, "t1", res.ContextID, time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond)
	if _, err := e.m.Cleanup(e.ctx); err != nil {
		t.Fatal(err)
	}
	if got, err := e.m.Get(e.ctx, "t1", res.ContextID); err != nil || got.Reason != contexts.ReasonExpired {
		t.Fatalf("a suspended context past its expiry after a cleanup pass: %+v, %v", got, err)
	}
	if _, err := e.cat.ByID(e.ctx, rec.SuspendImage); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("the image of a context expired while suspended: %v, want it deleted", err)
	}
}

// TestRealIdleSuspend: with Config.IdleSuspend, a cleanup pass suspends a
// context idle that long (its sandbox destroyed), one used since is kept,
// and the next call wakes the suspended one with its files.
func TestRealIdleSuspend(t *testing.T) {
	e := newSuspendEnv(t)
	if err := e.m.Close(e.ctx); err != nil {
		t.Fatal(err)
	}
	// The manager's clock jumps past the idle time, so a slow call on a
	// loaded machine cannot make the busy context look idle.
	var skew atomic.Int64
	e.clock = func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }
	e.idle = time.Minute
	e.start()
	idle, busy := ident("t1", "idle", "main"), ident("t1", "busy", "main")
	first := e.exec(idle, "open('/home/user/kept.txt', 'w').write('idle')")
	e.exec(busy, "1")
	skew.Store(int64(2 * time.Minute))
	e.exec(busy, "2") // used within the idle time
	if _, err := e.m.Cleanup(e.ctx); err != nil {
		t.Fatal(err)
	}
	got, err := e.m.Get(e.ctx, "t1", first.ContextID)
	if err != nil || !got.Suspended() || e.running(first.SandboxID) {
		t.Fatalf("idle context after a cleanup pass: %+v, %v (sandbox running %v); want suspended", got, err, e.running(first.SandboxID))
	}
	if rec, _ := e.m.GetOrCreate(e.ctx, busy, contexts.CreateOptions{}); rec == nil || rec.Suspended() {
		t.Fatalf("the context used since: %+v, want running", rec)
	}
	res := e.exec(idle, "open('/home/user/kept.txt').read()")
	if !res.Woken || mainResult(res) != "'idle'" || res.ContextID != first.ContextID {
		t.Fatalf("after the idle suspend: %+v (%q)", res, mainResult(res))
	}
}

// TestRealSuspendWakeCarries: a wake gives the new sandbox what the create
// gave the first: the create's environment (E2B's envVars) and the
// context's volumes, at their paths, with their files; the volume cannot
// be deleted while its context sleeps. Before the wake carried them, a
// context with a volume was refused (failed_precondition) and a woken
// sandbox had the identity environment only.
func TestRealSuspendWakeCarries(t *testing.T) {
	testenv.RequireBinary(t, "mkfs.ext4")
	e := newSuspendEnv(t)
	if err := e.m.Close(e.ctx); err != nil {
		t.Fatal(err)
	}
	host, err := volumes.NewHost(filepath.Join(e.dir, "volumes"))
	if err != nil {
		t.Fatal(err)
	}
	vs := volumes.NewService(e.store, host, volumes.Config{})
	e.vols, e.cfg.Volumes = vs, vs
	e.start()
	vol, err := vs.Create(e.ctx, "t1", "data", volumes.MinSizeBytes)
	if err != nil {
		t.Fatal(err)
	}
	id := ident("t1", "carries", "main")
	if _, err := e.m.GetOrCreate(e.ctx, id, contexts.CreateOptions{
		Env:     map[string]string{"WAKE_TOKEN": "tok-0123456789"},
		Volumes: []contexts.VolumeMount{{VolumeID: vol.ID, Path: "/home/user/data"}},
	}); err != nil {
		t.Fatal(err)
	}
	res := e.exec(id, "import os\nopen('/home/user/data/v.txt', 'w').write('on the volume')\nos.environ['WAKE_TOKEN']")
	if mainResult(res) != "'tok-0123456789'" {
		t.Fatalf("setup: %+v (%q)", res, mainResult(res))
	}
	rec, err := e.m.Suspend(e.ctx, "t1", res.ContextID, 0)
	if err != nil {
		t.Fatalf("suspend of a context with a volume and env: %v", err)
	}
	if !rec.Suspended() || e.running(res.SandboxID) {
		t.Fatalf("suspended: %+v (sandbox running %v)", rec, e.running(res.SandboxID))
	}
	if err := vs.Delete(e.ctx, "t1", "data"); !errors.Is(err, errdefs.ErrFailedPrecondition) {
		t.Fatalf("delete of a suspended context's volume: %v, want failed_precondition (in use)", err)
	}
	// A restart between: the wake reads what it carries from the store.
	if err := e.m.Close(e.ctx); err != nil {
		t.Fatal(err)
	}
	e.start()
	got := e.exec(id, "import os\nos.environ.get('WAKE_TOKEN', 'unset') + ' ' + open('/home/user/data/v.txt').read()")
	if !got.Woken || got.ContextID != res.ContextID || mainResult(got) != "'tok-0123456789 on the volume'" {
		t.Fatalf("after the wake: %+v (%q), want the env var and the volume's file", got, mainResult(got))
	}
	if got := e.exec(id, "open('/home/user/data/w.txt', 'w').write('after')"); !got.Success {
		t.Fatalf("write to the volume after the wake: %+v", got)
	}
}

// TestRealWake: Manager.Wake (the ports route's wake of a suspended
// context) wakes a context suspended to disk as a call would, with its
// files; one that runs is returned as it is; another tenant's is
// not_found. An E2B pause (keep > 0) is held (Record.SuspendHeld), /v1's
// and the idle suspend (keep 0) are not, and a wake clears it.
func TestRealWake(t *testing.T) {
	e := newSuspendEnv(t)
	a := ident("t1", "wake", "main")
	res := e.exec(a, "open('/home/user/kept.txt', 'w').write('woken')")
	rec, err := e.m.Suspend(e.ctx, "t1", res.ContextID, 0)
	if err != nil || rec.SuspendHeld {
		t.Fatalf("suspend with keep 0: %+v, %v; want not held", rec, err)
	}
	if _, err := e.m.Wake(e.ctx, "t2", res.ContextID); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("another tenant's wake: %v, want not_found", err)
	}
	got, err := e.m.Wake(e.ctx, "t1", res.ContextID)
	if err != nil || got.Suspended() || got.SandboxID == "" || !e.running(got.SandboxID) {
		t.Fatalf("Wake: %+v, %v; want running on a new sandbox", got, err)
	}
	again, err := e.m.Wake(e.ctx, "t1", res.ContextID)
	if err != nil || again.SandboxID != got.SandboxID {
		t.Fatalf("Wake of a running context: %+v, %v; want it as it is", again, err)
	}
	if r := e.exec(a, "open('/home/user/kept.txt').read()"); mainResult(r) != "'woken'" || !r.Woken {
		t.Fatalf("the first call after Wake: %+v (%q), want the file and woken", r, mainResult(r))
	}
	rec, err = e.m.Suspend(e.ctx, "t1", res.ContextID, time.Hour)
	if err != nil || !rec.SuspendHeld {
		t.Fatalf("suspend with keep 1h (E2B's pause): %+v, %v; want held", rec, err)
	}
	got, err = e.m.Wake(e.ctx, "t1", res.ContextID)
	if err != nil || got.SuspendHeld || got.Suspended() {
		t.Fatalf("Wake of a held suspend: %+v, %v; want running, not held", got, err)
	}
}

// TestRealIdleSuspendPerTenant: a tenant's (or template's) idle suspend
// shorter than the daemon's wins (Config.IdleSuspendOf): a cleanup pass
// suspends t1's context idle 1 s under the daemon's hour, and leaves t2's,
// which asks for nothing, running; the wake is as ever.
func TestRealIdleSuspendPerTenant(t *testing.T) {
	e := newSuspendEnv(t)
	if err := e.m.Close(e.ctx); err != nil {
		t.Fatal(err)
	}
	e.idle = time.Hour
	asked := map[string]int{}
	e.idleOf = func(ctx context.Context, tenantID, template string) time.Duration {
		asked[tenantID]++
		if tenantID == "t1" {
			return time.Second
		}
		return 0
	}
	e.start()
	short := e.exec(ident("t1", "short", "main"), "open('/home/user/kept.txt', 'w').write('t1')")
	long := e.exec(ident("t2", "long", "main"), "1")
	time.Sleep(1200 * time.Millisecond)
	if _, err := e.m.Cleanup(e.ctx); err != nil {
		t.Fatal(err)
	}
	if got, err := e.m.Get(e.ctx, "t1", short.ContextID); err != nil || !got.Suspended() {
		t.Fatalf("t1's context idle past its tenant's 1 s: %+v, %v; want suspended", got, err)
	}
	if got, err := e.m.Get(e.ctx, "t2", long.ContextID); err != nil || got.Suspended() || !e.running(long.SandboxID) {
		t.Fatalf("t2's context under the daemon's hour: %+v, %v; want running", got, err)
	}
	if asked["t1"] != 1 || asked["t2"] != 1 {
		t.Fatalf("IdleSuspendOf asked %v; want once per tenant and template in a pass", asked)
	}
	if res := e.exec(ident("t1", "short", "main"), "open('/home/user/kept.txt').read()"); !res.Woken || mainResult(res) != "'t1'" {
		t.Fatalf("after the tenant's idle suspend: %+v (%q)", res, mainResult(res))
	}
}
