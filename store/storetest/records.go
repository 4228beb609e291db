package storetest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/store"
)

func testCreateGet(t *testing.T, s store.Backend) {
	ctx := context.Background()
	rec := &contexts.Record{
		ID:                   "0b7e4f7c-6a52-4c39-9b7e-6f6d1c1f0a01",
		Identity:             ident("t1", "c1", "main"),
		State:                contexts.StateReady,
		SandboxID:            "sb-1",
		Provider:             "local",
		Template:             "python",
		CreatedAt:            base,
		LastUsedAt:           base.Add(time.Second),
		ExpiresAt:            base.Add(30 * time.Minute),
		ExecutionCount:       3,
		TotalExecutionTimeMs: 1234,
		LastError:            "boom",
		ResourceUsage:        contexts.ResourceUsage{MemoryBytes: 1 << 20, CPUTimeMs: 5, DiskBytes: 7, PIDs: 3},
		Metadata:             map[string]string{"user": "alice", "a.b": "c\"d"},
	}
	mustCreate(t, s, rec)
	want := *rec
	want.CreatedAt, want.LastUsedAt, want.ExpiresAt = ms(base), ms(base.Add(time.Second)), ms(base.Add(30*time.Minute))
	got := mustGet(t, s, rec.ID)
	if d := cmp.Diff(&want, got); d != "" {
		t.Fatalf("Get after Create (-want +got):\n%s", d)
	}
	act, err := s.GetActive(ctx, rec.Identity)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(&want, act); d != "" {
		t.Fatalf("GetActive (-want +got):\n%s", d)
	}

	// Defaults: a new ID, state creating, CreatedAt now, nil metadata.
	before := time.Now().Add(-time.Second)
	r2 := &contexts.Record{Identity: ident("t1", "c1", "other")}
	mustCreate(t, s, r2)
	if r2.ID == "" || r2.State != contexts.StateCreating || r2.CreatedAt.Before(before) {
		t.Fatalf("defaults not filled: %+v", r2)
	}
	g2 := mustGet(t, s, r2.ID)
	if g2.State != contexts.StateCreating || !g2.CreatedAt.Equal(r2.CreatedAt) || g2.Metadata != nil || g2.TerminatedAt != nil {
		t.Fatalf("Get = %+v, want creating at %v with nil metadata", g2, r2.CreatedAt)
	}
	if g2.CreatedAt.Location() != time.UTC {
		t.Fatalf("CreatedAt location = %v, want UTC", g2.CreatedAt.Location())
	}
}

func testCreateInvalid(t *testing.T, s store.Backend) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		rec  *contexts.Record
	}{
		{"no tenant", &contexts.Record{Identity: ident("", "c", "main")}},
		{"no conversation", &contexts.Record{Identity: ident("t", "", "main")}},
		{"no path", &contexts.Record{Identity: ident("t", "c", "")}},
		{"terminated", &contexts.Record{Identity: ident("t", "c", "main"), State: contexts.StateTerminated}},
		{"unknown state", &contexts.Record{Identity: ident("t", "c", "main"), State: "bogus"}},
		{"id not a uuid", &contexts.Record{ID: "ctx-1", Identity: ident("t", "c", "main")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantErr(t, "Create", s.Create(ctx, tc.rec), errdefs.ErrInvalidArgument)
		})
	}
	r := mustCreate(t, s, newRec(ident("t", "c", "main")))
	dup := newRec(ident("t", "c", "other"))
	dup.ID = r.ID
	wantErr(t, "Create with a taken ID", s.Create(ctx, dup), errdefs.ErrAlreadyExists)
}

func testNotFound(t *testing.T, s store.Backend) {
	ctx := context.Background()
	missing := "6f1d1a8e-0000-4000-8000-000000000000"
	_, err := s.Get(ctx, missing)
	wantErr(t, "Get", err, errdefs.ErrNotFound)
	_, err = s.Get(ctx, "not-a-uuid")
	wantErr(t, "Get of a malformed id", err, errdefs.ErrNotFound)
	_, err = s.Terminate(ctx, "not-a-uuid", contexts.ReasonManual, base, "")
	wantErr(t, "Terminate of a malformed id", err, errdefs.ErrNotFound)
	_, err = s.GetActive(ctx, ident("t", "c", "main"))
	wantErr(t, "GetActive", err, errdefs.ErrNotFound)
	wantErr(t, "Update", s.Update(ctx, &contexts.Record{ID: missing, State: contexts.StateReady}), errdefs.ErrNotFound)
	_, err = s.RecordExecution(ctx, missing, 1, time.Second, base, base)
	wantErr(t, "RecordExecution", err, errdefs.ErrNotFound)
	wantErr(t, "Touch", s.Touch(ctx, missing, base, base), errdefs.ErrNotFound)
	_, err = s.Terminate(ctx, missing, contexts.ReasonManual, base, "")
	wantErr(t, "Terminate", err, errdefs.ErrNotFound)
}

