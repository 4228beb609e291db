package contexts_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/contexts/contextstest"
	"github.com/sandlot/sandlot/store"
	"github.com/sandlot/sandlot/store/memory"
)

func TestTTLExtensionAndExpiryCleanup(t *testing.T) {
	e := newEnv(t, contexts.Config{TTL: 10 * time.Minute})
	id := ident("t1", "c1", "main")
	rec := e.getOrCreate(id)
	e.clock.Advance(8 * time.Minute)
	e.exec(id, "x = 1")
	if got, want := e.record(rec.ID).ExpiresAt, e.clock.Now().Add(10*time.Minute); !got.Equal(want) {
		t.Fatalf("expiresAt after execute = %v, want %v", got, want)
	}
	e.clock.Advance(8 * time.Minute) // 16 min after creation, 8 after last use
	if _, err := e.m.Cleanup(e.ctx); err != nil {
		t.Fatal(err)
	}
	if r := e.record(rec.ID); r.State != contexts.StateReady {
		t.Fatalf("used context expired early: %+v", r)
	}
	e.getOrCreate(id) // touch
	if got, want := e.record(rec.ID).LastUsedAt, e.clock.Now(); !got.Equal(want) {
		t.Fatalf("lastUsedAt = %v, want %v", got, want)
	}
	e.clock.Advance(10 * time.Minute)
	if _, err := e.m.Cleanup(e.ctx); err != nil {
		t.Fatal(err)
	}
	r := e.record(rec.ID)
	if r.State != contexts.StateTerminated || r.Reason != contexts.ReasonExpired || r.TerminatedAt == nil {
		t.Fatalf("after expiry: %+v", r)
	}
	if e.running(rec.SandboxID) {
		t.Fatal("expired context's sandbox still runs")
	}
	if st := e.m.Stats(); st.Active != 0 || st.TotalCleaned != 1 {
		t.Fatalf("stats = %+v", st)
	}
	// The identity starts over with a fresh sandbox: state is gone.
	res, err := e.m.Execute(e.ctx, id, contexts.ExecuteRequest{Language: "python", Code: "print(x)"}, nil)
	if err != nil || res.Error == nil || res.Error.Name != "NameError" || res.ContextID == rec.ID {
		t.Fatalf("after expiry: %+v, %v", res, err)
	}
}

func TestCleanupOrphansAndUnknownSandboxes(t *testing.T) {
	e := newEnv(t, contexts.Config{PoolSize: 1})
	waitFor(t, "pool to fill", func() bool { return e.m.Stats().PoolSize == 1 })
	live := e.getOrCreate(ident("t1", "live", "main"))
	waitFor(t, "pool to refill", func() bool { return e.m.Stats().PoolSize == 1 })
	// An orphan: a record stuck in creating whose sandbox exists.
	orphanSB, _ := e.p.Create(e.ctx, contexts.Spec{})
	orphan := &contexts.Record{Identity: ident("t1", "orphan", "main"), State: contexts.StateCreating,
		SandboxID: orphanSB.ID(), CreatedAt: e.clock.Now(), ExpiresAt: e.clock.Now().Add(time.Hour)}
	if err := e.store.Create(e.ctx, orphan); err != nil {
		t.Fatal(err)
	}
	stray, _ := e.p.Create(e.ctx, contexts.Spec{})

	if _, err := e.m.Cleanup(e.ctx); err != nil {
		t.Fatal(err)
	}
	if !e.running(stray.ID()) {
		t.Fatal("a sandbox unknown at one pass only was destroyed (no grace)")
	}
	if r := e.record(orphan.ID); r.State != contexts.StateCreating {
		t.Fatalf("young creating record ended: %+v", r)
	}
	e.clock.Advance(3 * time.Minute)
	if _, err := e.m.Cleanup(e.ctx); err != nil {
		t.Fatal(err)
	}
	if e.running(stray.ID()) {
		t.Fatal("unknown sandbox survived two passes")
	}
	if r := e.record(orphan.ID); r.State != contexts.StateError || e.running(orphanSB.ID()) {
		t.Fatalf("orphan: %+v, sandbox running %v", r, e.running(orphanSB.ID()))
	}
	if !e.running(live.SandboxID) {
		t.Fatal("cleanup destroyed a live context's sandbox")
	}
	if st := e.m.Stats(); st.PoolSize != 1 || len(e.p.Running()) != 2 {
		t.Fatalf("stats %+v, running %v: the pool must survive cleanup", st, e.p.Running())
	}
}

