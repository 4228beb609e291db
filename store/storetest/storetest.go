// Package storetest is the one conformance suite every store passes. A
// store's test calls Run with a function that opens a fresh, empty backend.
package storetest

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/store"
	"github.com/sandlot/sandlot/tenant"
)

// base is a fixed clock reading with sub-millisecond digits, so the suite
// also checks that stores keep times at millisecond precision.
var base = time.Date(2026, 3, 4, 5, 6, 7, 891_234_567, time.UTC)

func ms(t time.Time) time.Time { return t.UTC().Truncate(time.Millisecond) }

// Run runs the conformance suite. open must return a fresh, empty backend;
// Run closes it.
func Run(t *testing.T, open func(t *testing.T) store.Backend) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s store.Backend)
	}{
		{"CreateGet", testCreateGet},
		{"CreateInvalid", testCreateInvalid},
		{"NotFound", testNotFound},
		{"UniqueActive", testUniqueActive},
		{"ConcurrentCreate", testConcurrentCreate},
		{"RecreateAfterTerminate", testRecreateAfterTerminate},
		{"Update", testUpdate},
		{"RecordExecution", testRecordExecution},
		{"ConcurrentRecordExecution", testConcurrentRecordExecution},
		{"Touch", testTouch},
		{"Terminate", testTerminate},
		{"ConcurrentTerminate", testConcurrentTerminate},
		{"ListExpired", testListExpired},
		{"ListActiveCount", testListActiveCount},
		{"List", testList},
		{"Tenants", testTenants},
		{"Audit", testAudit},
		{"TenantScope", testTenantScope},
		{"NodeColumn", testNodeColumn},
		{"Claim", testClaim},
		{"ConcurrentClaim", testConcurrentClaim},
		{"Heartbeat", testHeartbeat},
		{"Secrets", testSecrets},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := open(t)
			t.Cleanup(func() { s.Close() })
			tc.fn(t, s)
		})
	}
}

// mixedCtx scopes every other caller of a race to tenant tn, so races mix
// system and tenant-scoped statements (which take different paths in a
// store with row-level security).
func mixedCtx(i int, tn string) context.Context {
	if i%2 == 1 {
		return tenant.WithID(context.Background(), tn)
	}
	return context.Background()
}

func ident(tn, conv, path string) contexts.Identity {
	return contexts.Identity{TenantID: tn, ConversationID: conv, PathID: path}
}

func newRec(id contexts.Identity) *contexts.Record {
	return &contexts.Record{
		Identity:   id,
		Provider:   "local",
		Template:   "python",
		CreatedAt:  base,
		LastUsedAt: base,
		ExpiresAt:  base.Add(30 * time.Minute),
	}
}

func mustCreate(t *testing.T, s store.Backend, rec *contexts.Record) *contexts.Record {
	t.Helper()
	if err := s.Create(context.Background(), rec); err != nil {
		t.Fatalf("Create(%+v): %v", rec.Identity, err)
	}
	return rec
}

func mustGet(t *testing.T, s store.Backend, id string) *contexts.Record {
	t.Helper()
	r, err := s.Get(context.Background(), id)
	if err != nil {
		t.Fatalf("Get(%s): %v", id, err)
	}
	return r
}

func wantErr(t *testing.T, what string, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("%s: err = %v, want %v", what, err, want)
	}
}

func ids(recs []*contexts.Record) []string {
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = r.ID
	}
	return out
}

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
	_, err = s.RecordExecution(ctx, missing, time.Second, base, base)
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