func testUniqueActive(t *testing.T, s store.Backend) {
	ctx := context.Background()
	id := ident("t", "c", "main")
	mustCreate(t, s, newRec(id))
	wantErr(t, "second Create", s.Create(ctx, newRec(id)), errdefs.ErrAlreadyExists)
	ready := newRec(id)
	ready.State = contexts.StateReady
	wantErr(t, "second Create (ready)", s.Create(ctx, ready), errdefs.ErrAlreadyExists)
	// Other paths, conversations and tenants are other identities.
	mustCreate(t, s, newRec(ident("t", "c", "branch")))
	mustCreate(t, s, newRec(ident("t", "c2", "main")))
	mustCreate(t, s, newRec(ident("t2", "c", "main")))
}

func testConcurrentCreate(t *testing.T, s store.Backend) {
	const n = 50
	id := ident("t", "race", "main")
	var (
		wg              sync.WaitGroup
		mu              sync.Mutex
		won, lost       int
		winner, unknown []string
	)
	start := make(chan struct{})
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			rec := newRec(id)
			err := s.Create(mixedCtx(i, "t"), rec)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				won++
				winner = append(winner, rec.ID)
			case errors.Is(err, errdefs.ErrAlreadyExists):
				lost++
			default:
				unknown = append(unknown, err.Error())
			}
		}()
	}
	close(start)
	wg.Wait()
	if won != 1 || lost != n-1 || len(unknown) > 0 {
		t.Fatalf("%d concurrent creates: %d won, %d already_exists, other errors %v; want 1 and %d", n, won, lost, unknown, n-1)
	}
	got, err := s.GetActive(context.Background(), id)
	if err != nil || got.ID != winner[0] {
		t.Fatalf("GetActive = %v, %v; want the winner %s", got, err, winner[0])
	}
}

func testRecreateAfterTerminate(t *testing.T, s store.Backend) {
	ctx := context.Background()
	id := ident("t", "c", "main")
	first := mustCreate(t, s, newRec(id))
	if ok, err := s.Terminate(ctx, first.ID, contexts.ReasonRotated, base, ""); !ok || err != nil {
		t.Fatalf("Terminate = %v, %v", ok, err)
	}
	_, err := s.GetActive(ctx, id)
	wantErr(t, "GetActive after Terminate", err, errdefs.ErrNotFound)
	second := mustCreate(t, s, newRec(id))
	// The error state frees the identity too, via Update.
	second.State = contexts.StateError
	if err := s.Update(ctx, second); err != nil {
		t.Fatal(err)
	}
	third := mustCreate(t, s, newRec(id))
	act, err := s.GetActive(ctx, id)
	if err != nil || act.ID != third.ID {
		t.Fatalf("GetActive = %v, %v; want %s", act, err, third.ID)
	}
	old := mustGet(t, s, first.ID)
	if old.State != contexts.StateTerminated || old.Reason != contexts.ReasonRotated {
		t.Fatalf("terminated record = %s/%s, want kept as terminated/rotated", old.State, old.Reason)
	}
}

func testUpdate(t *testing.T, s store.Backend) {
	ctx := context.Background()
	rec := mustCreate(t, s, newRec(ident("t", "c", "main")))
	upd := *rec
	upd.State = contexts.StateReady
	upd.SandboxID = "sb-9"
	upd.Provider = "e2b"
	upd.Template = "node"
	upd.LastUsedAt = base.Add(time.Minute)
	upd.ExpiresAt = base.Add(time.Hour)
	upd.ExecutionCount = 7
	upd.TotalExecutionTimeMs = 70
	upd.LastError = "sanitized"
	upd.ResourceUsage = contexts.ResourceUsage{MemoryBytes: 42, PIDs: 2}
	upd.Metadata = map[string]string{"k": "v"}
	// Identity and CreatedAt are not mutable: Update ignores them.
	upd.Identity = ident("t", "c", "elsewhere")
	upd.CreatedAt = base.Add(99 * time.Hour)
	if err := s.Update(ctx, &upd); err != nil {
		t.Fatal(err)
	}
	want := upd
	want.Identity, want.CreatedAt = rec.Identity, rec.CreatedAt
	want.LastUsedAt, want.ExpiresAt = ms(want.LastUsedAt), ms(want.ExpiresAt)
	if d := cmp.Diff(&want, mustGet(t, s, rec.ID)); d != "" {
		t.Fatalf("Get after Update (-want +got):\n%s", d)
	}

	wantErr(t, "Update to an unknown state", s.Update(ctx, &contexts.Record{ID: rec.ID, State: "bogus"}), errdefs.ErrInvalidArgument)

	// Into a final state, then never out of it.
	fin := want
	fin.State, fin.Reason = contexts.StateTerminated, contexts.ReasonManual
	at := base.Add(2 * time.Hour)
	fin.TerminatedAt = &at
	if err := s.Update(ctx, &fin); err != nil {
		t.Fatal(err)
	}
	for _, st := range []contexts.State{contexts.StateReady, contexts.StateCreating, contexts.StateError} {
		back := fin
		back.State = st
		wantErr(t, "Update out of terminated to "+string(st), s.Update(ctx, &back), errdefs.ErrFailedPrecondition)
	}
	// Other fields of a final record may still change.
	fin.ResourceUsage.CPUTimeMs = 99
	if err := s.Update(ctx, &fin); err != nil {
		t.Fatalf("Update of a terminated record keeping its state: %v", err)
	}
	got := mustGet(t, s, rec.ID)
	if got.State != contexts.StateTerminated || got.ResourceUsage.CPUTimeMs != 99 || got.TerminatedAt == nil || !got.TerminatedAt.Equal(ms(at)) {
		t.Fatalf("Get = %+v", got)
	}
}

