package contexts_test

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/contexts/contextstest"
	"github.com/sandlot/sandlot/errdefs"
)

func TestResolve(t *testing.T) {
	for _, tc := range []struct {
		name               string
		user, conv, path   string
		task               string
		wantConv, wantPath string
		wantGenerated      bool
	}{
		{name: "task comes before conversation", conv: "c", path: "p", task: "x", wantConv: "x", wantPath: "p"},
		{name: "conversation without task", conv: "c", path: "p", wantConv: "c", wantPath: "p"},
		{name: "path defaults to main", conv: "c", wantConv: "c", wantPath: "main"},
		{name: "task stands in for conversation", task: "task-1", wantConv: "task-1", wantPath: "main"},
		{name: "neither generates", path: "b1", wantPath: "b1", wantGenerated: true},
		{name: "user with task", user: "u1", task: "task-1", wantConv: "task-1", wantPath: "main"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id, gen := contexts.Resolve("t1", tc.user, tc.conv, tc.path, tc.task)
			if gen != tc.wantGenerated || id.TenantID != "t1" || id.UserID != tc.user || id.PathID != tc.wantPath {
				t.Fatalf("Resolve = %+v, %v", id, gen)
			}
			if tc.wantGenerated {
				if len(id.ConversationID) != 36 {
					t.Fatalf("generated conversation id %q is not a UUID", id.ConversationID)
				}
				if again, _ := contexts.Resolve("t1", "", "", "", ""); again.ConversationID == id.ConversationID {
					t.Fatal("two generated ids are equal")
				}
			} else if id.ConversationID != tc.wantConv {
				t.Fatalf("conversation = %q, want %q", id.ConversationID, tc.wantConv)
			}
		})
	}
}

func TestSameIdentitySameSandbox(t *testing.T) {
	e := newEnv(t, contexts.Config{})
	a := e.getOrCreate(ident("t1", "c1", ""))
	b := e.getOrCreate(ident("t1", "c1", "main"))
	if a.ID != b.ID || a.SandboxID != b.SandboxID || b.State != contexts.StateReady {
		t.Fatalf("second call got %+v, want the first context %+v", b, a)
	}
	c := e.getOrCreate(ident("t1", "c1", "b1"))
	d := e.getOrCreate(ident("t2", "c1", "main"))
	if c.ID == a.ID || d.ID == a.ID || c.SandboxID == a.SandboxID {
		t.Fatal("different identities share a context")
	}
	if got := e.p.Created(); got != 3 {
		t.Fatalf("sandboxes created = %d, want 3", got)
	}
	st := e.m.Stats()
	if st.Active != 3 || st.TotalCreated != 3 || st.TotalReused != 1 {
		t.Fatalf("stats = %+v", st)
	}
	if a.Provider != "fake" || a.Template != "default" || !a.ExpiresAt.Equal(e.clock.Now().Add(30*time.Minute)) {
		t.Fatalf("record = %+v", a)
	}
}

func TestInvalidIdentity(t *testing.T) {
	e := newEnv(t, contexts.Config{})
	for _, id := range []contexts.Identity{ident("", "c", ""), ident("t", "", ""), ident("t", "c\n", "")} {
		_, err := e.m.GetOrCreate(e.ctx, id, contexts.CreateOptions{})
		wantCategory(t, err, errdefs.ErrInvalidArgument)
	}
}

func TestConcurrentFirstCallsCreateOneSandbox(t *testing.T) {
	e := newEnv(t, contexts.Config{})
	e.p.CreateDelay = 5 * time.Millisecond
	id := ident("t1", "race", "main")
	var wg sync.WaitGroup
	ids := make([]string, 100)
	for i := range ids {
		wg.Go(func() {
			rec, err := e.m.GetOrCreate(e.ctx, id, contexts.CreateOptions{})
			if err != nil {
				t.Error(err)
				return
			}
			ids[i] = rec.ID
		})
	}
	wg.Wait()
	for _, got := range ids {
		if got != ids[0] {
			t.Fatalf("contexts %s and %s for one identity", ids[0], got)
		}
	}
	if got := e.p.Created(); got != 1 {
		t.Fatalf("sandboxes created = %d, want 1", got)
	}
}

