package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/network/policy"
	"github.com/sandlot/sandlot/store"
	"github.com/sandlot/sandlot/tenant"
)

// cmpNet compares address prefixes, which cmp cannot look into.
var cmpNet = cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })

// testPolicy exercises every part of a policy's JSON.
func testPolicy() *policy.Policy {
	return &policy.Policy{
		Mode:    policy.Allowlist,
		Allow:   []policy.Rule{{Domain: "*.example.org", Ports: []policy.PortRange{{Lo: 443, Hi: 443}}}, {Net: netip.MustParsePrefix("203.0.113.0/24")}},
		Deny:    []policy.Rule{{Net: netip.MustParsePrefix("2001:db8::/32"), Ports: []policy.PortRange{{Lo: 8000, Hi: 8999}}}},
		Headers: []policy.HeaderRule{{Host: "api.example.org", Headers: map[string]string{"Authorization": "Bearer {{x}}"}}},
		Ingress: policy.Ingress{Public: true, MaskRequestHost: "h-${PORT}"},
		Secrets: []string{"x"},
	}
}

// lifecycleRec is a record with every lifecycle field set, at finer
// precision than stores keep.
func lifecycleRec(id contexts.Identity) *contexts.Record {
	rec := newRec(id)
	rec.State = contexts.StateReady
	paused := base.Add(90 * time.Second)
	rec.Lifecycle = contexts.Lifecycle{
		PausedAt:      &paused,
		AutoPause:     7*24*time.Hour + 1234567*time.Nanosecond,
		AutoResume:    300*time.Second + 999*time.Microsecond,
		FixedExpiry:   true,
		MaxExecutions: -1,
		Network:       testPolicy(),
		TemplateName:  "code-interpreter-v1",
		SuspendImage:  "0b1c2d3e-0000-4000-8000-00000000000a",
		SuspendHeld:   true,
		// A pause to disk at the expiry (E2B's keepMemory: false).
		AutoPauseToDisk: true,
	}
	rec.Metadata = map[string]string{"user": "alice"}
	return rec
}

// stored is rec as a store gives it back: times and durations in
// milliseconds.
func stored(rec *contexts.Record) *contexts.Record {
	w := rec.Clone()
	w.CreatedAt, w.LastUsedAt, w.ExpiresAt = ms(w.CreatedAt), ms(w.LastUsedAt), ms(w.ExpiresAt)
	if w.PausedAt != nil {
		t := ms(*w.PausedAt)
		w.PausedAt = &t
	}
	w.AutoPause, w.AutoResume = w.AutoPause.Truncate(time.Millisecond), w.AutoResume.Truncate(time.Millisecond)
	return w
}

