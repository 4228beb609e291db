package client_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sandlot/sandlot/api"
	"github.com/sandlot/sandlot/api/server"
	"github.com/sandlot/sandlot/api/server/servertest"
	"github.com/sandlot/sandlot/client"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/store/memory"
	"github.com/sandlot/sandlot/tenant"
)

// TestKeysAndUsage: a tenant makes a key, which works at once and is
// listed by its prefix, never whole; revoking it ends it; its last key
// cannot be revoked, and another tenant's key id is not found. Usage
// answers the tenant's own quotas.
func TestKeysAndUsage(t *testing.T) {
	ctx := context.Background()
	st := memory.New()
	keys := map[string]string{}
	for _, id := range []string{"tenant-a", "tenant-b"} {
		key, err := tenant.NewKey()
		if err != nil {
			t.Fatal(err)
		}
		if err := st.CreateTenant(ctx, &tenant.Tenant{ID: id, KeyPrefix: tenant.Prefix(key)}, tenant.HashKey(key)); err != nil {
			t.Fatal(err)
		}
		keys[id] = key
	}
	quotas := func(_ context.Context, tenantID string) ([]api.Quota, error) {
		return []api.Quota{{Name: "contexts", Used: int64(len(tenantID)), Limit: 10, Description: "Active contexts."}}, nil
	}
	e := servertest.NewEnv(func(c *server.Config) {
		c.Auth = tenant.NewAuthenticator(st, tenant.AuthConfig{CacheTTL: time.Hour})
		c.Keys = st
		c.Usage = quotas
	})
	ts := httptest.NewServer(e.Handler)
	t.Cleanup(ts.Close)
	a := client.New(ts.URL, client.WithAPIKey(keys["tenant-a"]))
	b := client.New(ts.URL, client.WithAPIKey(keys["tenant-b"]))

	made, err := a.CreateKey(ctx, "ci runner")
	if err != nil || made.Key == "" || made.Name != "ci runner" || made.Prefix != tenant.Prefix(made.Key) {
		t.Fatalf("CreateKey: %+v %v", made, err)
	}
	ci := client.New(ts.URL, client.WithAPIKey(made.Key))
	l, err := ci.ListKeys(ctx)
	if err != nil || len(l.Keys) != 2 {
		t.Fatalf("ListKeys with the new key: %+v %v", l, err)
	}
	var current []string
	for _, k := range l.Keys {
		if k.Current {
			current = append(current, k.ID)
		}
	}
	if diff := cmp.Diff([]string{made.ID}, current); diff != "" {
		t.Errorf("the current key (-want +got):\n%s", diff)
	}
	if err := b.RevokeKey(ctx, made.ID); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("tenant-b revokes tenant-a's key: %v, want not found", err)
	}
	if err := a.RevokeKey(ctx, made.ID); err != nil {
		t.Fatalf("RevokeKey: %v", err)
	}
	if _, err := ci.ListKeys(ctx); !errors.Is(err, errdefs.ErrUnauthenticated) {
		t.Errorf("the revoked key: %v, want unauthenticated", err)
	}
	l, err = a.ListKeys(ctx)
	if err != nil || len(l.Keys) != 1 || !l.Keys[0].Current {
		t.Fatalf("ListKeys after the revoke: %+v %v", l, err)
	}
	if err := a.RevokeKey(ctx, l.Keys[0].ID); !errors.Is(err, errdefs.ErrFailedPrecondition) {
		t.Errorf("revoking the last key: %v, want failed precondition", err)
	}

	u, err := b.Usage(ctx)
	want := &api.Usage{Tenant: "tenant-b", Quotas: []api.Quota{{Name: "contexts", Used: 8, Limit: 10, Description: "Active contexts."}}}
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, u); diff != "" {
		t.Errorf("Usage (-want +got):\n%s", diff)
	}
}
