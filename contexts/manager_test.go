package contexts_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/contexts/contextstest"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/store/memory"
)

func TestResolve(t *testing.T) {
	for _, tc := range []struct {
		name               string
		conv, path, task   string
		wantConv, wantPath string
		wantGenerated      bool
	}{
		{name: "all given", conv: "c", path: "p", task: "x", wantConv: "c", wantPath: "p"},
		{name: "path defaults to main", conv: "c", wantConv: "c", wantPath: "main"},
		{name: "task stands in for conversation", task: "task-1", wantConv: "task-1", wantPath: "main"},
		{name: "neither generates", path: "b1", wantPath: "b1", wantGenerated: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id, gen := contexts.Resolve("t1", tc.conv, tc.path, tc.task)
			if gen != tc.wantGenerated || id.TenantID != "t1" || id.PathID != tc.wantPath {
				t.Fatalf("Resolve = %+v, %v", id, gen)
			}
			if tc.wantGenerated {
				if len(id.ConversationID) != 36 {
					t.Fatalf("generated conversation id %q is not a UUID", id.ConversationID)
				}
				if again, _ := contexts.Resolve("t1", "", "", ""); again.ConversationID == id.ConversationID {
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
	for id := range seen {
		if n := e1.record(id).ExecutionCount; n != 40 {
			t.Fatalf("execution count = %d, want 40", n)
		}
	}
}

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
	if err := e.m.Cleanup(e.ctx); err != nil {
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
	if err := e.m.Cleanup(e.ctx); err != nil {
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

func TestExecuteValidation(t *testing.T) {
	e := newEnv(t, contexts.Config{})
	id := ident("t1", "c1", "main")
	for _, tc := range []struct {
		name string
		req  contexts.ExecuteRequest
		ok   bool
	}{
		{"python", contexts.ExecuteRequest{Language: "python", Code: "1"}, true},
		{"javascript", contexts.ExecuteRequest{Language: "javascript", Code: "1"}, true},
		{"typescript", contexts.ExecuteRequest{Language: "typescript", Code: "1"}, true},
		{"bash", contexts.ExecuteRequest{Language: "bash", Code: "1"}, true},
		{"sh", contexts.ExecuteRequest{Language: "sh", Code: "1"}, true},
		{"ruby", contexts.ExecuteRequest{Language: "ruby", Code: "1"}, false},
		{"empty language", contexts.ExecuteRequest{Code: "1"}, false},
		{"100 KB", contexts.ExecuteRequest{Language: "python", Code: strings.Repeat("a", 100*1024)}, true},
		{"100 KB + 1", contexts.ExecuteRequest{Language: "python", Code: strings.Repeat("a", 100*1024+1)}, false},
		{"timeout 1 s", contexts.ExecuteRequest{Language: "python", Code: "1", Timeout: time.Second}, true},
		{"timeout 600 s", contexts.ExecuteRequest{Language: "python", Code: "1", Timeout: 600 * time.Second}, true},
		{"timeout 999 ms", contexts.ExecuteRequest{Language: "python", Code: "1", Timeout: 999 * time.Millisecond}, false},
		{"timeout 601 s", contexts.ExecuteRequest{Language: "python", Code: "1", Timeout: 601 * time.Second}, false},
		{"negative timeout", contexts.ExecuteRequest{Language: "python", Code: "1", Timeout: -time.Second}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := e.m.Execute(e.ctx, id, tc.req, nil)
			if tc.ok && err != nil {
				t.Fatal(err)
			}
			if !tc.ok {
				wantCategory(t, err, errdefs.ErrInvalidArgument)
			}
		})
	}
}

func TestStatePersistsAndBranchesAreIsolated(t *testing.T) {
	e := newEnv(t, contexts.Config{})
	main := ident("t1", "c1", "main")
	e.exec(main, "x = 42")
	if res := e.exec(main, "print(x)"); res.Stdout != "42\n" {
		t.Fatalf("main: %+v", res)
	}
	created := e.p.Created()
	if err := e.m.PathEvent(e.ctx, main, contexts.PathEvent{Type: contexts.PathBranched, TargetPathID: "b1"}); err != nil {
		t.Fatal(err)
	}
	if e.p.Created() != created {
		t.Fatal("branched created a sandbox")
	}
	res := e.exec(ident("t1", "c1", "b1"), "print(x)")
	if res.Error == nil || res.Error.Name != "NameError" || res.Success {
		t.Fatalf("branch b1 sees main's x: %+v", res)
	}
	if res := e.exec(main, "print(x)"); res.Stdout != "42\n" {
		t.Fatalf("main after branch: %+v", res)
	}
}

func TestExecuteTimeoutKeepsContextReady(t *testing.T) {
	e := newEnv(t, contexts.Config{})
	id := ident("t1", "c1", "main")
	e.exec(id, "x = 1")
	res, err := e.m.Execute(e.ctx, id, contexts.ExecuteRequest{Language: "python", Code: "sleep 5000", Timeout: time.Second}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !res.TimedOut || res.Success {
		t.Fatalf("result = %+v, want a timeout", res)
	}
	if r := e.record(res.ContextID); r.State != contexts.StateReady {
		t.Fatalf("context after timeout: %+v", r)
	}
	if again := e.exec(id, "print(x)"); again.ContextID != res.ContextID || again.Stdout != "1\n" {
		t.Fatalf("after timeout: %+v", again)
	}
}

func TestExecuteSerializesPerContextAndParallelizesAcross(t *testing.T) {
	e := newEnv(t, contexts.Config{MaxPerConversation: -1})
	var mu sync.Mutex
	inside := map[string]int{}
	maxPer, total, maxTotal := 0, 0, 0
	e.p.Run = func(ctx context.Context, sb *contextstest.Sandbox, p agent.RunCodeParams, out contexts.OutputFunc) (*agent.RunCodeResult, error) {
		mu.Lock()
		inside[sb.ID()]++
		total++
		maxPer, maxTotal = max(maxPer, inside[sb.ID()]), max(maxTotal, total)
		mu.Unlock()
		time.Sleep(10 * time.Millisecond)
		mu.Lock()
		inside[sb.ID()]--
		total--
		mu.Unlock()
		return &agent.RunCodeResult{Success: true}, nil
	}
	var wg sync.WaitGroup
	for i := range 20 {
		id := ident("t1", "c1", []string{"main", "b1"}[i%2])
		wg.Go(func() {
			if _, err := e.m.Execute(e.ctx, id, contexts.ExecuteRequest{Language: "python", Code: "1"}, nil); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if maxPer != 1 {
		t.Fatalf("%d calls ran at once in one context, want 1", maxPer)
	}
	if maxTotal < 2 {
		t.Fatalf("contexts never ran in parallel (max %d)", maxTotal)
	}
}

func TestRotation(t *testing.T) {
	e := newEnv(t, contexts.Config{MaxExecutionsPerContext: 3})
	id := ident("t1", "c1", "main")
	var first string
	for i := range 3 {
		res := e.exec(id, "x = 1")
		if i == 0 {
			first = res.ContextID
		} else if res.ContextID != first {
			t.Fatalf("call %d ran in %s, want %s", i+1, res.ContextID, first)
		}
	}
	r := e.record(first)
	if r.State != contexts.StateTerminated || r.Reason != contexts.ReasonRotated || r.ExecutionCount != 3 {
		t.Fatalf("after 3 calls: %+v", r)
	}
	if e.running(r.SandboxID) {
		t.Fatal("rotated sandbox still runs")
	}
	res := e.exec(id, "print(x)")
	if res.ContextID == first || res.Error == nil {
		t.Fatalf("4th call: %+v, want a fresh context without x", res)
	}
}

func TestLimits(t *testing.T) {
	e := newEnv(t, contexts.Config{MaxPerTenant: 3, MaxPerConversation: 2})
	e.getOrCreate(ident("t1", "c1", "main"))
	e.getOrCreate(ident("t1", "c1", "b1"))
	_, err := e.m.GetOrCreate(e.ctx, ident("t1", "c1", "b2"), contexts.CreateOptions{})
	wantCategory(t, err, errdefs.ErrResourceExhausted)
	if want := "conversation c1 of tenant t1 has 2 active contexts (limit 2); terminate one or wait for expiry"; !strings.Contains(err.Error(), want) {
		t.Fatalf("err = %q, want it to say %q", err, want)
	}
	last := e.getOrCreate(ident("t1", "c2", "main"))
	_, err = e.m.GetOrCreate(e.ctx, ident("t1", "c3", "main"), contexts.CreateOptions{})
	wantCategory(t, err, errdefs.ErrResourceExhausted)
	if want := "tenant t1 has 3 active contexts (limit 3); terminate one or wait for expiry"; !strings.Contains(err.Error(), want) {
		t.Fatalf("err = %q, want it to say %q", err, want)
	}
	// Reuse is not limited, other tenants are not affected.
	e.getOrCreate(ident("t1", "c1", "main"))
	e.getOrCreate(ident("t2", "c1", "main"))
	// Ending one frees a slot.
	if err := e.m.Terminate(e.ctx, "t1", last.ID, ""); err != nil {
		t.Fatal(err)
	}
	e.getOrCreate(ident("t1", "c3", "main"))
	// Execute reports the limit too.
	_, err = e.m.Execute(e.ctx, ident("t1", "c4", "main"), contexts.ExecuteRequest{Language: "python", Code: "1"}, nil)
	wantCategory(t, err, errdefs.ErrResourceExhausted)
}

func TestHealthCheckFailureRecreates(t *testing.T) {
	mt := &metrics{}
	e := newEnv(t, contexts.Config{Metrics: mt})
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
	if mt.get("health") != 1 || mt.get("terminated:error") != 1 {
		t.Fatalf("metrics = %v", mt.events)
	}
}

func TestSandboxLostDuringExecution(t *testing.T) {
	e := newEnv(t, contexts.Config{})
	id := ident("t1", "c1", "main")
	first := e.exec(id, "x = 1")
	e.p.Run = func(ctx context.Context, sb *contextstest.Sandbox, p agent.RunCodeParams, out contexts.OutputFunc) (*agent.RunCodeResult, error) {
		e.p.Vanish(sb.ID())
		return nil, fmt.Errorf("sandbox %s: agent connection lost: EOF: %w", sb.ID(), errdefs.ErrUnavailable)
	}
	_, err := e.m.Execute(e.ctx, id, contexts.ExecuteRequest{Language: "python", Code: "boom"}, nil)
	wantCategory(t, err, errdefs.ErrUnavailable)
	if st := e.m.Stats(); st.HealthCheckFailures != 1 || st.Active != 0 {
		t.Fatalf("after the loss: %+v", st)
	}
	e.p.Run = nil
	res := e.exec(id, "print('again')")
	if res.ContextID == first.ContextID || res.Stdout != "again\n" {
		t.Fatalf("after loss: %+v", res)
	}
	if r := e.record(first.ContextID); r.State != contexts.StateError {
		t.Fatalf("lost context: %+v", r)
	}
}

func TestCreateFailureMarksRecordError(t *testing.T) {
	g := &contextstest.Guard{Secrets: []string{"sk-TOPSECRET"}}
	e := newEnv(t, contexts.Config{Guard: g})
	e.p.CreateErr = errors.New("runtime exploded, token sk-TOPSECRET")
	id := ident("t1", "c1", "main")
	_, err := e.m.GetOrCreate(e.ctx, id, contexts.CreateOptions{})
	wantCategory(t, err, errdefs.ErrUnavailable)
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

func TestPathEvents(t *testing.T) {
	e := newEnv(t, contexts.Config{MaxPerConversation: -1})
	c := func(p string) contexts.Identity { return ident("t1", "c1", p) }
	main, b1 := e.getOrCreate(c("main")), e.getOrCreate(c("b1"))

	if err := e.m.PathEvent(e.ctx, c("main"), contexts.PathEvent{Type: contexts.PathEdited}); err != nil {
		t.Fatal(err)
	}
	if again := e.getOrCreate(c("main")); again.ID != main.ID {
		t.Fatal("edited replaced the context")
	}
	// merged, posted on the target and naming the source.
	if err := e.m.PathEvent(e.ctx, c("main"), contexts.PathEvent{Type: contexts.PathMerged, SourcePathID: "b1", TargetPathID: "main"}); err != nil {
		t.Fatal(err)
	}
	if r := e.record(b1.ID); r.Reason != contexts.ReasonMerged || e.running(b1.SandboxID) {
		t.Fatalf("merged source: %+v", r)
	}
	if r := e.record(main.ID); r.State != contexts.StateReady {
		t.Fatalf("merge target: %+v", r)
	}
	// merged, posted on the source itself.
	b2 := e.getOrCreate(c("b2"))
	if err := e.m.PathEvent(e.ctx, c("b2"), contexts.PathEvent{Type: contexts.PathMerged}); err != nil {
		t.Fatal(err)
	}
	if r := e.record(b2.ID); r.Reason != contexts.ReasonMerged {
		t.Fatalf("merged (posted on source): %+v", r)
	}
	for _, tc := range []struct {
		typ    string
		reason contexts.Reason
	}{{contexts.PathDeleted, contexts.ReasonDeleted}, {contexts.PathArchived, contexts.ReasonArchived}} {
		rec := e.getOrCreate(c(tc.typ))
		if err := e.m.PathEvent(e.ctx, c(tc.typ), contexts.PathEvent{Type: tc.typ}); err != nil {
			t.Fatal(err)
		}
		if r := e.record(rec.ID); r.Reason != tc.reason || r.State != contexts.StateTerminated {
			t.Fatalf("%s: %+v", tc.typ, r)
		}
	}
	// Events on paths without a context are no-ops; unknown types are invalid.
	if err := e.m.PathEvent(e.ctx, c("nothing"), contexts.PathEvent{Type: contexts.PathDeleted}); err != nil {
		t.Fatal(err)
	}
	wantCategory(t, e.m.PathEvent(e.ctx, c("main"), contexts.PathEvent{Type: "renamed"}), errdefs.ErrInvalidArgument)
}

func TestTenantScoping(t *testing.T) {
	e := newEnv(t, contexts.Config{})
	rec := e.getOrCreate(ident("t1", "c1", "main"))
	e.getOrCreate(ident("t2", "c1", "main"))
	if got, err := e.m.Get(e.ctx, "t1", rec.ID); err != nil || got.ID != rec.ID {
		t.Fatalf("Get own: %v, %v", got, err)
	}
	_, err := e.m.Get(e.ctx, "t2", rec.ID)
	wantCategory(t, err, errdefs.ErrNotFound)
	wantCategory(t, e.m.Terminate(e.ctx, "t2", rec.ID, contexts.ReasonManual), errdefs.ErrNotFound)
	_, err = e.m.SetTTL(e.ctx, "t2", rec.ID, time.Hour)
	wantCategory(t, err, errdefs.ErrNotFound)
	list, err := e.m.List(e.ctx, contexts.Filter{TenantID: "t2"})
	if err != nil || len(list) != 1 || list[0].TenantID != "t2" {
		t.Fatalf("List t2 = %v, %v", list, err)
	}
	if r := e.record(rec.ID); r.State != contexts.StateReady {
		t.Fatalf("another tenant ended the context: %+v", r)
	}
	_, err = e.m.Lookup(e.ctx, ident("t1", "none", "main"))
	wantCategory(t, err, errdefs.ErrNotFound)
	if got, err := e.m.Lookup(e.ctx, ident("t1", "c1", "")); err != nil || got.ID != rec.ID {
		t.Fatalf("Lookup = %v, %v", got, err)
	}
}

func TestTerminate(t *testing.T) {
	e := newEnv(t, contexts.Config{})
	id := ident("t1", "c1", "main")
	rec := e.getOrCreate(id)
	wantCategory(t, e.m.Terminate(e.ctx, "t1", rec.ID, "bogus"), errdefs.ErrInvalidArgument)
	if err := e.m.Terminate(e.ctx, "t1", rec.ID, ""); err != nil {
		t.Fatal(err)
	}
	if r := e.record(rec.ID); r.Reason != contexts.ReasonManual || e.running(rec.SandboxID) {
		t.Fatalf("terminated: %+v", r)
	}
	if err := e.m.Terminate(e.ctx, "t1", rec.ID, ""); err != nil {
		t.Fatalf("second terminate: %v", err)
	}
	if again := e.getOrCreate(id); again.ID == rec.ID {
		t.Fatal("terminated context reused")
	}
}

func TestSetTTL(t *testing.T) {
	e := newEnv(t, contexts.Config{})
	id := ident("t1", "c1", "main")
	rec := e.getOrCreate(id)
	got, err := e.m.SetTTL(e.ctx, "t1", rec.ID, 2*time.Hour)
	if err != nil || !got.ExpiresAt.Equal(e.clock.Now().Add(2*time.Hour)) {
		t.Fatalf("SetTTL = %+v, %v", got, err)
	}
	e.clock.Advance(90 * time.Minute)
	e.exec(id, "1")
	if r := e.record(rec.ID); r.ID != rec.ID || !r.ExpiresAt.Equal(e.clock.Now().Add(2*time.Hour)) {
		t.Fatalf("after use, record = %+v; want the new TTL applied", r)
	}
	_, err = e.m.SetTTL(e.ctx, "t1", rec.ID, 0)
	wantCategory(t, err, errdefs.ErrInvalidArgument)
	e.m.Terminate(e.ctx, "t1", rec.ID, "")
	_, err = e.m.SetTTL(e.ctx, "t1", rec.ID, time.Hour)
	wantCategory(t, err, errdefs.ErrFailedPrecondition)
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

func TestReconcileAfterCrash(t *testing.T) {
	e1 := newEnv(t, contexts.Config{})
	a, b := ident("t1", "a", "main"), ident("t1", "b", "main")
	ra := e1.exec(a, "x = 7")
	rb := e1.exec(b, "x = 8")
	// The daemon crashes (no Close). Meanwhile b's sandbox disappears and a
	// stray sandbox is left behind.
	e1.p.Vanish(rb.SandboxID)
	stray, _ := e1.p.Create(e1.ctx, contexts.Spec{})

	e2 := e1.second(contexts.Config{})
	if e2.running(stray.ID()) {
		t.Fatal("reconcile left an unknown sandbox running")
	}
	if r := e2.record(rb.ContextID); r.State != contexts.StateError || r.LastError != "sandbox lost" {
		t.Fatalf("lost context: %+v", r)
	}
	if st := e2.m.Stats(); st.Active != 1 {
		t.Fatalf("stats after reconcile = %+v, want the surviving context adopted", st)
	}
	res := e2.exec(a, "print(x)")
	if res.ContextID != ra.ContextID || res.SandboxID != ra.SandboxID || res.Stdout != "7\n" {
		t.Fatalf("reattached context: %+v", res)
	}
	res = e2.exec(b, "print(x)")
	if res.ContextID == rb.ContextID || res.Error == nil {
		t.Fatalf("lost context's identity: %+v, want a fresh context", res)
	}
	if st := e2.m.Stats(); st.Active != 2 {
		t.Fatalf("stats = %+v", st)
	}
}

func TestCloseDetachesContextsAndDestroysPool(t *testing.T) {
	e := newEnv(t, contexts.Config{PoolSize: 2})
	waitFor(t, "pool to fill", func() bool { return e.m.Stats().PoolSize == 2 })
	rec := e.getOrCreate(ident("t1", "c1", "main"))
	waitFor(t, "pool to refill", func() bool { return e.m.Stats().PoolSize == 2 })
	if err := e.m.Close(e.ctx); err != nil {
		t.Fatal(err)
	}
	if got := e.p.Running(); !cmp.Equal(got, []string{rec.SandboxID}) {
		t.Fatalf("running after Close = %v, want only the context's sandbox %s", got, rec.SandboxID)
	}
	if r := e.record(rec.ID); r.State != contexts.StateReady {
		t.Fatalf("Close ended the context: %+v", r)
	}
	_, err := e.m.GetOrCreate(e.ctx, ident("t1", "c1", "main"), contexts.CreateOptions{})
	wantCategory(t, err, errdefs.ErrUnavailable)
	// A new manager picks the context up again.
	e2 := e.second(contexts.Config{})
	if again := e2.getOrCreate(ident("t1", "c1", "main")); again.ID != rec.ID || again.SandboxID != rec.SandboxID {
		t.Fatalf("after restart: %+v", again)
	}
}

func TestPoolHitMissRefill(t *testing.T) {
	e := &env{t: t, ctx: context.Background(), p: contextstest.NewProvider(), store: memory.New(), clock: newClock()}
	e.p.CreateDelay = 30 * time.Millisecond // before Start: the pool worker reads it
	e.start(contexts.Config{PoolSize: 1})
	waitFor(t, "pool to fill", func() bool { return e.m.Stats().PoolSize == 1 })
	hit := e.getOrCreate(ident("t1", "c1", "main"))
	miss := e.getOrCreate(ident("t1", "c2", "main")) // the refill is still running
	waitFor(t, "pool to refill", func() bool { return e.m.Stats().PoolSize == 1 })
	st := e.m.Stats()
	if st.PoolHits != 1 || st.PoolMisses != 1 || st.PerTemplate["default"].PoolHits != 1 {
		t.Fatalf("stats = %+v", st)
	}
	// The pooled sandbox had never run code; the labels show where it came from.
	sb, err := e.p.Attach(e.ctx, hit.SandboxID)
	if err != nil {
		t.Fatal(err)
	}
	fsb := sb.(*contextstest.Sandbox)
	if fsb.Runs() != 0 || fsb.Spec().Labels["sandlot.pool"] != "default" {
		t.Fatalf("pooled sandbox: runs %d, spec %+v", fsb.Runs(), fsb.Spec())
	}
	// It asked for python at boot (Config.PoolPrestart's default), as a
	// Spec field: user env stays the user's.
	if sp := fsb.Spec(); len(sp.Prestart) != 1 || sp.Prestart[0] != "python" || len(sp.Env) != 0 {
		t.Fatalf("pooled sandbox spec: prestart %v, env %v", sp.Prestart, sp.Env)
	}
	if s, _ := e.p.Attach(e.ctx, miss.SandboxID); s.(*contextstest.Sandbox).Spec().Labels["sandlot.context"] != miss.ID {
		t.Fatal("the missed context's sandbox was not created for it")
	}
	// Contexts with an environment never come from the pool.
	rec, err := e.m.GetOrCreate(e.ctx, ident("t1", "c3", "main"), contexts.CreateOptions{Env: map[string]string{"A": "1"}})
	if err != nil {
		t.Fatal(err)
	}
	if s, _ := e.p.Attach(e.ctx, rec.SandboxID); s.(*contextstest.Sandbox).Spec().Env["A"] != "1" {
		t.Fatal("context with env got a pooled sandbox")
	}
	if st := e.m.Stats(); st.PoolHits != 1 || st.PoolSize != 1 {
		t.Fatalf("stats = %+v", st)
	}
}

func TestPoolDiscardsDeadSandbox(t *testing.T) {
	e := newEnv(t, contexts.Config{PoolSize: 1})
	waitFor(t, "pool to fill", func() bool { return e.m.Stats().PoolSize == 1 })
	e.p.Kill(e.p.Running()[0])
	rec := e.getOrCreate(ident("t1", "c1", "main"))
	if rec.State != contexts.StateReady {
		t.Fatalf("record = %+v", rec)
	}
	if st := e.m.Stats(); st.PoolHits != 0 || st.PoolMisses != 1 {
		t.Fatalf("stats = %+v", st)
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

	if err := e.m.Cleanup(e.ctx); err != nil {
		t.Fatal(err)
	}
	if !e.running(stray.ID()) {
		t.Fatal("a sandbox unknown at one pass only was destroyed (no grace)")
	}
	if r := e.record(orphan.ID); r.State != contexts.StateCreating {
		t.Fatalf("young creating record ended: %+v", r)
	}
	e.clock.Advance(3 * time.Minute)
	if err := e.m.Cleanup(e.ctx); err != nil {
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
	if err := e.m.Cleanup(e.ctx); err != nil {
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

func TestStoreFailureIsTolerated(t *testing.T) {
	fs := &flakyStore{Store: memory.New()}
	e := &env{t: t, ctx: context.Background(), p: contextstest.NewProvider(), store: fs, clock: newClock()}
	e.start(contexts.Config{MaxExecutionsPerContext: 4})
	id := ident("t1", "c1", "main")
	first := e.exec(id, "x = 1")

	fs.failing.Store(true)
	res := e.exec(id, "print(x)")
	if res.ContextID != first.ContextID || res.Stdout != "1\n" {
		t.Fatalf("with the store down: %+v", res)
	}
	if got, err := e.m.Lookup(e.ctx, id); err != nil || got.ExecutionCount != 2 {
		t.Fatalf("Lookup with the store down = %+v, %v", got, err)
	}
	if got, err := e.m.Get(e.ctx, "t1", first.ContextID); err != nil || got.ID != first.ContextID {
		t.Fatalf("Get with the store down = %+v, %v", got, err)
	}
	// New contexts are created in memory.
	other := e.exec(ident("t1", "c2", "main"), "y = 2")
	if other.ContextID == "" {
		t.Fatal("no context while the store is down")
	}
	// Rotation still counts (in memory) and tears down.
	e.exec(id, "1")
	e.exec(id, "1") // 4th: rotates
	if e.running(first.SandboxID) {
		t.Fatal("rotation did not tear down with the store down")
	}
	// Expiry works from the in-memory state.
	e.clock.Advance(time.Hour)
	e.m.Cleanup(e.ctx)
	if e.running(other.SandboxID) || e.m.Stats().Active != 0 {
		t.Fatalf("expiry with the store down: running %v, stats %+v", e.p.Running(), e.m.Stats())
	}
	if fs.calls.Load() == 0 {
		t.Fatal("the store was never called while down")
	}
	fs.failing.Store(false)
	if res := e.exec(id, "print('back')"); res.Stdout != "back\n" {
		t.Fatalf("after recovery: %+v", res)
	}
}

func TestGuardOnExecute(t *testing.T) {
	g := &contextstest.Guard{Secrets: []string{"sk-SECRET"}}
	e := newEnv(t, contexts.Config{Guard: g})
	e.p.Run = func(ctx context.Context, sb *contextstest.Sandbox, p agent.RunCodeParams, out contexts.OutputFunc) (*agent.RunCodeResult, error) {
		for _, chunk := range []string{"key=sk-SE", "CRET\n"} {
			out(agent.OutputEvent{Stream: agent.Stdout, Data: chunk})
		}
		out(agent.OutputEvent{Stream: agent.Stderr, Data: "warn sk-SECRET"})
		rich := agent.RichResult{Main: true, Text: "'sk-SECRET'", HTML: "<b>sk-SECRET</b>", Markdown: "sk-SECRET",
			JSON: []byte(`{"k":"sk-SECRET"}`), PNG: "c2stU0VDUkVU"}
		out(agent.OutputEvent{Stream: agent.Result, Result: &rich})
		return &agent.RunCodeResult{
			Stdout: "key=sk-SECRET\n", Stderr: "warn sk-SECRET", Results: []agent.RichResult{rich},
			Error: &agent.ExecError{Name: "ValueError", Value: "bad sk-SECRET", Traceback: "line 1: sk-SECRET"},
		}, nil
	}
	var mu sync.Mutex
	streams := map[string]string{}
	res, err := e.m.Execute(e.ctx, ident("t1", "c1", "main"), contexts.ExecuteRequest{Language: "python", Code: "leak()"},
		func(ev agent.OutputEvent) {
			mu.Lock()
			defer mu.Unlock()
			streams[ev.Stream] += ev.Data
			if ev.Result != nil {
				streams[ev.Stream] += ev.Result.Text + ev.Result.HTML + ev.Result.Markdown + string(ev.Result.JSON)
			}
		})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		agent.Stdout: "key=[REDACTED]\n",
		agent.Stderr: "warn [REDACTED]",
		// The PNG (base64 of the secret) is no image for the guard: it
		// is dropped and its marker joins the text.
		agent.Result: "'[REDACTED]'\n[REDACTED]" + `<b>[REDACTED]</b>[REDACTED]{"k":"[REDACTED]"}`,
	}
	if diff := cmp.Diff(want, streams); diff != "" {
		t.Fatalf("streamed output (-want +got):\n%s", diff)
	}
	r := res.Results[0]
	final := res.Stdout + res.Stderr + r.Text + r.HTML + r.Markdown + string(r.JSON) + res.Error.Value + res.Error.Traceback
	if strings.Contains(final, "sk-SECRET") {
		t.Fatalf("result not guarded: %+v", res)
	}
	if string(r.JSON) != `{"k":"[REDACTED]"}` || r.PNG != "" || r.Text != "'[REDACTED]'\n[REDACTED]" {
		t.Fatalf("rich result = %+v", r)
	}
}

func TestGuardOnUse(t *testing.T) {
	g := &contextstest.Guard{Secrets: []string{"sk-SECRET"}}
	e := newEnv(t, contexts.Config{Guard: g})
	id := ident("t1", "c1", "main")
	var used *contexts.Record
	err := e.m.Use(e.ctx, id, contexts.CreateOptions{}, func(ctx context.Context, rec *contexts.Record, sb contexts.Sandbox) error {
		used = rec
		must := func(err error) {
			t.Helper()
			if err != nil {
				t.Fatal(err)
			}
		}
		_, err := sb.WriteFile(ctx, agent.WriteParams{Path: "notes.txt", Data: []byte("token sk-SECRET\nline2")})
		must(err)
		_, err = sb.WriteFile(ctx, agent.WriteParams{Path: "blob.bin", Data: []byte("sk-SECRET\x00\xff\xfe")})
		must(err)
		_, err = sb.WriteFile(ctx, agent.WriteParams{Path: "sk-SECRET.txt", Data: []byte("x")})
		must(err)

		rr, err := sb.ReadFile(ctx, agent.ReadParams{Path: "notes.txt"})
		must(err)
		if string(rr.Data) != "token [REDACTED]\nline2" {
			t.Errorf("text file = %q", rr.Data)
		}
		// Bytes that are not UTF-8 do not make a file binary.
		rr, err = sb.ReadFile(ctx, agent.ReadParams{Path: "blob.bin"})
		must(err)
		if string(rr.Data) != "[REDACTED]\x00\xff\xfe" {
			t.Errorf("text with odd bytes = %q", rr.Data)
		}
		var streamed strings.Builder
		xr, err := sb.Exec(ctx, agent.ExecParams{Shell: "echo sk-SECRET"}, func(ev agent.OutputEvent) { streamed.WriteString(ev.Data) })
		must(err)
		if strings.Contains(xr.Stdout+streamed.String(), "sk-SECRET") {
			t.Errorf("exec output not guarded: %q %q", xr.Stdout, streamed.String())
		}
		gr, err := sb.Grep(ctx, agent.GrepParams{Pattern: "token"})
		must(err)
		if len(gr.Matches) != 1 || gr.Matches[0].Text != "token [REDACTED]" {
			t.Errorf("grep = %+v", gr)
		}
		ls, err := sb.List(ctx, agent.ListParams{Path: "/home/user"})
		must(err)
		for _, fi := range ls {
			if strings.Contains(fi.Name+fi.Path, "sk-SECRET") {
				t.Errorf("listing leaks: %+v", fi)
			}
		}
		_, err = sb.ReadFile(ctx, agent.ReadParams{Path: "missing-sk-SECRET"})
		if !errors.Is(err, errdefs.ErrNotFound) || strings.Contains(err.Error(), "sk-SECRET") {
			t.Errorf("error = %v: want not_found, guarded", err)
		}
		return sb.Close() // a no-op for the wrapper
	})
	if err != nil {
		t.Fatal(err)
	}
	// The context survived the callback's Close.
	if rec := e.getOrCreate(id); rec.ID != used.ID {
		t.Fatal("Use's Close ended the context")
	}
	if res := e.exec(id, "print('ok')"); res.Stdout != "ok\n" {
		t.Fatalf("after Use: %+v", res)
	}
}

func TestGuardBytesAtChunkEdges(t *testing.T) {
	g := &contextstest.Guard{Secrets: []string{"sk-SECRET"}}
	e := newEnv(t, contexts.Config{Guard: g})
	text := "é sk-SECRET ü" // multi-byte characters at both ends
	e.m.Use(e.ctx, ident("t1", "c1", "main"), contexts.CreateOptions{}, func(ctx context.Context, _ *contexts.Record, sb contexts.Sandbox) error {
		sb.WriteFile(ctx, agent.WriteParams{Path: "u.txt", Data: []byte(text)})
		// Cut inside é at the start and inside ü at the end.
		rr, err := sb.ReadFile(ctx, agent.ReadParams{Path: "u.txt", Offset: 1, Limit: int64(len(text) - 2)})
		if err != nil {
			t.Fatal(err)
		}
		if want := text[1:2] + " [REDACTED] " + text[len(text)-2:len(text)-1]; string(rr.Data) != want {
			t.Fatalf("chunk = %q, want %q", rr.Data, want)
		}
		return nil
	})
}

func TestMetricsEvents(t *testing.T) {
	mt := &metrics{}
	e := newEnv(t, contexts.Config{Metrics: mt, MaxExecutionsPerContext: 2})
	id := ident("t1", "c1", "main")
	e.exec(id, "1")
	e.exec(id, "1")
	if mt.get("created:default:fake") != 1 || mt.get("reused:default") != 1 ||
		mt.get("exec:python:ok") != 2 || mt.get("terminated:rotated") != 1 {
		t.Fatalf("metrics = %v", mt.events)
	}
}

func TestClosedManager(t *testing.T) {
	e := newEnv(t, contexts.Config{})
	e.m.Close(e.ctx)
	_, err := e.m.Execute(e.ctx, ident("t1", "c1", "main"), contexts.ExecuteRequest{Language: "python", Code: "1"}, nil)
	wantCategory(t, err, errdefs.ErrUnavailable)
	if err := e.m.Close(e.ctx); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

func TestWithoutStart(t *testing.T) {
	p := contextstest.NewProvider()
	m := contexts.NewManager(memory.New(), p, contexts.Config{})
	defer m.Close(context.Background())
	var n atomic.Int32
	id := ident("t1", "c1", "main")
	for range 3 {
		if _, err := m.Execute(context.Background(), id, contexts.ExecuteRequest{Language: "bash", Code: "echo"}, func(agent.OutputEvent) { n.Add(1) }); err != nil {
			t.Fatal(err)
		}
	}
	if p.Created() != 1 || n.Load() == 0 {
		t.Fatalf("created %d, streamed %d", p.Created(), n.Load())
	}
}

func TestPoolOnlyForTemplatesThatWork(t *testing.T) {
	e := newEnv(t, contexts.Config{PoolSize: 1, Templates: []string{"default", "data", "bogus"}})
	waitFor(t, "pool to fill", func() bool { return e.m.Stats().PoolSize == 1 })
	e.p.CreateErr = errors.New("no such template")
	_, err := e.m.GetOrCreate(e.ctx, ident("t1", "c1", "main"), contexts.CreateOptions{Template: "bogus"})
	wantCategory(t, err, errdefs.ErrUnavailable)
	e.p.CreateErr = nil
	before := e.p.Created()
	time.Sleep(20 * time.Millisecond)
	if got := e.p.Created(); got != before {
		t.Fatalf("a pool was started for a failing template (%d creations)", got-before)
	}
	if _, err := e.m.GetOrCreate(e.ctx, ident("t1", "c2", "main"), contexts.CreateOptions{Template: "data"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the data pool to fill", func() bool { return e.m.Stats().PerTemplate["data"].PoolSize == 1 })
	if st := e.m.Stats(); st.PoolSize != 2 || st.PerTemplate["data"].PoolMisses != 1 || st.PerTemplate["bogus"].PoolMisses != 1 {
		t.Fatalf("stats = %+v", st)
	}
}

func TestRotationBeforeNextCall(t *testing.T) {
	e1 := newEnv(t, contexts.Config{})
	id := ident("t1", "c1", "main")
	var first *contexts.ExecuteResult
	for range 3 {
		first = e1.exec(id, "1")
	}
	e1.m.Close(e1.ctx)
	// A restart with a lower limit: the context is over it already.
	e2 := e1.second(contexts.Config{MaxExecutionsPerContext: 2})
	res := e2.exec(id, "1")
	if res.ContextID == first.ContextID {
		t.Fatal("context over the limit was reused")
	}
	if r := e2.record(first.ContextID); r.Reason != contexts.ReasonRotated || e2.running(first.SandboxID) {
		t.Fatalf("old context: %+v", r)
	}
}

func TestCleanupSamplesResourceUsage(t *testing.T) {
	e := newEnv(t, contexts.Config{})
	id := ident("t1", "c1", "main")
	e.exec(id, "1")
	res := e.exec(id, "2")
	if err := e.m.Cleanup(e.ctx); err != nil {
		t.Fatal(err)
	}
	r := e.record(res.ContextID)
	if r.ResourceUsage != (contexts.ResourceUsage{MemoryBytes: 2 << 20, PIDs: 1}) || r.ExecutionCount != 2 {
		t.Fatalf("record = %+v", r)
	}
}

func TestCloseDuringExecuteKeepsContext(t *testing.T) {
	e := newEnv(t, contexts.Config{})
	id := ident("t1", "c1", "main")
	first := e.exec(id, "x = 1")
	started, release := make(chan struct{}), make(chan struct{})
	e.p.Run = func(ctx context.Context, sb *contextstest.Sandbox, p agent.RunCodeParams, out contexts.OutputFunc) (*agent.RunCodeResult, error) {
		close(started)
		<-release
		if err := sb.Ping(ctx); err != nil { // the connection was closed under the call
			return nil, err
		}
		return &agent.RunCodeResult{Success: true}, nil
	}
	done := make(chan error)
	go func() {
		_, err := e.m.Execute(e.ctx, id, contexts.ExecuteRequest{Language: "python", Code: "1"}, nil)
		done <- err
	}()
	<-started
	closed := make(chan error)
	go func() { closed <- e.m.Close(e.ctx) }()
	waitFor(t, "Close to detach", func() bool {
		_, err := e.m.GetOrCreate(e.ctx, id, contexts.CreateOptions{})
		return errors.Is(err, errdefs.ErrUnavailable)
	})
	close(release)
	if err := <-done; !errors.Is(err, errdefs.ErrUnavailable) {
		t.Fatalf("Execute during Close: %v, want unavailable", err)
	}
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	if r := e.record(first.ContextID); r.State != contexts.StateReady || !e.running(first.SandboxID) {
		t.Fatalf("Close during Execute ended the context: %+v (running %v)", r, e.running(first.SandboxID))
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

func TestAgentRefusalKeepsContext(t *testing.T) {
	e := newEnv(t, contexts.Config{})
	id := ident("t1", "c1", "main")
	first := e.exec(id, "x = 1")
	e.p.Run = func(ctx context.Context, sb *contextstest.Sandbox, p agent.RunCodeParams, out contexts.OutputFunc) (*agent.RunCodeResult, error) {
		return nil, fmt.Errorf("kernel name %q is not valid: %w", p.Kernel, errdefs.ErrInvalidArgument)
	}
	_, err := e.m.Execute(e.ctx, id, contexts.ExecuteRequest{Language: "python", Code: "1", Kernel: "bad name"}, nil)
	wantCategory(t, err, errdefs.ErrInvalidArgument)
	e.p.Run = nil
	if res := e.exec(id, "print(x)"); res.ContextID != first.ContextID || res.Stdout != "1\n" {
		t.Fatalf("after a refused call: %+v", res)
	}
	if st := e.m.Stats(); st.HealthCheckFailures != 0 {
		t.Fatalf("stats = %+v", st)
	}
}