// testLifecycle: every lifecycle field survives Create and every read,
// Update changes each of them (pause and resume, a new network), and
// RecordExecution and Touch leave them alone.
func testLifecycle(t *testing.T, s store.Backend) {
	ctx := context.Background()
	rec := mustCreate(t, s, lifecycleRec(ident("t", "c", "main")))
	want := stored(rec)
	check := func(what string, got *contexts.Record, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if d := cmp.Diff(want, got, cmpNet); d != "" {
			t.Fatalf("%s (-want +got):\n%s", what, d)
		}
	}
	got, err := s.Get(ctx, rec.ID)
	check("Get after Create", got, err)
	got, err = s.GetActive(ctx, rec.Identity)
	check("GetActive", got, err)
	for what, list := range map[string]func() ([]*contexts.Record, error){
		"List":        func() ([]*contexts.Record, error) { return s.List(ctx, contexts.Filter{TenantID: "t"}) },
		"ListActive":  func() ([]*contexts.Record, error) { return s.ListActive(ctx) },
		"ListExpired": func() ([]*contexts.Record, error) { return s.ListExpired(ctx, base.Add(time.Hour), 0) },
	} {
		recs, err := list()
		if err == nil && len(recs) != 1 {
			t.Fatalf("%s: %d records, want 1", what, len(recs))
		}
		check(what, recs[0], err)
	}
	if err := s.Touch(ctx, rec.ID, base.Add(time.Minute), base.Add(2*time.Minute)); err != nil {
		t.Fatal(err)
	}
	got, err = s.RecordExecution(ctx, rec.ID, 1, time.Second, base.Add(time.Minute), base.Add(3*time.Minute))
	want.LastUsedAt, want.ExpiresAt, want.ExecutionCount, want.TotalExecutionTimeMs = ms(base.Add(time.Minute)), ms(base.Add(3*time.Minute)), 1, 1000
	check("RecordExecution", got, err)

	// Resumed, another network, every other field changed too.
	upd := got.Clone()
	upd.Lifecycle = contexts.Lifecycle{AutoPause: time.Minute, AutoResume: 0, FixedExpiry: false, MaxExecutions: 12,
		Network: &policy.Policy{Mode: policy.None}, TemplateName: "base"}
	if err := s.Update(ctx, upd); err != nil {
		t.Fatal(err)
	}
	want = stored(upd)
	got, err = s.Get(ctx, rec.ID)
	check("Get after an Update that resumes", got, err)

	// Paused again, and no network at all.
	paused := base.Add(5 * time.Minute)
	upd.PausedAt, upd.Network = &paused, nil
	if err := s.Update(ctx, upd); err != nil {
		t.Fatal(err)
	}
	want = stored(upd)
	got, err = s.Get(ctx, rec.ID)
	check("Get after an Update that pauses", got, err)

	// A record created with none has the zero lifecycle.
	plain := mustCreate(t, s, newRec(ident("t", "c", "plain")))
	if got := mustGet(t, s, plain.ID); got.Lifecycle != (contexts.Lifecycle{}) {
		t.Fatalf("lifecycle of a record created without one: %+v", got.Lifecycle)
	}
}