func testRecordExecution(t *testing.T, s store.Backend) {
	ctx := context.Background()
	rec := mustCreate(t, s, newRec(ident("t", "c", "main")))
	now, exp := base.Add(time.Minute), base.Add(31*time.Minute)
	got, err := s.RecordExecution(ctx, rec.ID, 1500*time.Millisecond, now, exp)
	if err != nil {
		t.Fatal(err)
	}
	want := *rec
	want.ExecutionCount, want.TotalExecutionTimeMs = 1, 1500
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
	_, err = s.RecordExecution(ctx, rec.ID, time.Second, now, exp)
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
				if _, err := s.RecordExecution(mixedCtx(g, "t"), rec.ID, d, base, base.Add(time.Hour)); err != nil {
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

func testListExpired(t *testing.T, s store.Backend) {
	ctx := context.Background()
	var want []string
	for i := 0; i < 5; i++ {
		r := newRec(ident("t", "c", fmt.Sprint("p", i)))
		r.ExpiresAt = base.Add(time.Duration(i) * time.Minute)
		mustCreate(t, s, r)
		if i <= 3 {
			want = append(want, r.ID)
		}
	}
	// An ended record never expires again.
	ended := newRec(ident("t", "c", "ended"))
	ended.ExpiresAt = base.Add(-time.Hour)
	mustCreate(t, s, ended)
	if _, err := s.Terminate(ctx, ended.ID, contexts.ReasonManual, base, ""); err != nil {
		t.Fatal(err)
	}
	cutoff := base.Add(3 * time.Minute) // inclusive
	got, err := s.ListExpired(ctx, cutoff, 0)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(want, ids(got)); d != "" {
		t.Fatalf("ListExpired (-want +got), soonest first:\n%s", d)
	}
	got, err = s.ListExpired(ctx, cutoff, 2)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(want[:2], ids(got)); d != "" {
		t.Fatalf("ListExpired limit 2 (-want +got):\n%s", d)
	}
	got, err = s.ListExpired(ctx, base.Add(-time.Minute), 10)
	if err != nil || len(got) != 0 {
		t.Fatalf("ListExpired before everything = %v, %v", ids(got), err)
	}
}

func testListActiveCount(t *testing.T, s store.Backend) {
	ctx := context.Background()
	var active []string
	add := func(id contexts.Identity, end bool) {
		r := mustCreate(t, s, newRec(id))
		if end {
			if _, err := s.Terminate(ctx, r.ID, contexts.ReasonManual, base, ""); err != nil {
				t.Fatal(err)
			}
			return
		}
		active = append(active, r.ID)
	}
	add(ident("A", "c1", "main"), false)
	add(ident("A", "c1", "b1"), false)
	add(ident("A", "c1", "b2"), true)
	add(ident("A", "c2", "main"), false)
	add(ident("B", "c1", "main"), false)
	add(ident("B", "c9", "main"), true)

	got, err := s.ListActive(ctx)
	if err != nil {
		t.Fatal(err)
	}
	gotIDs := ids(got)
	sort.Strings(gotIDs)
	sort.Strings(active)
	if d := cmp.Diff(active, gotIDs); d != "" {
		t.Fatalf("ListActive (-want +got):\n%s", d)
	}
	for _, tc := range []struct {
		tenant, conv string
		want         int
	}{
		{"A", "", 3}, {"A", "c1", 2}, {"A", "c2", 1}, {"A", "c3", 0}, {"B", "", 1}, {"B", "c9", 0}, {"C", "", 0},
	} {
		n, err := s.CountActive(ctx, tc.tenant, tc.conv)
		if err != nil || n != tc.want {
			t.Errorf("CountActive(%q, %q) = %d, %v; want %d", tc.tenant, tc.conv, n, err, tc.want)
		}
	}
}

func testList(t *testing.T, s store.Backend) {
	ctx := context.Background()
	type row struct {
		id    contexts.Identity
		meta  map[string]string
		ended bool
	}
	rows := []row{
		{ident("A", "c1", "main"), map[string]string{"env": "prod", "team": "x"}, false},
		{ident("A", "c1", "b"), map[string]string{"env": "prod"}, true},
		{ident("A", "c2", "main"), map[string]string{"env": "dev", "team": "x"}, false},
		{ident("A", "c3", "main"), nil, false},
		{ident("B", "c1", "main"), map[string]string{"env": "prod", "team": "x"}, false},
	}
	recs := make([]*contexts.Record, len(rows))
	for i, r := range rows {
		rec := newRec(r.id)
		rec.Metadata = r.meta
		recs[i] = mustCreate(t, s, rec)
		if r.ended {
			if _, err := s.Terminate(ctx, rec.ID, contexts.ReasonManual, base, ""); err != nil {
				t.Fatal(err)
			}
		}
	}
	pick := func(is ...int) []string {
		out := []string{}
		for _, i := range is {
			out = append(out, recs[i].ID)
		}
		sort.Strings(out)
		return out
	}
	for _, tc := range []struct {
		name string
		f    contexts.Filter
		want []string
	}{
		{"all", contexts.Filter{}, pick(0, 1, 2, 3, 4)},
		{"tenant", contexts.Filter{TenantID: "A"}, pick(0, 1, 2, 3)},
		{"conversation", contexts.Filter{TenantID: "A", ConversationID: "c1"}, pick(0, 1)},
		{"conversation any tenant", contexts.Filter{ConversationID: "c1"}, pick(0, 1, 4)},
		{"path", contexts.Filter{TenantID: "A", PathID: "b"}, pick(1)},
		{"active states", contexts.Filter{TenantID: "A", States: []contexts.State{contexts.StateCreating, contexts.StateReady}}, pick(0, 2, 3)},
		{"terminated", contexts.Filter{States: []contexts.State{contexts.StateTerminated}}, pick(1)},
		{"metadata one pair", contexts.Filter{Metadata: map[string]string{"env": "prod"}}, pick(0, 1, 4)},
		{"metadata two pairs", contexts.Filter{TenantID: "A", Metadata: map[string]string{"env": "dev", "team": "x"}}, pick(2)},
		{"metadata no match", contexts.Filter{Metadata: map[string]string{"env": "qa"}}, pick()},
		{"metadata missing key", contexts.Filter{Metadata: map[string]string{"nope": ""}}, pick()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := s.List(ctx, tc.f)
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.want, append([]string{}, ids(got)...)); d != "" {
				t.Fatalf("List(%+v) ids in ID order (-want +got):\n%s", tc.f, d)
			}
		})
	}

	// Paging: Limit and After walk every record exactly once, in ID order.
	all := pick(0, 1, 2, 3, 4)
	var walked []string
	after := ""
	for page := 0; page < 10; page++ {
		got, err := s.List(ctx, contexts.Filter{Limit: 2, After: after})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) > 2 {
			t.Fatalf("page of %d records, limit 2", len(got))
		}
		if len(got) == 0 {
			break
		}
		walked = append(walked, ids(got)...)
		after = got[len(got)-1].ID
	}
	if d := cmp.Diff(all, walked); d != "" {
		t.Fatalf("paging (-want +got):\n%s", d)
	}

	// The default limit is 100.
	for i := 0; i < 101; i++ {
		mustCreate(t, s, newRec(ident("P", "c", fmt.Sprint("p", i))))
	}
	got, err := s.List(ctx, contexts.Filter{TenantID: "P"})
	if err != nil || len(got) != 100 {
		t.Fatalf("List with no limit returned %d records (%v), want 100", len(got), err)
	}
}

