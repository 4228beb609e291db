package contexts_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/internal/testenv"
	"github.com/sandlot/sandlot/provider/local"
	"github.com/sandlot/sandlot/store/memory"
)

// These tests run the manager on the real local provider (an OCI runtime
// with sandlot-agent as PID 1). They need root and a runtime; they skip
// without them unless CI=true.

// recorder remembers every sandbox id its provider created, pooled ones
// included, for the leak checks.
type recorder struct {
	*local.Provider
	mu  sync.Mutex
	ids []string
}

func (r *recorder) Create(ctx context.Context, spec contexts.Spec) (contexts.Sandbox, error) {
	sb, err := r.Provider.Create(ctx, spec)
	if err == nil {
		r.mu.Lock()
		r.ids = append(r.ids, sb.ID())
		r.mu.Unlock()
	}
	return sb, err
}

// Usage samples cgroup usage only, without the disk use that
// provider/local's Usage adds.
func (r *recorder) Usage(ctx context.Context, id string) (contexts.ResourceUsage, error) {
	st, err := r.Runtime().Stats(ctx, id)
	if err != nil {
		return contexts.ResourceUsage{}, err
	}
	return contexts.ResourceUsage{MemoryBytes: st.MemoryBytes, CPUTimeMs: st.CPUTime.Milliseconds(), PIDs: st.PIDs}, nil
}

func (r *recorder) created() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.ids...)
}

type realEnv struct {
	t        testing.TB
	ctx      context.Context
	stateDir string
	agent    string
	p        *recorder
	store    *memory.Store
	m        *contexts.Manager
}

// newRealEnv starts a manager over a memory store and a local provider
// with a private state directory; everything left is destroyed at the end.
func newRealEnv(t testing.TB, cfg contexts.Config) *realEnv {
	t.Helper()
	testenv.RequireOCIRuntime(t)
	e := &realEnv{t: t, ctx: context.Background(), agent: testenv.AgentBinary(t), store: memory.New()}
	dir, err := os.MkdirTemp("", "slm-") // short: socket paths are bounded
	if err != nil {
		t.Fatal(err)
	}
	e.stateDir = dir
	e.p = &recorder{Provider: e.provider()}
	t.Cleanup(func() {
		ids, _ := e.p.List(context.Background())
		for _, id := range ids {
			e.p.Destroy(context.Background(), id)
		}
		os.RemoveAll(dir)
	})
	e.start(cfg)
	return e
}