// testSuspend: a context suspended to disk (Manager.Suspend) is a ready
// record with no sandbox and the id of the image it wakes from; it stays
// active (listed, counted, unique by identity, found by ListExpired at its
// expiry), keeps its counters, another tenant neither sees nor changes
// it, and waking it (a new sandbox, SuspendImage cleared) is an Update.
func testSuspend(t *testing.T, s store.Backend) {
	bg := context.Background()
	ctxA, ctxB := tenant.WithID(bg, "A"), tenant.WithID(bg, "B")
	rec := newRec(ident("A", "c", "main"))
	rec.State, rec.SandboxID = contexts.StateReady, "sb-1"
	if err := s.Create(ctxA, rec); err != nil {
		t.Fatal(err)
	}
	if _, err := s.RecordExecution(ctxA, rec.ID, 1, time.Second, base.Add(time.Minute), base.Add(31*time.Minute)); err != nil {
		t.Fatal(err)
	}
	sus := mustGet(t, s, rec.ID)
	at := base.Add(2 * time.Minute)
	sus.SandboxID, sus.PausedAt, sus.SuspendImage, sus.SuspendHeld = "", &at, "0b1c2d3e-0000-4000-8000-00000000000b", true
	if err := s.Update(ctxA, sus); err != nil {
		t.Fatalf("Update that suspends: %v", err)
	}
	want := stored(sus)
	for what, get := range map[string]func() (*contexts.Record, error){
		"Get":       func() (*contexts.Record, error) { return s.Get(ctxA, rec.ID) },
		"GetActive": func() (*contexts.Record, error) { return s.GetActive(bg, rec.Identity) },
		"ListActive": func() (*contexts.Record, error) {
			recs, err := s.ListActive(bg)
			if err != nil || len(recs) != 1 {
				return nil, fmt.Errorf("%d records, %v", len(recs), err)
			}
			return recs[0], nil
		},
		"ListExpired": func() (*contexts.Record, error) {
			recs, err := s.ListExpired(bg, base.Add(time.Hour), 0)
			if err != nil || len(recs) != 1 {
				return nil, fmt.Errorf("%d records, %v", len(recs), err)
			}
			return recs[0], nil
		},
	} {
		got, err := get()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if d := cmp.Diff(want, got, cmpNet); d != "" {
			t.Fatalf("%s of a suspended context (-want +got):\n%s", what, d)
		}
	}
	if n, err := s.CountActive(bg, "A", "", ""); err != nil || n != 1 {
		t.Fatalf("CountActive with a suspended context: %d, %v; want 1", n, err)
	}
	wantErr(t, "Create beside a suspended context", s.Create(bg, newRec(ident("A", "c", "main"))), errdefs.ErrAlreadyExists)

	// Another tenant: not found, and its Update changes nothing.
	_, err := s.Get(ctxB, rec.ID)
	wantErr(t, "Get another tenant's suspended context", err, errdefs.ErrNotFound)
	steal := sus.Clone()
	steal.SuspendImage, steal.PausedAt, steal.SandboxID = "", nil, "sb-stolen"
	wantErr(t, "wake another tenant's suspended context", s.Update(ctxB, steal), errdefs.ErrNotFound)
	if got := mustGet(t, s, rec.ID); got.SuspendImage != sus.SuspendImage || got.SandboxID != "" {
		t.Fatalf("after another tenant's Update: sandbox %q image %q", got.SandboxID, got.SuspendImage)
	}

	// Woken: a new sandbox, the image cleared, the counters kept.
	woke := mustGet(t, s, rec.ID)
	woke.SandboxID, woke.PausedAt, woke.SuspendImage, woke.SuspendHeld = "sb-2", nil, "", false
	if err := s.Update(ctxA, woke); err != nil {
		t.Fatalf("Update that wakes: %v", err)
	}
	got := mustGet(t, s, rec.ID)
	if got.Suspended() || got.Paused() || got.SuspendHeld || got.SandboxID != "sb-2" || got.ExecutionCount != 1 {
		t.Fatalf("woken: %+v", got)
	}
	// Ended while suspended: the record keeps the image's id, for the
	// teardown that frees it.
	sus2 := got.Clone()
	sus2.SandboxID, sus2.SuspendImage = "", "0b1c2d3e-0000-4000-8000-00000000000c"
	if err := s.Update(ctxA, sus2); err != nil {
		t.Fatal(err)
	}
	if ok, err := s.Terminate(ctxA, rec.ID, contexts.ReasonExpired, base.Add(time.Hour), ""); err != nil || !ok {
		t.Fatalf("Terminate: %v, %v", ok, err)
	}
	if got := mustGet(t, s, rec.ID); got.SuspendImage != sus2.SuspendImage || got.State != contexts.StateTerminated {
		t.Fatalf("ended while suspended: state %s image %q", got.State, got.SuspendImage)
	}
}

// testReservedMetadata: metadata is the caller's labels; a key under
// contexts.ReservedPrefix is refused on Create and Update, and nothing is
// written.
func testReservedMetadata(t *testing.T, s store.Backend) {
	ctx := context.Background()
	bad := newRec(ident("t", "c", "main"))
	bad.Metadata = map[string]string{"user": "alice", "sandlot.paused": "2026-01-01T00:00:00Z"}
	wantErr(t, "Create with a sandlot. key", s.Create(ctx, bad), errdefs.ErrInvalidArgument)
	if _, err := s.GetActive(ctx, bad.Identity); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("GetActive after a refused Create: %v, want not_found", err)
	}
	rec := mustCreate(t, s, newRec(ident("t", "c", "main")))
	upd := rec.Clone()
	upd.Metadata = map[string]string{"sandlot.network": "{}"}
	wantErr(t, "Update with a sandlot. key", s.Update(ctx, upd), errdefs.ErrInvalidArgument)
	if got := mustGet(t, s, rec.ID); got.Metadata != nil {
		t.Fatalf("metadata after a refused Update: %v", got.Metadata)
	}
	// A key that only looks alike is the caller's.
	ok := newRec(ident("t", "c", "other"))
	ok.Metadata = map[string]string{"sandlotDeployment": "d", "x.sandlot.y": "z"}
	mustCreate(t, s, ok)
}

