package storetest

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/store"
	"github.com/sandlot/sandlot/tenant"
)

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

	// The guard's entity types: nil (the daemon's default), empty (none)
	// and a list are three answers, each kept as it was given.
	for _, ents := range [][]string{{"PERSON", "ADDRESS"}, {}, nil} {
		upd.GuardEntities = ents
		if err := s.UpdateTenant(ctx, upd); err != nil {
			t.Fatal(err)
		}
		got, _ = s.GetTenant(ctx, "A")
		if !slices.Equal(got.GuardEntities, ents) || (got.GuardEntities == nil) != (ents == nil) {
			t.Fatalf("GuardEntities %#v came back %#v", ents, got.GuardEntities)
		}
	}
	wantErr(t, "UpdateTenant unknown entity type", s.UpdateTenant(ctx, &tenant.Tenant{ID: "A", GuardMode: tenant.GuardOff, GuardEntities: []string{"SHOE_SIZE"}}), errdefs.ErrInvalidArgument)
	wantErr(t, "CreateTenant unknown entity type", s.CreateTenant(ctx, &tenant.Tenant{ID: "E", GuardEntities: []string{"SHOE_SIZE"}}, ""), errdefs.ErrInvalidArgument)
	withEnts := &tenant.Tenant{ID: "F", Name: "phi", GuardEntities: []string{"LOCATION"}, IdleSuspendSeconds: 600, CreatedAt: base.Add(2 * time.Second)}
	if err := s.CreateTenant(ctx, withEnts, ""); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.GetTenant(ctx, "F"); got == nil || !slices.Equal(got.GuardEntities, []string{"LOCATION"}) || got.IdleSuspendSeconds != 600 {
		t.Fatalf("CreateTenant's GuardEntities and IdleSuspendSeconds came back %+v", got)
	}
	// The idle suspend setting: kept by UpdateTenant, never negative.
	upd.IdleSuspendSeconds = 90
	if err := s.UpdateTenant(ctx, upd); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.GetTenant(ctx, "A"); got.IdleSuspendSeconds != 90 {
		t.Fatalf("IdleSuspendSeconds 90 came back %d", got.IdleSuspendSeconds)
	}
	upd.IdleSuspendSeconds = 0
	if err := s.UpdateTenant(ctx, upd); err != nil {
		t.Fatal(err)
	}
	wantErr(t, "UpdateTenant negative idle suspend", s.UpdateTenant(ctx, &tenant.Tenant{ID: "A", GuardMode: tenant.GuardOff, IdleSuspendSeconds: -1}), errdefs.ErrInvalidArgument)
	wantErr(t, "CreateTenant negative idle suspend", s.CreateTenant(ctx, &tenant.Tenant{ID: "E", IdleSuspendSeconds: -1}, ""), errdefs.ErrInvalidArgument)
	if err := s.DeleteTenant(ctx, "F"); err != nil {
		t.Fatal(err)
	}

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
	_, err = s.RecordExecution(ctxA, b.ID, 1, time.Second, base, base)
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
	if n, err := s.CountActive(ctxA, "B", "", ""); err != nil || n != 0 {
		t.Fatalf("CountActive(B) scoped to A = %d, %v; want 0", n, err)
	}
	if n, err := s.CountActive(ctxB, "B", "", ""); err != nil || n != 1 {
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