func TestCleanupExactlyOnceAcrossManagers(t *testing.T) {
	e1 := newEnv(t, contexts.Config{})
	var recs []*contexts.Record
	for _, c := range []string{"a", "b", "c"} {
		recs = append(recs, e1.getOrCreate(ident("t1", c, "main")))
	}
	e2 := e1.second(contexts.Config{}) // adopts all three
	e1.clock.Advance(time.Hour)
	var wg sync.WaitGroup
	wg.Go(func() { e1.m.Cleanup(e1.ctx) })
	wg.Go(func() { e2.m.Cleanup(e2.ctx) })
	wg.Wait()
	if got, calls := e1.p.Destroyed(), e1.p.DestroyCalls(); got != 3 || calls != 3 {
		t.Fatalf("destroyed %d sandboxes in %d calls, want 3 in 3 (each once)", got, calls)
	}
	if c1, c2 := e1.m.Stats().TotalCleaned, e2.m.Stats().TotalCleaned; c1+c2 != 3 {
		t.Fatalf("cleaned %d + %d, want 3 in all", c1, c2)
	}
	for _, r := range recs {
		if got := e1.record(r.ID); got.Reason != contexts.ReasonExpired {
			t.Fatalf("record %+v", got)
		}
	}
	if st := e2.m.Stats(); st.Active != 0 {
		t.Fatalf("e2 still serves ended contexts: %+v", st)
	}
}

func TestCleanupSkipsBusyContext(t *testing.T) {
	e := newEnv(t, contexts.Config{TTL: time.Minute})
	id := ident("t1", "c1", "main")
	rec := e.getOrCreate(id)
	started := make(chan struct{})
	release := make(chan struct{})
	e.p.Run = func(ctx context.Context, sb *contextstest.Sandbox, p agent.RunCodeParams, out contexts.OutputFunc) (*agent.RunCodeResult, error) {
		close(started)
		<-release
		return &agent.RunCodeResult{Success: true}, nil
	}
	done := make(chan error)
	go func() {
		_, err := e.m.Execute(e.ctx, id, contexts.ExecuteRequest{Language: "python", Code: "1"}, nil)
		done <- err
	}()
	<-started
	e.clock.Advance(2 * time.Minute)
	if _, err := e.m.Cleanup(e.ctx); err != nil {
		t.Fatal(err)
	}
	if r := e.record(rec.ID); r.State != contexts.StateReady {
		t.Fatalf("cleanup ended an executing context: %+v", r)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if r := e.record(rec.ID); !r.ExpiresAt.After(e.clock.Now()) {
		t.Fatalf("execution did not extend expiry: %+v", r)
	}
}

func TestCleanupSamplesResourceUsage(t *testing.T) {
	e := newEnv(t, contexts.Config{})
	id := ident("t1", "c1", "main")
	e.exec(id, "1")
	res := e.exec(id, "2")
	if _, err := e.m.Cleanup(e.ctx); err != nil {
		t.Fatal(err)
	}
	r := e.record(res.ContextID)
	if r.ResourceUsage != (contexts.ResourceUsage{MemoryBytes: 2 << 20, PIDs: 1}) || r.ExecutionCount != 2 {
		t.Fatalf("record = %+v", r)
	}
}

// TestCleanupAuditRetention: a cleanup pass removes the audit events
// older than the retention and keeps the newer ones; a negative
// retention keeps everything.
func TestCleanupAuditRetention(t *testing.T) {
	for _, tc := range []struct {
		name      string
		retention time.Duration
		left      int
	}{
		{"one hour", time.Hour, 2},
		{"forever", -1, 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, contexts.Config{AuditRetention: tc.retention})
			trail := e.store.(store.Backend)
			now := e.clock.Now()
			var evs []store.AuditEvent
			for _, age := range []time.Duration{72 * time.Hour, 2 * time.Hour, 61 * time.Minute, 59 * time.Minute, 0} {
				evs = append(evs, store.AuditEvent{TenantID: "t1", Kind: "network.dns", At: now.Add(-age)})
			}
			if err := trail.AppendAuditBatch(e.ctx, evs); err != nil {
				t.Fatal(err)
			}
			if _, err := e.m.Cleanup(e.ctx); err != nil {
				t.Fatal(err)
			}
			got, err := trail.ListAudit(e.ctx, "", 0)
			if err != nil || len(got) != tc.left {
				t.Fatalf("after cleanup: %d events (%v), want %d", len(got), err, tc.left)
			}
			for _, ev := range got {
				if tc.retention > 0 && ev.At.Before(now.Add(-tc.retention)) {
					t.Errorf("an event older than the retention is left: %+v", ev)
				}
			}
		})
	}
}