// LegacyRow is a row's metadata as sandlot wrote it before schema version
// 6 kept the lifecycle in columns; Want is the record's lifecycle and
// metadata once migrated.
type LegacyRow struct {
	ID       string
	Metadata map[string]string
	Want     contexts.Lifecycle
	WantMeta map[string]string
}

// LegacyRows are the rows a store's migration test writes with the
// schema before version 6 (its own SQL), to open them with the store and
// check them with CheckLegacy.
func LegacyRows() []LegacyRow {
	paused := time.Date(2026, 3, 4, 5, 6, 7, 891_000_000, time.UTC)
	network, err := json.Marshal(testPolicy()) // as the manager wrote it
	if err != nil {
		panic(err)
	}
	return []LegacyRow{
		{
			ID: "6f1d1a8e-0000-4000-8000-000000000001",
			Metadata: map[string]string{
				"sandlot.paused": "2026-03-04T05:06:07.891234567Z", "sandlot.autoPause": "168h0m0s",
				"sandlot.autoResume": "5m0s", "sandlot.fixedExpiry": "true", "sandlot.maxExecutions": "-1",
				"sandlot.network":     string(network),
				"sandlot.e2bTemplate": "code-interpreter-v1", "conversationId": "conv", "user": "alice",
			},
			Want: contexts.Lifecycle{PausedAt: &paused, AutoPause: 168 * time.Hour, AutoResume: 5 * time.Minute,
				FixedExpiry: true, MaxExecutions: -1, Network: testPolicy(), TemplateName: "code-interpreter-v1"},
			WantMeta: map[string]string{"conversationId": "conv", "user": "alice"},
		},
		{
			// Running, with a rotation limit and a key sandlot never wrote.
			ID:       "6f1d1a8e-0000-4000-8000-000000000002",
			Metadata: map[string]string{"sandlot.maxExecutions": "50", "sandlot.somethingElse": "x"},
			Want:     contexts.Lifecycle{MaxExecutions: 50},
		},
		{
			// The caller's metadata only: untouched.
			ID:       "6f1d1a8e-0000-4000-8000-000000000003",
			Metadata: map[string]string{"team": "x", "sandlotDeployment": "d"},
			WantMeta: map[string]string{"team": "x", "sandlotDeployment": "d"},
		},
		{
			// No metadata at all.
			ID: "6f1d1a8e-0000-4000-8000-000000000004",
		},
	}
}

// CheckLegacy checks that s, opened on a database whose LegacyRows were
// written before schema version 6, gives them back with their lifecycle
// in typed fields and only the caller's metadata, and that a metadata
// filter on the caller's keys still finds them.
func CheckLegacy(t *testing.T, s contexts.Store) {
	t.Helper()
	ctx := context.Background()
	for _, row := range LegacyRows() {
		got, err := s.Get(ctx, row.ID)
		if err != nil {
			t.Fatalf("Get(%s) after migrating: %v", row.ID, err)
		}
		if d := cmp.Diff(row.Want, got.Lifecycle, cmpNet); d != "" {
			t.Errorf("%s: lifecycle after migrating (-want +got):\n%s", row.ID, d)
		}
		if d := cmp.Diff(row.WantMeta, got.Metadata); d != "" {
			t.Errorf("%s: metadata after migrating (-want +got):\n%s", row.ID, d)
		}
	}
	recs, err := s.List(ctx, contexts.Filter{Metadata: map[string]string{"user": "alice"}})
	if err != nil || len(recs) != 1 || recs[0].ID != LegacyRows()[0].ID {
		t.Fatalf("List by the caller's metadata after migrating: %v, %v", ids(recs), err)
	}
}