// testUpdateKeepsCounts is an Update written from a record read before
// executions were recorded (a pause, a network change or a usage sample
// saved while calls are answered and their tally written behind): the
// counters and the last use only grow, so the stale copy lowers none.
func testUpdateKeepsCounts(t *testing.T, s store.Backend) {
	ctx := context.Background()
	rec := mustCreate(t, s, newRec(ident("t", "c", "main")))
	stale := mustGet(t, s, rec.ID)
	now, exp := base.Add(time.Minute), base.Add(31*time.Minute)
	if _, err := s.RecordExecution(ctx, rec.ID, 3, 900*time.Millisecond, now, exp); err != nil {
		t.Fatal(err)
	}
	stale.State = contexts.StateReady
	stale.ResourceUsage = contexts.ResourceUsage{MemoryBytes: 7}
	stale.ExpiresAt = base.Add(5 * time.Minute) // an expiry may move back (a shorter TTL)
	if err := s.Update(ctx, stale); err != nil {
		t.Fatal(err)
	}
	got := mustGet(t, s, rec.ID)
	if got.ExecutionCount != 3 || got.TotalExecutionTimeMs != 900 || !got.LastUsedAt.Equal(ms(now)) {
		t.Fatalf("after a stale Update: count %d, time %d ms, last used %v; want 3, 900 ms, %v (the executions recorded meanwhile)",
			got.ExecutionCount, got.TotalExecutionTimeMs, got.LastUsedAt, ms(now))
	}
	if got.State != contexts.StateReady || got.ResourceUsage.MemoryBytes != 7 || !got.ExpiresAt.Equal(ms(stale.ExpiresAt)) {
		t.Fatalf("after a stale Update: %s, usage %+v, expiry %v; want the Update's own fields", got.State, got.ResourceUsage, got.ExpiresAt)
	}
	// A greater count is written as given.
	got.ExecutionCount, got.TotalExecutionTimeMs = 10, 1000
	if err := s.Update(ctx, got); err != nil {
		t.Fatal(err)
	}
	if g := mustGet(t, s, rec.ID); g.ExecutionCount != 10 || g.TotalExecutionTimeMs != 1000 {
		t.Fatalf("Update to a greater count: %d, %d ms; want 10, 1000 ms", g.ExecutionCount, g.TotalExecutionTimeMs)
	}
}

func testRecordExecution(t *testing.T, s store.Backend) {
	ctx := context.Background()
	rec := mustCreate(t, s, newRec(ident("t", "c", "main")))
	now, exp := base.Add(time.Minute), base.Add(31*time.Minute)
	got, err := s.RecordExecution(ctx, rec.ID, 1, 1500*time.Millisecond, now, exp)
	if err != nil {
		t.Fatal(err)
	}
	want := *rec
	want.ExecutionCount, want.TotalExecutionTimeMs = 1, 1500
	want.LastUsedAt, want.ExpiresAt = ms(now), ms(exp)
	if d := cmp.Diff(&want, got); d != "" {
		t.Fatalf("RecordExecution result (-want +got):\n%s", d)
	}
	// Several executions at once (the manager writes its tally behind the
	// answers, several calls in one write).
	now, exp = now.Add(time.Second), exp.Add(time.Second)
	got, err = s.RecordExecution(ctx, rec.ID, 3, 700*time.Millisecond, now, exp)
	if err != nil {
		t.Fatal(err)
	}
	want.ExecutionCount, want.TotalExecutionTimeMs = 4, 2200
	want.LastUsedAt, want.ExpiresAt = ms(now), ms(exp)
	if d := cmp.Diff(&want, got); d != "" {
		t.Fatalf("RecordExecution result (-want +got):\n%s", d)
	}
	if d := cmp.Diff(&want, mustGet(t, s, rec.ID)); d != "" {
		t.Fatalf("Get after RecordExecution (-want +got):\n%s", d)
	}
	if _, err := s.Terminate(ctx, rec.ID, contexts.ReasonManual, now, ""); err != nil {
		t.Fatal(err)
	}
	_, err = s.RecordExecution(ctx, rec.ID, 1, time.Second, now, exp)
	wantErr(t, "RecordExecution on a terminated record", err, errdefs.ErrFailedPrecondition)
}

