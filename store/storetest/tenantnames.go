package storetest

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/store"
	"github.com/sandlot/sandlot/tenant"
)

// testTenantNames: a tenant's name is unique in the store, as its id is,
// so a name addresses one tenant wherever an id does (`sandlot mcp
// --tenant default`, `tenant rotate-key acme`). Two tenants named alike
// would make "the tenant named default" either of them: a session could
// run as the wrong tenant. Racing creates of one name make one tenant;
// renaming onto a taken name is refused; an empty name is no name and
// may repeat; a deleted tenant's name is free again.
func testTenantNames(t *testing.T, s store.Backend) {
	ctx := context.Background()
	if err := s.CreateTenant(ctx, &tenant.Tenant{ID: "N1", Name: "acme"}, tenant.HashKey("e2b_n1")); err != nil {
		t.Fatal(err)
	}
	err := s.CreateTenant(ctx, &tenant.Tenant{ID: "N2", Name: "acme"}, tenant.HashKey("e2b_n2"))
	wantErr(t, "CreateTenant with a taken name", err, errdefs.ErrAlreadyExists)
	if _, err := s.GetTenant(ctx, "N2"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("a refused create left tenant N2: %v", err)
	}
	if _, err := s.TenantByKeyHash(ctx, tenant.HashKey("e2b_n2")); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("a refused create left its key: %v", err)
	}

	if err := s.CreateTenant(ctx, &tenant.Tenant{ID: "N3", Name: "other"}, ""); err != nil {
		t.Fatal(err)
	}
	wantErr(t, "UpdateTenant onto a taken name", s.UpdateTenant(ctx, &tenant.Tenant{ID: "N3", Name: "acme", GuardMode: tenant.GuardEnforce}), errdefs.ErrAlreadyExists)
	if got, err := s.GetTenant(ctx, "N3"); err != nil || got.Name != "other" {
		t.Fatalf("tenant N3 after a refused rename: %+v %v", got, err)
	}

	for _, id := range []string{"E1", "E2"} {
		if err := s.CreateTenant(ctx, &tenant.Tenant{ID: id}, ""); err != nil {
			t.Fatalf("a second tenant without a name: %v", err)
		}
	}

	if err := s.DeleteTenant(ctx, "N1"); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateTenant(ctx, &tenant.Tenant{ID: "N4", Name: "acme"}, ""); err != nil {
		t.Fatalf("the name of a deleted tenant: %v", err)
	}

	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = s.CreateTenant(mixedCtx(i, ""), &tenant.Tenant{Name: "race"}, "")
		}()
	}
	wg.Wait()
	made := 0
	for _, err := range errs {
		switch {
		case err == nil:
			made++
		case !errors.Is(err, errdefs.ErrAlreadyExists):
			t.Errorf("racing create: %v", err)
		}
	}
	if made != 1 {
		t.Fatalf("%d tenants named race from 8 racing creates, want 1", made)
	}
}

// LegacyTenant is a tenants row as a store before migration 8 could hold
// it: names repeated.
type LegacyTenant struct {
	ID, Name  string
	CreatedMs int64 // created_at, in milliseconds since the epoch
}

// LegacyTenants are rows a store's upgrade test writes before migration 8:
// two tenants share "acme" (the older keeps it), two have no name, one
// has its own.
func LegacyTenants() []LegacyTenant {
	return []LegacyTenant{
		{"b2222222-0000-4000-8000-000000000002", "acme", 2000},
		{"a1111111-0000-4000-8000-000000000001", "acme", 1000},
		{"c3333333-0000-4000-8000-000000000003", "", 3000},
		{"d4444444-0000-4000-8000-000000000004", "", 4000},
		{"e5555555-0000-4000-8000-000000000005", "solo", 5000},
	}
}

// CheckTenantNames checks s, upgraded from LegacyTenants: the oldest acme
// kept its name, the other got its id's first 8 characters, nameless and
// unique names are as they were, and the name is unique from now on.
func CheckTenantNames(t *testing.T, s store.Backend) {
	t.Helper()
	ctx := context.Background()
	want := map[string]string{
		"a1111111-0000-4000-8000-000000000001": "acme",
		"b2222222-0000-4000-8000-000000000002": "acme-b2222222",
		"c3333333-0000-4000-8000-000000000003": "",
		"d4444444-0000-4000-8000-000000000004": "",
		"e5555555-0000-4000-8000-000000000005": "solo",
	}
	for id, name := range want {
		got, err := s.GetTenant(ctx, id)
		if err != nil || got.Name != name {
			t.Errorf("tenant %s after the upgrade: %+v %v; want name %q", id, got, err, name)
		}
	}
	err := s.CreateTenant(ctx, &tenant.Tenant{Name: "acme"}, "")
	wantErr(t, "CreateTenant acme after the upgrade", err, errdefs.ErrAlreadyExists)
}