// waitStats polls cond for up to 3 minutes (real sandboxes on a loaded
// machine) and fails naming what it waited for with the manager's Stats.
func (e *realEnv) waitStats(what string, cond func() bool) {
	e.t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			e.t.Fatalf("timed out waiting for %s (stats %+v)", what, e.m.Stats())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// describe names each sandbox's labels (a pool's or a context's) and
// whether a create returned it, for a leak's report.
func (e *realEnv) describe(ids []string) string {
	created := map[string]bool{}
	for _, id := range e.p.created() {
		created[id] = true
	}
	var b strings.Builder
	for _, id := range ids {
		fmt.Fprintf(&b, "\n%s: created %v", id, created[id])
		if st, err := e.p.Runtime().State(e.ctx, id); err != nil {
			fmt.Fprintf(&b, ", state: %v", err)
		} else {
			fmt.Fprintf(&b, ", %s, labels %v", st.Status, st.Labels)
		}
	}
	return b.String()
}

func (e *realEnv) provider() *local.Provider {
	e.t.Helper()
	p, err := local.New(local.Config{StateDir: e.stateDir, AgentPath: e.agent, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		e.t.Fatalf("local provider: %v", err)
	}
	return p
}

func (e *realEnv) start(cfg contexts.Config) {
	e.t.Helper()
	if cfg.PoolSize == 0 {
		cfg.PoolSize = -1
	}
	if cfg.CleanupInterval == 0 {
		cfg.CleanupInterval = time.Hour
	}
	e.m = contexts.NewManager(e.store, e.p, cfg)
	if err := e.m.Start(e.ctx); err != nil {
		e.t.Fatal(err)
	}
	m := e.m
	e.t.Cleanup(func() { m.Close(context.Background()) })
}

func (e *realEnv) exec(id contexts.Identity, lang, code string) *contexts.ExecuteResult {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(e.ctx, 2*time.Minute)
	defer cancel()
	res, err := e.m.Execute(ctx, id, contexts.ExecuteRequest{Language: lang, Code: code, Timeout: 60 * time.Second}, nil)
	if err != nil {
		e.t.Fatalf("Execute(%v, %q): %v", id, code, err)
	}
	return res
}

func (e *realEnv) running(id string) bool {
	ids, err := e.p.List(e.ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}

func mainResult(r *contexts.ExecuteResult) string {
	for _, x := range r.Results {
		if x.Main {
			return x.Text
		}
	}
	return ""
}

func TestRealStateBranchesAndMerge(t *testing.T) {
	e := newRealEnv(t, contexts.Config{PoolSize: 1})
	main, b1 := ident("t1", "c1", "main"), ident("t1", "c1", "b1")
	first := e.exec(main, "python", "x = 41")
	if !first.Success {
		t.Fatalf("x = 41: %+v", first)
	}
	if got := e.exec(main, "python", "x + 1"); mainResult(got) != "42" || got.ContextID != first.ContextID {
		t.Fatalf("x + 1 on main = %+v", got)
	}
	if err := e.m.PathEvent(e.ctx, main, contexts.PathEvent{Type: contexts.PathBranched, TargetPathID: "b1"}); err != nil {
		t.Fatal(err)
	}
	br := e.exec(b1, "python", "x")
	if br.Error == nil || br.Error.Name != "NameError" || br.ContextID == first.ContextID || br.SandboxID == first.SandboxID {
		t.Fatalf("x on branch b1 = %+v, want NameError in its own sandbox", br)
	}
	e.exec(b1, "python", "y = 1")
	// Merge b1 into main: the source's context ends, main continues.
	if err := e.m.PathEvent(e.ctx, main, contexts.PathEvent{Type: contexts.PathMerged, SourcePathID: "b1", TargetPathID: "main"}); err != nil {
		t.Fatal(err)
	}
	rec, err := e.m.Get(e.ctx, "t1", br.ContextID)
	if err != nil || rec.Reason != contexts.ReasonMerged || e.running(br.SandboxID) {
		t.Fatalf("merged source: %+v, %v (sandbox running: %v)", rec, err, e.running(br.SandboxID))
	}
	if got := e.exec(main, "python", "x"); mainResult(got) != "41" || got.ContextID != first.ContextID {
		t.Fatalf("main after merge = %+v", got)
	}
	// The other languages keep state too.
	e.exec(main, "javascript", "var j = 5")
	if got := e.exec(main, "javascript", "j * 2"); mainResult(got) != "10" {
		t.Fatalf("javascript state: %+v", got)
	}
	e.exec(main, "bash", "export B=bee")
	if got := e.exec(main, "bash", "echo $B"); got.Stdout != "bee\n" {
		t.Fatalf("bash state: %+v", got)
	}
	// The cleanup pass samples usage onto the record.
	if _, err := e.m.Cleanup(e.ctx); err != nil {
		t.Fatal(err)
	}
	rec, _ = e.m.Get(e.ctx, "t1", first.ContextID)
	if u := rec.ResourceUsage; u.MemoryBytes <= 0 || u.PIDs < 2 {
		t.Fatalf("resource usage = %+v", u)
	}
}

func TestRealHealthCheckRecreate(t *testing.T) {
	e := newRealEnv(t, contexts.Config{})
	id := ident("t1", "c1", "main")
	old := e.exec(id, "python", "x = 1")
	// Kill the sandbox behind the manager's back.
	if err := e.p.Runtime().Kill(e.ctx, old.SandboxID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, err := e.p.Runtime().State(e.ctx, old.SandboxID)
		if err != nil || st.Status != "running" || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	res := e.exec(id, "python", "print('fresh')")
	if res.ContextID == old.ContextID || res.SandboxID == old.SandboxID || res.Stdout != "fresh\n" || !res.StateLost {
		t.Fatalf("after kill: %+v, want the call run once in a fresh sandbox, StateLost", res)
	}
	if got := e.exec(id, "python", "print(x)"); got.Error == nil || got.Error.Name != "NameError" || got.StateLost {
		t.Fatalf("the call after the replacement: %+v, want NameError (the state is gone) and the loss not told again", got)
	}
	rec, _ := e.m.Get(e.ctx, "t1", old.ContextID)
	if rec.State != contexts.StateError || e.running(old.SandboxID) {
		t.Fatalf("killed context: %+v (running %v)", rec, e.running(old.SandboxID))
	}
	if st := e.m.Stats(); st.HealthCheckFailures != 1 {
		t.Fatalf("stats = %+v", st)
	}

	// Killed in the middle of a call: the call fails with unavailable at
	// once, and the next one gets a fresh sandbox.
	// The kill waits for the cell's first output: a kill before the
	// request left would have the call resent to a fresh sandbox.
	done := make(chan error, 1)
	started := make(chan struct{})
	var once sync.Once
	go func() {
		_, err := e.m.Execute(e.ctx, id, contexts.ExecuteRequest{Language: "python", Code: "print('started', flush=True); import time; time.sleep(30)", Timeout: 60 * time.Second}, func(ev agent.OutputEvent) {
			if strings.Contains(ev.Data, "started") {
				once.Do(func() { close(started) })
			}
		})
		done <- err
	}()
	select {
	case <-started:
	case err := <-done:
		t.Fatalf("the sleeping call ended before it printed: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("the sleeping call never printed")
	}
	start := time.Now()
	if err := e.p.Runtime().Kill(e.ctx, res.SandboxID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		wantCategory(t, err, errdefs.ErrUnavailable)
		if f, ok := contexts.AsFailure(err); !ok || f.Kind != contexts.FailureLost || !f.StateLost {
			t.Fatalf("a call whose sandbox was killed under it: %v, want a FailureLost with StateLost", err)
		}
		t.Logf("call failed %s after the kill: %v", time.Since(start).Round(time.Millisecond), err)
	case <-time.After(20 * time.Second):
		t.Fatal("Execute did not notice its sandbox died")
	}
	again := e.exec(id, "python", "print('again')")
	if again.SandboxID == res.SandboxID || again.Stdout != "again\n" || again.StateLost {
		t.Fatalf("after a kill mid-call: %+v, want a fresh sandbox, the loss told already by the failed call", again)
	}
	if st := e.m.Stats(); st.HealthCheckFailures != 2 || st.Active != 1 {
		t.Fatalf("stats = %+v", st)
	}
}

// TestRealKillRightAfterAnswer: a sandbox killed right after it answered.
// With HealthCheckInterval < 0 every reuse pings and the next call is
// always served by a fresh context. With an interval the reuse may count
// the recent answer as the health check: the next call is then either
// served fresh (the death already showed on the connection, or the request
// could not be written) or fails with unavailable like a call the kill
// interrupted, and the call after it is fresh. Never a hang or a stale
// context.
func TestRealKillRightAfterAnswer(t *testing.T) {
	for _, interval := range []time.Duration{-1, time.Minute} {
		e := newRealEnv(t, contexts.Config{HealthCheckInterval: interval})
		id := ident("t1", "c1", "main")
		prev := e.exec(id, "python", "x = 1")
		transparent := 0
		for range 5 {
			if err := e.p.Runtime().Kill(e.ctx, prev.SandboxID, syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			deadline := time.Now().Add(10 * time.Second)
			for {
				st, err := e.p.Runtime().State(e.ctx, prev.SandboxID)
				if err != nil || st.Status != "running" || time.Now().After(deadline) {
					break
				}
				time.Sleep(time.Millisecond)
			}
			ctx, cancel := context.WithTimeout(e.ctx, time.Minute)
			res, err := e.m.Execute(ctx, id, contexts.ExecuteRequest{Language: "python", Code: "print('fresh')"}, nil)
			cancel()
			if err != nil {
				if interval < 0 {
					t.Fatalf("interval %s: call after a kill: %v", interval, err)
				}
				wantCategory(t, err, errdefs.ErrUnavailable)
				res = e.exec(id, "python", "print('fresh')")
			} else {
				transparent++
			}
			if res.ContextID == prev.ContextID || res.Stdout != "fresh\n" {
				t.Fatalf("interval %s: after a kill: %+v", interval, res)
			}
			prev = res
		}
		if st := e.m.Stats(); st.HealthCheckFailures != 5 || st.Active != 1 {
			t.Fatalf("interval %s: stats = %+v", interval, st)
		}
		t.Logf("interval %s: %d of 5 calls right after a kill were served fresh at once", interval, transparent)
	}
}

func TestRealReconcileAfterCrash(t *testing.T) {
	e := newRealEnv(t, contexts.Config{})
	a, b := ident("t1", "a", "main"), ident("t1", "b", "main")
	ra := e.exec(a, "python", "x = 7")
	rb := e.exec(b, "python", "x = 8")
	// Crash: the manager is abandoned (no Close). b's sandbox dies with it
	// and a stray sandbox is left behind.
	if err := e.p.Destroy(e.ctx, rb.SandboxID); err != nil {
		t.Fatal(err)
	}
	stray, err := e.p.Provider.Create(e.ctx, contexts.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	stray.Close()

	// A new daemon: a new provider over the same state dir, a new manager.
	e.p = &recorder{Provider: e.provider()}
	e.start(contexts.Config{})
	if e.running(stray.ID()) {
		t.Fatal("reconcile left a stray sandbox running")
	}
	if rec, _ := e.m.Get(e.ctx, "t1", rb.ContextID); rec.State != contexts.StateError || rec.LastError != "sandbox lost" {
		t.Fatalf("lost context: %+v", rec)
	}
	res := e.exec(a, "python", "x")
	if res.ContextID != ra.ContextID || res.SandboxID != ra.SandboxID || mainResult(res) != "7" {
		t.Fatalf("reattached: %+v", res)
	}
	if res := e.exec(b, "python", "x"); res.Error == nil || res.ContextID == rb.ContextID {
		t.Fatalf("lost identity: %+v, want a fresh context", res)
	}
}

// footprint counts what the soak's sandboxes left on the host.
func footprint(t testing.TB, stateDir string, ids []string) (procs, mounts, cgroups int) {
	t.Helper()
	pids, _ := filepath.Glob("/proc/[0-9]*")
	for _, p := range pids {
		if cg, err := os.ReadFile(p + "/cgroup"); err == nil {
			for _, id := range ids {
				if bytes.Contains(cg, []byte("/sandlot/"+id)) {
					procs++
					break
				}
			}
		}
		if cl, err := os.ReadFile(p + "/cmdline"); err == nil && bytes.Contains(cl, []byte(stateDir)) {
			procs++
		}
		if mi, err := os.ReadFile(p + "/mountinfo"); err == nil {
			mounts += strings.Count(string(mi), stateDir)
		}
	}
	ctls, _ := os.ReadDir("/sys/fs/cgroup")
	for _, c := range ctls {
		for _, id := range ids {
			if _, err := os.Stat(filepath.Join("/sys/fs/cgroup", c.Name(), "sandlot", id)); err == nil {
				cgroups++
			}
		}
	}
	return procs, mounts, cgroups
}

// soakCycles is SANDLOT_SOAK_CYCLES, else the 1,000 in CI (about a
// minute on 2 cores, measured) and 30 elsewhere.
func soakCycles(t testing.TB) int {
	if v := os.Getenv("SANDLOT_SOAK_CYCLES"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			t.Fatalf("SANDLOT_SOAK_CYCLES=%q: %v", v, err)
		}
		return n
	}
	if testenv.InCI() {
		return 1000
	}
	return 30
}

func TestRealSoak(t *testing.T) {
	e := newRealEnv(t, contexts.Config{PoolSize: 2})
	n := soakCycles(t)
	start := time.Now()
	for i := range n {
		id := ident("soak", fmt.Sprintf("c%d", i), "main")
		lang, code, want := "bash", "echo ok", "ok\n"
		if i%10 == 0 {
			lang, code, want = "python", "print('ok')", "ok\n"
		}
		res := e.exec(id, lang, code)
		if res.Stdout != want {
			t.Fatalf("cycle %d: %+v", i, res)
		}
		if i == 0 { // the leak check sees a live sandbox: it can fail
			if procs, _, cgroups := footprint(t, e.stateDir, []string{res.SandboxID}); procs == 0 || cgroups == 0 {
				t.Fatalf("footprint of a running sandbox: %d processes, %d cgroup dirs", procs, cgroups)
			}
		}
		if err := e.m.Terminate(e.ctx, "soak", res.ContextID, contexts.ReasonManual); err != nil {
			t.Fatalf("cycle %d: %v", i, err)
		}
	}
	elapsed := time.Since(start)
	st := e.m.Stats()
	t.Logf("%d cycles in %s (%s per cycle); pool hits %d, misses %d", n, elapsed.Round(time.Millisecond),
		(elapsed / time.Duration(n)).Round(time.Millisecond), st.PoolHits, st.PoolMisses)
	if err := e.m.Close(e.ctx); err != nil {
		t.Fatal(err)
	}
	if ids, _ := e.p.List(e.ctx); len(ids) != 0 {
		t.Fatalf("sandboxes left after the soak: %s", e.describe(ids))
	}
	ids := e.p.created()
	if len(ids) < n {
		t.Fatalf("recorded %d sandboxes for %d cycles", len(ids), n)
	}
	// A killed init is reparented to the host's PID 1, which may reap it
	// lazily: give the zombies a bounded moment to go.
	procs, mounts, cgroups := footprint(t, e.stateDir, ids)
	for deadline := time.Now().Add(15 * time.Second); procs+mounts+cgroups != 0 && time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond)
		procs, mounts, cgroups = footprint(t, e.stateDir, ids)
	}
	if procs+mounts+cgroups != 0 {
		t.Fatalf("left behind: %d processes, %d mounts, %d cgroup dirs", procs, mounts, cgroups)
	}
	if st.Active != 0 || st.TotalCreated != int64(n) || st.TotalTerminated != int64(n) {
		t.Fatalf("stats = %+v", st)
	}
}

func BenchmarkLocalGetOrCreateWarmPool(b *testing.B) {
	e := newRealEnv(b, contexts.Config{})
	e.m.Close(e.ctx)
	benchGetOrCreatePool(b, e.p, 2)
}

func BenchmarkLocalGetOrCreateReused(b *testing.B) {
	e := newRealEnv(b, contexts.Config{})
	e.m.Close(e.ctx)
	benchGetOrCreateReused(b, e.p)
}

func BenchmarkLocalExecutePython(b *testing.B) {
	e := newRealEnv(b, contexts.Config{})
	e.m.Close(e.ctx)
	benchExecute(b, e.p, "python", "x = 1")
}

// BenchmarkLocalExecuteHealthCheck compares the health check riding on
// the request with a ping before it (docs/contexts.md).
func BenchmarkLocalExecuteHealthCheck(b *testing.B) {
	e := newRealEnv(b, contexts.Config{})
	e.m.Close(e.ctx)
	benchExecuteHealthCheck(b, e.p, "python", "1+1")
}

func TestRealExpiryRotationAndLimits(t *testing.T) {
	clk := newClock()
	e := newRealEnv(t, contexts.Config{Clock: clk.Now, TTL: 10 * time.Minute, MaxExecutionsPerContext: 2, MaxPerConversation: 2})
	id := ident("t1", "c1", "main")
	first := e.exec(id, "python", "x = 1")
	clk.Advance(8 * time.Minute)
	e.exec(id, "python", "x") // second call: rotates
	rec, _ := e.m.Get(e.ctx, "t1", first.ContextID)
	if rec.Reason != contexts.ReasonRotated || e.running(first.SandboxID) {
		t.Fatalf("after 2 calls: %+v (running %v)", rec, e.running(first.SandboxID))
	}
	fresh := e.exec(id, "python", "x")
	if fresh.Error == nil || fresh.Error.Name != "NameError" {
		t.Fatalf("rotated context kept state: %+v", fresh)
	}
	// Limits: a second path fits, a third does not.
	e.exec(ident("t1", "c1", "b1"), "bash", "true")
	_, err := e.m.Execute(e.ctx, ident("t1", "c1", "b2"), contexts.ExecuteRequest{Language: "bash", Code: "true"}, nil)
	wantCategory(t, err, errdefs.ErrResourceExhausted)
	// Expiry: TTL runs from the last use.
	clk.Advance(9 * time.Minute)
	e.m.Cleanup(e.ctx)
	if !e.running(fresh.SandboxID) {
		t.Fatal("context expired before its TTL")
	}
	clk.Advance(2 * time.Minute)
	if _, err := e.m.Cleanup(e.ctx); err != nil {
		t.Fatal(err)
	}
	if rec, _ := e.m.Get(e.ctx, "t1", fresh.ContextID); rec.Reason != contexts.ReasonExpired || e.running(fresh.SandboxID) {
		t.Fatalf("after TTL: %+v (running %v)", rec, e.running(fresh.SandboxID))
	}
	if ids, _ := e.p.List(e.ctx); len(ids) != 0 {
		t.Fatalf("sandboxes left: %v", ids)
	}
}