func testTenants(t *testing.T, s store.Backend) {
	ctx := context.Background()
	k1, k2 := tenant.HashKey("e2b_one"), tenant.HashKey("e2b_two")
	a := &tenant.Tenant{ID: "A", Name: "alpha", CreatedAt: base, KeyPrefix: "e2b_one"}
	if err := s.CreateTenant(ctx, a, k1); err != nil {
		t.Fatal(err)
	}
	if a.GuardMode != tenant.GuardEnforce {
		t.Fatalf("default guard mode = %q, want enforce", a.GuardMode)
	}
	b := &tenant.Tenant{Name: "beta", GuardMode: tenant.GuardReport, Admin: true, CreatedAt: base.Add(time.Second)}
	if err := s.CreateTenant(ctx, b, k2); err != nil {
		t.Fatal(err)
	}
	if b.ID == "" {
		t.Fatal("CreateTenant left ID empty")
	}
	wantErr(t, "CreateTenant with a taken ID", s.CreateTenant(ctx, &tenant.Tenant{ID: "A"}, tenant.HashKey("x")), errdefs.ErrAlreadyExists)
	wantErr(t, "CreateTenant with a taken key", s.CreateTenant(ctx, &tenant.Tenant{ID: "C"}, k1), errdefs.ErrAlreadyExists)
	wantErr(t, "CreateTenant with a bad guard mode", s.CreateTenant(ctx, &tenant.Tenant{ID: "D", GuardMode: "loud"}, ""), errdefs.ErrInvalidArgument)
	if _, err := s.GetTenant(ctx, "C"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("failed CreateTenant left tenant C behind: %v", err)
	}

	// A new tenant's key is its first key generation; tokens signed for
	// a generation die when rotation moves it on.
	wantA := &tenant.Tenant{ID: "A", Name: "alpha", GuardMode: tenant.GuardEnforce, CreatedAt: ms(base), KeyPrefix: "e2b_one", KeyGeneration: 1}
	got, err := s.TenantByKeyHash(ctx, k1)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(wantA, got); d != "" {
		t.Fatalf("TenantByKeyHash (-want +got):\n%s", d)
	}
	got, err = s.GetTenant(ctx, "A")
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(wantA, got); d != "" {
		t.Fatalf("GetTenant (-want +got):\n%s", d)
	}
	_, err = s.TenantByKeyHash(ctx, tenant.HashKey("nope"))
	wantErr(t, "TenantByKeyHash unknown", err, errdefs.ErrNotFound)
	_, err = s.GetTenant(ctx, "nope")
	wantErr(t, "GetTenant unknown", err, errdefs.ErrNotFound)

	list, err := s.ListTenants(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[0].ID != "A" || list[1].ID != b.ID || !list[1].Admin || list[1].GuardMode != tenant.GuardReport {
		t.Fatalf("ListTenants = %+v", list)
	}

	// Rotation: the old key stops working, the new one finds the tenant.
	k3 := tenant.HashKey("e2b_three")
	if err := s.SetKey(ctx, "A", k3, "e2b_three"); err != nil {
		t.Fatal(err)
	}
	_, err = s.TenantByKeyHash(ctx, k1)
	wantErr(t, "old key after rotation", err, errdefs.ErrNotFound)
	got, err = s.TenantByKeyHash(ctx, k3)
	if err != nil || got.ID != "A" || got.KeyPrefix != "e2b_three" || got.KeyGeneration != 2 {
		t.Fatalf("new key after rotation = %+v, %v", got, err)
	}
	wantErr(t, "SetKey to another tenant's key", s.SetKey(ctx, "A", k2, "x"), errdefs.ErrAlreadyExists)
	wantErr(t, "SetKey unknown tenant", s.SetKey(ctx, "nope", tenant.HashKey("y"), "y"), errdefs.ErrNotFound)
	if got, _ := s.TenantByKeyHash(ctx, k3); got == nil || got.ID != "A" || got.KeyGeneration != 2 {
		t.Fatalf("failed SetKey changed the current key: %+v", got)
	}

	// Update saves name, guard mode and admin only.
	upd := &tenant.Tenant{ID: "A", Name: "alpha2", GuardMode: tenant.GuardOff, Admin: true, KeyPrefix: "ignored", CreatedAt: base.Add(time.Hour), KeyGeneration: 9}
	if err := s.UpdateTenant(ctx, upd); err != nil {
		t.Fatal(err)
	}
	got, _ = s.GetTenant(ctx, "A")
	want := &tenant.Tenant{ID: "A", Name: "alpha2", GuardMode: tenant.GuardOff, Admin: true, CreatedAt: ms(base), KeyPrefix: "e2b_three", KeyGeneration: 2}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("after UpdateTenant (-want +got):\n%s", d)
	}
	wantErr(t, "UpdateTenant unknown", s.UpdateTenant(ctx, &tenant.Tenant{ID: "nope", GuardMode: tenant.GuardOff}), errdefs.ErrNotFound)
	wantErr(t, "UpdateTenant bad mode", s.UpdateTenant(ctx, &tenant.Tenant{ID: "A", GuardMode: "x"}), errdefs.ErrInvalidArgument)

	// Delete removes the tenant and its key; the key hash becomes free.
	if err := s.DeleteTenant(ctx, "A"); err != nil {
		t.Fatal(err)
	}
	_, err = s.GetTenant(ctx, "A")
	wantErr(t, "GetTenant after delete", err, errdefs.ErrNotFound)
	_, err = s.TenantByKeyHash(ctx, k3)
	wantErr(t, "key after delete", err, errdefs.ErrNotFound)
	wantErr(t, "DeleteTenant twice", s.DeleteTenant(ctx, "A"), errdefs.ErrNotFound)
	if err := s.CreateTenant(ctx, &tenant.Tenant{ID: "A"}, k3); err != nil {
		t.Fatalf("re-create with the freed key: %v", err)
	}
	// A tenant without a key.
	if err := s.CreateTenant(ctx, &tenant.Tenant{ID: "nokey"}, ""); err != nil {
		t.Fatal(err)
	}
	if err := s.SetKey(ctx, "nokey", tenant.HashKey("e2b_four"), "e2b_four"); err != nil {
		t.Fatal(err)
	}
	if got, err := s.TenantByKeyHash(ctx, tenant.HashKey("e2b_four")); err != nil || got.ID != "nokey" || got.KeyGeneration != 2 {
		t.Fatalf("TenantByKeyHash after first SetKey = %+v, %v", got, err)
	}
	if list, _ := s.ListTenants(ctx); len(list) == 0 || list[len(list)-1].KeyGeneration == 0 {
		t.Fatalf("ListTenants without key generations: %+v", list)
	}
}