func TestTwoManagersRaceOnOneIdentity(t *testing.T) {
	e1 := newEnv(t, contexts.Config{})
	e2 := e1.second(contexts.Config{})
	e1.p.CreateDelay = 20 * time.Millisecond
	id := ident("t1", "race", "main")
	var wg sync.WaitGroup
	var mu sync.Mutex
	seen := map[string]bool{}
	sandboxes := map[string]bool{}
	for i := range 40 {
		m := e1.m
		if i%2 == 1 {
			m = e2.m
		}
		wg.Go(func() {
			res, err := m.Execute(e1.ctx, id, contexts.ExecuteRequest{Language: "python", Code: "print('hi')"}, nil)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			seen[res.ContextID] = true
			sandboxes[res.SandboxID] = true
			mu.Unlock()
		})
	}
	wg.Wait()
	if len(seen) != 1 || len(sandboxes) != 1 {
		t.Fatalf("contexts %v, sandboxes %v: want one of each", seen, sandboxes)
	}
	if got := len(e1.p.Running()); got != 1 {
		t.Fatalf("running sandboxes = %d, want 1 (the loser must not leak one)", got)
	}
	contexts.Settle(e2.m) // e1.record settles e1's own writes
	for id := range seen {
		if n := e1.record(id).ExecutionCount; n != 40 {
			t.Fatalf("execution count = %d, want 40", n)
		}
	}
}

func TestExpiredContextIsReplacedOnUse(t *testing.T) {
	e := newEnv(t, contexts.Config{})
	id := ident("t1", "c1", "main")
	old := e.getOrCreate(id)
	e.clock.Advance(31 * time.Minute)
	rec := e.getOrCreate(id)
	if rec.ID == old.ID {
		t.Fatal("expired context reused")
	}
	if r := e.record(old.ID); r.Reason != contexts.ReasonExpired {
		t.Fatalf("old context: %+v", r)
	}
}

func TestHealthCheckFailureRecreates(t *testing.T) {
	mt := newCollector()
	e := newEnv(t, contexts.Config{Meter: mt.meter()})
	id := ident("t1", "c1", "main")
	old := e.exec(id, "x = 1")
	e.p.Kill(old.SandboxID) // dies behind the manager's back, still listed
	res := e.exec(id, "print('alive')")
	if res.ContextID == old.ContextID || res.SandboxID == old.SandboxID || res.Stdout != "alive\n" {
		t.Fatalf("after kill: %+v", res)
	}
	r := e.record(old.ContextID)
	if r.State != contexts.StateError || r.Reason != contexts.ReasonError || !strings.Contains(r.LastError, "health check failed") {
		t.Fatalf("old context: %+v", r)
	}
	if e.running(old.SandboxID) {
		t.Fatal("dead sandbox not destroyed")
	}
	if st := e.m.Stats(); st.HealthCheckFailures != 1 || st.Active != 1 {
		t.Fatalf("stats = %+v", st)
	}
	if v := mt.values(t); v["sandlot.health_check.failures{}"] != 1 || v["sandlot.execution_context.terminated{reason=error}"] != 1 {
		t.Fatalf("metrics = %v", v)
	}
}

