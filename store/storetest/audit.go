package storetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/store"
	"github.com/sandlot/sandlot/tenant"
)

// testAuditBatch: a batch lands in order with increasing ids, as the
// single appends do; a batch with one bad event (no kind, or another
// tenant's under a tenant's scope) writes nothing.
func testAuditBatch(t *testing.T, s store.Backend) {
	ctx := context.Background()
	var batch []store.AuditEvent
	for i := range 300 {
		tn := []string{"A", "B", ""}[i%3]
		batch = append(batch, store.AuditEvent{TenantID: tn, ContextID: fmt.Sprint("ctx-", i), Kind: "network.dns",
			Detail: map[string]string{"host": fmt.Sprintf("n%d.example.org", i)}, At: base.Add(time.Duration(i) * time.Millisecond)})
	}
	batch[7].Detail = nil
	if err := s.AppendAuditBatch(ctx, batch); err != nil {
		t.Fatal(err)
	}
	if err := s.AppendAuditBatch(ctx, nil); err != nil {
		t.Fatalf("empty batch: %v", err)
	}
	got, err := s.ListAudit(ctx, "", 1000)
	if err != nil || len(got) != len(batch) {
		t.Fatalf("ListAudit = %d events, %v; want %d", len(got), err, len(batch))
	}
	for i, ev := range got {
		want := batch[len(batch)-1-i]
		want.ID, want.At = ev.ID, ms(want.At)
		if d := cmp.Diff(want, ev); d != "" {
			t.Fatalf("event %d (-want +got):\n%s", i, d)
		}
		if i > 0 && got[i-1].ID <= ev.ID {
			t.Fatalf("ids not in the batch's order: %d then %d", ev.ID, got[i-1].ID)
		}
	}

	bad := []store.AuditEvent{{TenantID: "A", Kind: "x"}, {TenantID: "A"}}
	wantErr(t, "a batch with an event without kind", s.AppendAuditBatch(ctx, bad), errdefs.ErrInvalidArgument)
	ctxA := tenant.WithID(ctx, "A")
	mixed := []store.AuditEvent{{TenantID: "A", Kind: "x"}, {TenantID: "B", Kind: "x"}}
	wantErr(t, "a scoped batch holding another tenant's event", s.AppendAuditBatch(ctxA, mixed), errdefs.ErrPermissionDenied)
	if err := s.AppendAuditBatch(ctxA, mixed[:1]); err != nil {
		t.Fatalf("a scoped batch of its own tenant: %v", err)
	}
	if after, _ := s.ListAudit(ctx, "", 1000); len(after) != len(batch)+1 {
		t.Fatalf("refused batches wrote events: %d, want %d", len(after), len(batch)+1)
	}
}

// testAuditRetention: PruneAudit removes events older than the cutoff,
// at most limit per call, keeps the rest and the order of ids (a new
// event still gets the highest id), and is refused to a tenant.
func testAuditRetention(t *testing.T, s store.Backend) {
	ctx := context.Background()
	cutoff := base.Add(time.Hour)
	var batch []store.AuditEvent
	for i := range 25 {
		at := cutoff.Add(-time.Duration(25-i) * time.Minute) // 20 old ones: cutoff-25m .. cutoff-1m
		if i >= 20 {
			at = cutoff.Add(time.Duration(i) * time.Minute)
		}
		batch = append(batch, store.AuditEvent{TenantID: []string{"A", "B"}[i%2], Kind: "network.dns", At: at})
	}
	// An event exactly at the cutoff is kept: only older ones go.
	batch = append(batch, store.AuditEvent{TenantID: "A", Kind: "context.terminated", At: cutoff})
	if err := s.AppendAuditBatch(ctx, batch); err != nil {
		t.Fatal(err)
	}
	before, _ := s.ListAudit(ctx, "", 1000)

	_, err := s.PruneAudit(tenant.WithID(ctx, "A"), cutoff, 0)
	wantErr(t, "PruneAudit scoped to a tenant", err, errdefs.ErrPermissionDenied)

	n, err := s.PruneAudit(ctx, cutoff, 15)
	if err != nil || n != 15 {
		t.Fatalf("PruneAudit(limit 15) = %d, %v; want 15", n, err)
	}
	n, err = s.PruneAudit(ctx, cutoff, 0)
	if err != nil || n != 5 {
		t.Fatalf("PruneAudit(the rest) = %d, %v; want 5", n, err)
	}
	if n, err := s.PruneAudit(ctx, cutoff, 0); err != nil || n != 0 {
		t.Fatalf("PruneAudit(nothing left) = %d, %v", n, err)
	}
	got, err := s.ListAudit(ctx, "", 1000)
	if err != nil || len(got) != 6 {
		t.Fatalf("after pruning: %d events, %v; want 6", len(got), err)
	}
	if d := cmp.Diff(before[:6], got); d != "" {
		t.Fatalf("kept events (-want +got):\n%s", d)
	}
	for _, ev := range got {
		if ev.At.Before(ms(cutoff)) {
			t.Fatalf("an event older than the cutoff is left: %+v", ev)
		}
	}
	if err := s.AppendAudit(ctx, store.AuditEvent{TenantID: "B", Kind: "tenant.key_rotated"}); err != nil {
		t.Fatal(err)
	}
	if newest, err := s.ListAudit(ctx, "", 1); err != nil || newest[0].ID <= got[0].ID {
		t.Fatalf("a new event after pruning got id %d, not above %d (%v)", newest[0].ID, got[0].ID, err)
	}
}

// testAuditKind: a list of one kind is the newest limit events of that
// kind, however many newer events of other kinds follow them, and only
// the tenant's.
func testAuditKind(t *testing.T, s store.Backend) {
	ctx := context.Background()
	add := func(tn, kind string) {
		t.Helper()
		if err := s.AppendAudit(ctx, store.AuditEvent{TenantID: tn, Kind: kind}); err != nil {
			t.Fatal(err)
		}
	}
	add("A", "kind.old")
	add("B", "kind.old")
	for range 5 {
		add("A", "kind.new")
	}
	old, err := s.ListAuditKind(ctx, "A", "kind.old", 2)
	if err != nil || len(old) != 1 || old[0].Kind != "kind.old" || old[0].TenantID != "A" {
		t.Fatalf("ListAuditKind(A, kind.old, 2) = %+v, %v; want A's one event behind five newer of another kind", old, err)
	}
	newer, err := s.ListAuditKind(ctx, "A", "kind.new", 2)
	if err != nil || len(newer) != 2 || newer[0].ID <= newer[1].ID || newer[0].Kind != "kind.new" {
		t.Fatalf("ListAuditKind(A, kind.new, 2) = %+v, %v; want the two newest, newest first", newer, err)
	}
	if all, err := s.ListAuditKind(ctx, "", "kind.old", 10); err != nil || len(all) != 2 {
		t.Fatalf("ListAuditKind(all tenants, kind.old) = %+v, %v; want A's and B's", all, err)
	}
	if any, err := s.ListAuditKind(ctx, "A", "", 3); err != nil || len(any) != 3 || any[0].Kind != "kind.new" {
		t.Fatalf("ListAuditKind(A, any kind, 3) = %+v, %v", any, err)
	}
}