func testAudit(t *testing.T, s store.Backend) {
	ctx := context.Background()
	evs := []store.AuditEvent{
		{TenantID: "A", ContextID: "ctx-1", Kind: "context.created", At: base},
		{TenantID: "B", Kind: "tenant.key_rotated", Detail: map[string]string{"prefix": "e2b_12"}, At: base.Add(time.Second)},
		{TenantID: "A", ContextID: "ctx-1", Kind: "guard.finding", Detail: map[string]string{"detector": "aws_key", "count": "2"}, At: base.Add(2 * time.Second)},
		{TenantID: "A", ContextID: "ctx-1", Kind: "context.terminated", Detail: map[string]string{"reason": "expired"}},
	}
	before := time.Now().Add(-time.Second)
	for _, ev := range evs {
		if err := s.AppendAudit(ctx, ev); err != nil {
			t.Fatal(err)
		}
	}
	wantErr(t, "AppendAudit without kind", s.AppendAudit(ctx, store.AuditEvent{TenantID: "A"}), errdefs.ErrInvalidArgument)

	got, err := s.ListAudit(ctx, "A", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 {
		t.Fatalf("ListAudit(A) returned %d events, want 3", len(got))
	}
	if got[0].Kind != "context.terminated" || got[0].At.Before(before) || got[0].At.Location() != time.UTC {
		t.Fatalf("newest event = %+v, want context.terminated stamped now in UTC", got[0])
	}
	if !(got[0].ID > got[1].ID && got[1].ID > got[2].ID) {
		t.Fatalf("ListAudit not newest first: ids %d %d %d", got[0].ID, got[1].ID, got[2].ID)
	}
	want := evs[2]
	want.ID, want.At = got[1].ID, ms(base.Add(2*time.Second))
	if d := cmp.Diff(want, got[1]); d != "" {
		t.Fatalf("event (-want +got):\n%s", d)
	}
	if got[2].Detail != nil {
		t.Fatalf("empty detail = %#v, want nil", got[2].Detail)
	}
	all, err := s.ListAudit(ctx, "", 2)
	if err != nil || len(all) != 2 || all[0].Kind != "context.terminated" || all[1].Kind != "guard.finding" {
		t.Fatalf("ListAudit(all, 2) = %+v, %v", all, err)
	}
}

func testTenantScope(t *testing.T, s store.Backend) {
	bg := context.Background()
	ctxA, ctxB := tenant.WithID(bg, "A"), tenant.WithID(bg, "B")
	a := newRec(ident("A", "c", "main"))
	a.Metadata = map[string]string{"k": "v"}
	if err := s.Create(ctxA, a); err != nil {
		t.Fatalf("Create in own scope: %v", err)
	}
	b := newRec(ident("B", "c", "main"))
	b.Metadata = map[string]string{"k": "v"}
	if err := s.Create(ctxB, b); err != nil {
		t.Fatal(err)
	}
	wantErr(t, "Create a row of another tenant", s.Create(ctxA, newRec(ident("B", "c", "x"))), errdefs.ErrPermissionDenied)

	if _, err := s.Get(ctxA, a.ID); err != nil {
		t.Fatalf("Get own record: %v", err)
	}
	_, err := s.Get(ctxA, b.ID)
	wantErr(t, "Get another tenant's record", err, errdefs.ErrNotFound)
	_, err = s.GetActive(ctxA, b.Identity)
	wantErr(t, "GetActive another tenant's identity", err, errdefs.ErrNotFound)
	upd := *b
	upd.SandboxID = "stolen"
	wantErr(t, "Update another tenant's record", s.Update(ctxA, &upd), errdefs.ErrNotFound)
	_, err = s.RecordExecution(ctxA, b.ID, time.Second, base, base)
	wantErr(t, "RecordExecution on another tenant's record", err, errdefs.ErrNotFound)
	wantErr(t, "Touch another tenant's record", s.Touch(ctxA, b.ID, base, base), errdefs.ErrNotFound)
	_, err = s.Terminate(ctxA, b.ID, contexts.ReasonManual, base, "")
	wantErr(t, "Terminate another tenant's record", err, errdefs.ErrNotFound)

	for _, tc := range []struct {
		name string
		list func(ctx context.Context) ([]*contexts.Record, error)
	}{
		{"List", func(ctx context.Context) ([]*contexts.Record, error) { return s.List(ctx, contexts.Filter{}) }},
		{"List metadata", func(ctx context.Context) ([]*contexts.Record, error) {
			return s.List(ctx, contexts.Filter{Metadata: map[string]string{"k": "v"}})
		}},
		{"ListActive", s.ListActive},
		{"ListExpired", func(ctx context.Context) ([]*contexts.Record, error) {
			return s.ListExpired(ctx, base.Add(time.Hour), 0)
		}},
	} {
		got, err := tc.list(ctxA)
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff([]string{a.ID}, ids(got)); d != "" {
			t.Fatalf("%s scoped to A (-want +got):\n%s", tc.name, d)
		}
		got, err = tc.list(bg)
		if err != nil || len(got) != 2 {
			t.Fatalf("%s unscoped = %d records, %v; want 2", tc.name, len(got), err)
		}
	}
	if n, err := s.CountActive(ctxA, "B", ""); err != nil || n != 0 {
		t.Fatalf("CountActive(B) scoped to A = %d, %v; want 0", n, err)
	}
	if n, err := s.CountActive(ctxB, "B", ""); err != nil || n != 1 {
		t.Fatalf("CountActive(B) scoped to B = %d, %v; want 1", n, err)
	}

	if err := s.AppendAudit(ctxA, store.AuditEvent{TenantID: "A", Kind: "context.created"}); err != nil {
		t.Fatal(err)
	}
	if err := s.AppendAudit(ctxB, store.AuditEvent{TenantID: "B", Kind: "context.created"}); err != nil {
		t.Fatal(err)
	}
	wantErr(t, "AppendAudit for another tenant", s.AppendAudit(ctxA, store.AuditEvent{TenantID: "B", Kind: "x"}), errdefs.ErrPermissionDenied)
	evs, err := s.ListAudit(ctxA, "", 0)
	if err != nil || len(evs) != 1 || evs[0].TenantID != "A" {
		t.Fatalf("ListAudit scoped to A = %+v, %v", evs, err)
	}
	if evs, err := s.ListAudit(ctxA, "B", 0); err != nil || len(evs) != 0 {
		t.Fatalf("ListAudit(B) scoped to A = %+v, %v", evs, err)
	}

	// Ending B's record from its own scope works, and then A still cannot see it.
	if ok, err := s.Terminate(ctxB, b.ID, contexts.ReasonManual, base, ""); !ok || err != nil {
		t.Fatalf("Terminate in own scope = %v, %v", ok, err)
	}
}