// TestCleanupResult: a pass returns how many contexts it ended (expired
// ones, orphans stuck in creating) and how many failures it went on past;
// its error joins those failures.
func TestCleanupResult(t *testing.T) {
	fs := &flakyStore{Store: memory.New()}
	e := &env{t: t, ctx: context.Background(), p: contextstest.NewProvider(), store: fs, clock: newClock()}
	e.start(contexts.Config{TTL: time.Minute})
	a := e.getOrCreate(ident("t1", "a", "main"))
	e.getOrCreate(ident("t1", "b", "main"))
	orphan := &contexts.Record{Identity: ident("t1", "orphan", "main"), State: contexts.StateCreating,
		CreatedAt: e.clock.Now(), ExpiresAt: e.clock.Now().Add(time.Hour)}
	if err := e.store.Create(e.ctx, orphan); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(3 * time.Minute)
	e.getOrCreate(ident("t1", "fresh", "main")) // not expired: not cleaned
	res, err := e.m.Cleanup(e.ctx)
	if err != nil || res != (contexts.CleanupResult{Cleaned: 3}) {
		t.Fatalf("Cleanup = %+v, %v; want 3 cleaned (two expired, one orphan), no error", res, err)
	}
	if r := e.record(a.ID); r.Reason != contexts.ReasonExpired {
		t.Fatalf("expired context: %+v", r)
	}
	if res, err := e.m.Cleanup(e.ctx); err != nil || res != (contexts.CleanupResult{}) {
		t.Fatalf("a pass with nothing to do = %+v, %v", res, err)
	}

	// With the store down: the served context still expires from memory
	// and is torn down (cleaned), its store termination fails, and so do
	// both listings: three errors.
	e.clock.Advance(3 * time.Minute)
	fs.failing.Store(true)
	res, err = e.m.Cleanup(e.ctx)
	if res != (contexts.CleanupResult{Cleaned: 1, Errors: 3}) || !errors.Is(err, errStoreDown) {
		t.Fatalf("with the store down: Cleanup = %+v, %v; want 1 cleaned and 3 errors", res, err)
	}
}

// TestCleanupHonoursStoreExtension: an expiry moved in the store by a
// writer other than the manager (touch_execution_context on Postgres)
// keeps a context the manager serves alive until that expiry, for a call
// and for the cleanup pass.
func TestCleanupHonoursStoreExtension(t *testing.T) {
	e := newEnv(t, contexts.Config{TTL: time.Minute})
	id := ident("t1", "c1", "main")
	rec := e.getOrCreate(id)
	extend := func() {
		t.Helper()
		if err := e.store.Touch(e.ctx, rec.ID, e.clock.Now(), e.clock.Now().Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
		e.clock.Advance(10 * time.Minute) // past the in-memory expiry, before the store's
	}
	extend()
	if got := e.exec(id, "1"); got.ContextID != rec.ID {
		t.Fatalf("a call after the in-memory expiry, before the store's: %+v", got)
	}
	extend()
	if res, err := e.m.Cleanup(e.ctx); err != nil || res.Cleaned != 0 {
		t.Fatalf("Cleanup = %+v, %v", res, err)
	}
	if r := e.record(rec.ID); r.State != contexts.StateReady || !e.running(rec.SandboxID) {
		t.Fatalf("a context the store extended was ended: %+v", r)
	}
	e.clock.Advance(time.Hour)
	if res, err := e.m.Cleanup(e.ctx); err != nil || res.Cleaned != 1 {
		t.Fatalf("Cleanup past the store's expiry = %+v, %v", res, err)
	}
}

// TestCleanupSamplesUnattachedContexts: a context this manager serves but
// has not attached (adopted at start, after a restart, and not used
// since) is sampled too: Provider.Usage works by sandbox id.
func TestCleanupSamplesUnattachedContexts(t *testing.T) {
	e := newEnv(t, contexts.Config{})
	id := ident("t1", "c1", "main")
	res := e.exec(id, "1")
	if err := e.m.Close(e.ctx); err != nil { // the sandbox keeps running
		t.Fatal(err)
	}
	e2 := e.second(contexts.Config{})
	if _, err := e2.m.Cleanup(e2.ctx); err != nil {
		t.Fatal(err)
	}
	if r := e2.record(res.ContextID); r.ResourceUsage != (contexts.ResourceUsage{MemoryBytes: 1 << 20, PIDs: 1}) {
		t.Fatalf("usage of the adopted context after a cleanup pass = %+v", r.ResourceUsage)
	}
}
