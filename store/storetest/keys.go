package storetest

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/store"
	"github.com/sandlot/sandlot/tenant"
)

// testKeys: a tenant's several keys, each tenant's walled from the other's.
func testKeys(t *testing.T, s store.Backend) {
	ctx := context.Background()
	for _, id := range []string{"A", "B"} {
		if err := s.CreateTenant(ctx, &tenant.Tenant{ID: id, KeyPrefix: "e2b_" + id}, tenant.HashKey("e2b_"+id)); err != nil {
			t.Fatal(err)
		}
	}
	list := func(id string) []*tenant.Key {
		t.Helper()
		ks, err := s.ListKeys(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return ks
	}
	first := list("A")
	if len(first) != 1 || first[0].Prefix != "e2b_A" || first[0].ID == "" || first[0].LastUsedAt != nil {
		t.Fatalf("A's keys after CreateTenant = %+v", first)
	}
	added := &tenant.Key{TenantID: "A", Name: "ci", Prefix: "e2b_a2"}
	if err := s.AddKey(ctx, added, tenant.HashKey("e2b_a2")); err != nil {
		t.Fatal(err)
	}
	if added.ID == "" || added.ID == first[0].ID || added.CreatedAt.IsZero() {
		t.Fatalf("AddKey filled %+v", added)
	}
	if got, err := s.TenantByKeyHash(ctx, tenant.HashKey("e2b_a2")); err != nil || got.ID != "A" {
		t.Fatalf("TenantByKeyHash of the added key = %+v, %v", got, err)
	}
	ks := list("A")
	var got *tenant.Key
	for _, k := range ks {
		if k.ID == added.ID {
			got = k
		}
	}
	if len(ks) != 2 || got == nil || got.Name != "ci" || got.Prefix != "e2b_a2" || !got.CreatedAt.Equal(added.CreatedAt) {
		t.Fatalf("A's keys = %+v, want two with %+v", ks, added)
	}

	wantErr(t, "AddKey of a taken hash", s.AddKey(ctx, &tenant.Key{TenantID: "B"}, tenant.HashKey("e2b_a2")), errdefs.ErrAlreadyExists)
	wantErr(t, "AddKey to no tenant", s.AddKey(ctx, &tenant.Key{TenantID: "nope"}, tenant.HashKey("e2b_x")), errdefs.ErrNotFound)
	wantErr(t, "AddKey with a control character", s.AddKey(ctx, &tenant.Key{TenantID: "A", Name: "a\nb"}, tenant.HashKey("e2b_y")), errdefs.ErrInvalidArgument)
	wantErr(t, "AddKey with a long name", s.AddKey(ctx, &tenant.Key{TenantID: "A", Name: strings.Repeat("n", tenant.MaxKeyName+1)}, tenant.HashKey("e2b_z")), errdefs.ErrInvalidArgument)

	// B cannot revoke A's key by its id, nor see it.
	_, err := s.RevokeKey(ctx, "B", added.ID)
	wantErr(t, "RevokeKey of another tenant's key", err, errdefs.ErrNotFound)
	for _, k := range list("B") {
		if k.ID == added.ID || k.ID == first[0].ID {
			t.Fatalf("B's list holds A's key %s", k.ID)
		}
	}
	if len(list("A")) != 2 {
		t.Fatal("B's revocation removed A's key")
	}

	// The last key stays.
	b := list("B")
	_, err = s.RevokeKey(ctx, "B", b[0].ID)
	wantErr(t, "RevokeKey of the last key", err, errdefs.ErrFailedPrecondition)
	if got, err := s.TenantByKeyHash(ctx, tenant.HashKey("e2b_B")); err != nil || got.ID != "B" {
		t.Fatalf("B's last key after a refused revocation: %+v, %v", got, err)
	}

	hash, err := s.RevokeKey(ctx, "A", first[0].ID)
	if err != nil || hash != tenant.HashKey("e2b_A") {
		t.Fatalf("RevokeKey = %q, %v; want the key's hash", hash, err)
	}
	if _, err := s.TenantByKeyHash(ctx, hash); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("TenantByKeyHash of a revoked key: %v, want not found", err)
	}
	_, err = s.RevokeKey(ctx, "A", first[0].ID)
	wantErr(t, "RevokeKey twice", err, errdefs.ErrNotFound)

	// A statement scoped to a tenant (as every /v1 call is) works on that
	// tenant's keys and sees none of another's.
	ctxA, ctxB := tenant.WithID(ctx, "A"), tenant.WithID(ctx, "B")
	scoped := &tenant.Key{TenantID: "A", Name: "scoped"}
	if err := s.AddKey(ctxA, scoped, tenant.HashKey("e2b_scoped")); err != nil {
		t.Fatalf("AddKey scoped to its tenant: %v", err)
	}
	if ks, err := s.ListKeys(ctxA, "A"); err != nil || len(ks) != 2 {
		t.Fatalf("ListKeys scoped to its tenant: %v, %v", ks, err)
	}
	if ks, err := s.ListKeys(ctxB, "A"); err != nil || len(ks) != 0 {
		t.Fatalf("ListKeys of A scoped to B: %v, %v", ks, err)
	}
	_, err = s.RevokeKey(ctxB, "A", scoped.ID)
	wantErr(t, "RevokeKey of A's key scoped to B", err, errdefs.ErrNotFound)
	wantErr(t, "AddKey to A scoped to B", s.AddKey(ctxB, &tenant.Key{TenantID: "A"}, tenant.HashKey("e2b_intruder")), errdefs.ErrNotFound)
	if _, err := s.TenantByKeyHash(ctx, tenant.HashKey("e2b_intruder")); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("a key B added to A: %v", err)
	}
	if _, err := s.RevokeKey(ctxA, "A", scoped.ID); err != nil {
		t.Fatalf("RevokeKey scoped to its tenant: %v", err)
	}

	at := base.Add(time.Hour)
	if err := s.KeyUsed(ctx, tenant.HashKey("e2b_a2"), at); err != nil {
		t.Fatal(err)
	}
	if ks := list("A"); len(ks) != 1 || ks[0].LastUsedAt == nil || !ks[0].LastUsedAt.Equal(ms(at)) {
		t.Fatalf("after KeyUsed: %+v", ks)
	}

	// Rotation (SetKey) replaces every key of the tenant.
	for i := range 2 {
		if err := s.AddKey(ctx, &tenant.Key{TenantID: "A"}, tenant.HashKey("e2b_more"+string(rune('0'+i)))); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.SetKey(ctx, "A", tenant.HashKey("e2b_rot"), "e2b_rot"); err != nil {
		t.Fatal(err)
	}
	if ks := list("A"); len(ks) != 1 || ks[0].Prefix != "e2b_rot" {
		t.Fatalf("after SetKey: %+v", ks)
	}
	if _, err := s.TenantByKeyHash(ctx, tenant.HashKey("e2b_a2")); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("a key SetKey replaced still finds its tenant: %v", err)
	}

	// MaxKeys.
	for i := 1; i < tenant.MaxKeys; i++ {
		if err := s.AddKey(ctx, &tenant.Key{TenantID: "B"}, tenant.HashKey("e2b_b"+strings.Repeat("x", i))); err != nil {
			t.Fatalf("key %d: %v", i+1, err)
		}
	}
	wantErr(t, "AddKey past MaxKeys", s.AddKey(ctx, &tenant.Key{TenantID: "B"}, tenant.HashKey("e2b_over")), errdefs.ErrResourceExhausted)
}