func TestCreateFailureMarksRecordError(t *testing.T) {
	g := &contextstest.Guard{Secrets: []string{"sk-TOPSECRET"}}
	e := newEnv(t, contexts.Config{Guard: g})
	e.p.CreateErr = errors.New("runtime exploded, token sk-TOPSECRET")
	id := ident("t1", "c1", "main")
	_, err := e.m.GetOrCreate(e.ctx, id, contexts.CreateOptions{})
	wantCategory(t, err, errdefs.ErrUnavailable)
	if !errors.Is(err, contexts.ErrCreateFailed) {
		t.Fatalf("a failed create is not ErrCreateFailed: %v", err)
	}
	if _, err := e.m.GetOrCreate(e.ctx, id, contexts.CreateOptions{Template: "nope"}); errors.Is(err, contexts.ErrCreateFailed) {
		t.Fatalf("an unknown template counts as a creation failure: %v", err)
	}
	if strings.Contains(err.Error(), "sk-TOPSECRET") {
		t.Fatalf("error leaks the secret: %v", err)
	}
	recs, _ := e.store.List(e.ctx, contexts.Filter{TenantID: "t1"})
	if len(recs) != 1 || recs[0].State != contexts.StateError || recs[0].Reason != contexts.ReasonError ||
		!strings.Contains(recs[0].LastError, "runtime exploded") || strings.Contains(recs[0].LastError, "sk-TOPSECRET") {
		t.Fatalf("records = %+v", recs)
	}
	e.p.CreateErr = nil
	if rec := e.getOrCreate(id); rec.ID == recs[0].ID || rec.State != contexts.StateReady {
		t.Fatalf("retry: %+v", rec)
	}
}

func TestCreateOptions(t *testing.T) {
	e := newEnv(t, contexts.Config{Templates: []string{"default", "data"}})
	rec, err := e.m.GetOrCreate(e.ctx, ident("t1", "c1", "main"), contexts.CreateOptions{
		Template: "data", TTL: 5 * time.Minute, Metadata: map[string]string{"k": "v"}, Env: map[string]string{"A": "1"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if rec.Template != "data" || !rec.ExpiresAt.Equal(e.clock.Now().Add(5*time.Minute)) || rec.Metadata["k"] != "v" {
		t.Fatalf("record = %+v", rec)
	}
	spec := e.p.Specs()[0]
	if spec.Template != "data" || spec.Env["A"] != "1" || spec.Labels["sandlot.context"] != rec.ID || spec.Labels["sandlot.tenant"] != "t1" {
		t.Fatalf("spec = %+v", spec)
	}
}

func TestWaitsForContextAnotherManagerIsCreating(t *testing.T) {
	e := newEnv(t, contexts.Config{})
	id := ident("t1", "c1", "main")
	rec := &contexts.Record{Identity: id, State: contexts.StateCreating, Provider: "fake", Template: "default",
		CreatedAt: e.clock.Now(), LastUsedAt: e.clock.Now(), ExpiresAt: e.clock.Now().Add(time.Hour)}
	if err := e.store.Create(e.ctx, rec); err != nil {
		t.Fatal(err)
	}
	sb, _ := e.p.Create(e.ctx, contexts.Spec{})
	go func() {
		time.Sleep(50 * time.Millisecond)
		r, _ := e.store.Get(e.ctx, rec.ID)
		r.State, r.SandboxID = contexts.StateReady, sb.ID()
		e.store.Update(e.ctx, r)
	}()
	got := e.getOrCreate(id)
	if got.ID != rec.ID || got.SandboxID != sb.ID() || e.p.Created() != 1 {
		t.Fatalf("got %+v, want the other manager's context on %s", got, sb.ID())
	}
	// An orphan (its creator died) is ended and replaced.
	orphan := &contexts.Record{Identity: ident("t1", "c2", "main"), State: contexts.StateCreating,
		CreatedAt: e.clock.Now().Add(-3 * time.Minute), ExpiresAt: e.clock.Now().Add(time.Hour)}
	if err := e.store.Create(e.ctx, orphan); err != nil {
		t.Fatal(err)
	}
	if got := e.getOrCreate(orphan.Identity); got.ID == orphan.ID || got.State != contexts.StateReady {
		t.Fatalf("orphan reused: %+v", got)
	}
	if r := e.record(orphan.ID); r.State != contexts.StateError || r.LastError != "stuck in creating" {
		t.Fatalf("orphan: %+v", r)
	}
}