func testConcurrentRecordExecution(t *testing.T, s store.Backend) {
	const goroutines, calls = 8, 25
	rec := mustCreate(t, s, newRec(ident("t", "c", "main")))
	var wg sync.WaitGroup
	errs := make(chan error, goroutines*calls)
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < calls; i++ {
				d := time.Duration(g*calls+i+1) * time.Millisecond
				if _, err := s.RecordExecution(mixedCtx(g, "t"), rec.ID, 1, d, base, base.Add(time.Hour)); err != nil {
					errs <- err
					return
				}
			}
		}(g)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	n := int64(goroutines * calls)
	got := mustGet(t, s, rec.ID)
	if got.ExecutionCount != n || got.TotalExecutionTimeMs != n*(n+1)/2 {
		t.Fatalf("count=%d total=%d, want %d and %d", got.ExecutionCount, got.TotalExecutionTimeMs, n, n*(n+1)/2)
	}
}

func testTouch(t *testing.T, s store.Backend) {
	ctx := context.Background()
	rec := mustCreate(t, s, newRec(ident("t", "c", "main")))
	now, exp := base.Add(5*time.Minute), base.Add(35*time.Minute)
	if err := s.Touch(ctx, rec.ID, now, exp); err != nil {
		t.Fatal(err)
	}
	got := mustGet(t, s, rec.ID)
	if !got.LastUsedAt.Equal(ms(now)) || !got.ExpiresAt.Equal(ms(exp)) || got.ExecutionCount != 0 {
		t.Fatalf("after Touch: lastUsed=%v expires=%v count=%d", got.LastUsedAt, got.ExpiresAt, got.ExecutionCount)
	}
	if _, err := s.Terminate(ctx, rec.ID, contexts.ReasonManual, now, ""); err != nil {
		t.Fatal(err)
	}
	wantErr(t, "Touch on a terminated record", s.Touch(ctx, rec.ID, now, exp), errdefs.ErrFailedPrecondition)
}

func testTerminate(t *testing.T, s store.Backend) {
	ctx := context.Background()
	a := mustCreate(t, s, newRec(ident("t", "c", "a")))
	at := base.Add(time.Hour)
	ok, err := s.Terminate(ctx, a.ID, contexts.ReasonExpired, at, "")
	if !ok || err != nil {
		t.Fatalf("Terminate = %v, %v", ok, err)
	}
	got := mustGet(t, s, a.ID)
	if got.State != contexts.StateTerminated || got.Reason != contexts.ReasonExpired || got.TerminatedAt == nil || !got.TerminatedAt.Equal(ms(at)) {
		t.Fatalf("after Terminate: %+v", got)
	}
	ok, err = s.Terminate(ctx, a.ID, contexts.ReasonManual, at.Add(time.Hour), "")
	if ok || err != nil {
		t.Fatalf("second Terminate = %v, %v; want false, nil", ok, err)
	}
	if got := mustGet(t, s, a.ID); got.Reason != contexts.ReasonExpired {
		t.Fatalf("second Terminate changed the reason to %s", got.Reason)
	}

	b := mustCreate(t, s, newRec(ident("t", "c", "b")))
	if ok, err := s.Terminate(ctx, b.ID, contexts.ReasonError, at, "sandbox died"); !ok || err != nil {
		t.Fatalf("Terminate(error) = %v, %v", ok, err)
	}
	got = mustGet(t, s, b.ID)
	if got.State != contexts.StateError || got.Reason != contexts.ReasonError || got.LastError != "sandbox died" {
		t.Fatalf("after Terminate(error): state=%s reason=%s lastError=%q", got.State, got.Reason, got.LastError)
	}
}

func testConcurrentTerminate(t *testing.T, s store.Backend) {
	const n = 20
	rec := mustCreate(t, s, newRec(ident("t", "c", "main")))
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		wins int
		errs []error
	)
	start := make(chan struct{})
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			ok, err := s.Terminate(mixedCtx(i, "t"), rec.ID, contexts.ReasonExpired, base, "")
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
			}
			if ok {
				wins++
			}
		}()
	}
	close(start)
	wg.Wait()
	if wins != 1 || len(errs) > 0 {
		t.Fatalf("%d concurrent Terminates: %d got true, errors %v; want exactly one", n, wins, errs)
	}
}
