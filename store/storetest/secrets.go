package storetest

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/network/secret"
	"github.com/sandlot/sandlot/store"
	"github.com/sandlot/sandlot/tenant"
)

// testSecrets: put, replace (the ID, so the placeholder, stays), get in
// order, list without values, delete; bad input; another tenant's scope
// neither sees nor writes them; deleting the tenant deletes them.
func testSecrets(t *testing.T, s store.Backend) {
	ctx := context.Background()
	for i, id := range []string{"A", "B"} {
		if err := s.CreateTenant(ctx, &tenant.Tenant{ID: id, CreatedAt: base}, tenant.HashKey("e2b_k"+id+strings.Repeat("x", i))); err != nil {
			t.Fatal(err)
		}
	}
	put := func(ctx context.Context, tn, name, value string, hosts ...string) (secret.Stored, error) {
		return s.PutSecret(ctx, tn, secret.Stored{Name: name, Env: "TOKEN_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_")),
			Secret: secret.Secret{Hosts: hosts, Value: value}})
	}
	first, err := put(ctx, "A", "gh-token", "ghp_first_value", "api.github.com")
	if err != nil {
		t.Fatal(err)
	}
	if first.ID == "" || first.CreatedAt.IsZero() {
		t.Fatalf("put: %+v", first)
	}
	again, err := put(ctx, "A", "gh-token", "ghp_second_value", "api.github.com", "*.githubusercontent.com")
	if err != nil {
		t.Fatal(err)
	}
	if again.ID != first.ID || !again.CreatedAt.Equal(first.CreatedAt) {
		t.Errorf("replace changed the id or creation: %+v then %+v", first, again)
	}
	if _, err := put(ctx, "A", "aws", "AKIAEXAMPLEVALUE", "*.amazonaws.com"); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetSecrets(ctx, "A", []string{"gh-token", "aws"})
	if err != nil || len(got) != 2 || got[0].Name != "gh-token" || got[0].Value != "ghp_second_value" || len(got[0].Hosts) != 2 ||
		got[1].Value != "AKIAEXAMPLEVALUE" || got[0].Env != "TOKEN_GH_TOKEN" {
		t.Fatalf("get: %+v %v", got, err)
	}
	all, err := s.GetSecrets(ctx, "A", nil)
	if err != nil || len(all) != 2 {
		t.Fatalf("get all: %+v %v", all, err)
	}
	list, err := s.ListSecrets(ctx, "A")
	if err != nil || len(list) != 2 || list[0].Name != "aws" || list[0].Value != "" || list[1].Value != "" || list[1].ID != first.ID {
		t.Fatalf("list: %+v %v", list, err)
	}
	wantErr(t, "get an unknown name", func() error { _, err := s.GetSecrets(ctx, "A", []string{"gh-token", "nope"}); return err }(), errdefs.ErrNotFound)
	for _, bad := range []struct {
		name, value string
		hosts       []string
	}{{"", "value1", []string{"a.test"}}, {"bad name", "value1", []string{"a.test"}}, {"ok", "", []string{"a.test"}}, {"ok", "value1", nil}, {"ok", "value1", []string{"*"}}} {
		if _, err := put(ctx, "A", bad.name, bad.value, bad.hosts...); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("put %q %v: err = %v, want invalid", bad.name, bad.hosts, err)
		}
	}
	if _, err := s.PutSecret(ctx, "A", secret.Stored{Name: "x", Env: "1BAD", Secret: secret.Secret{Hosts: []string{"a.test"}, Value: "value1"}}); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("bad env name: %v", err)
	}
	if _, err := put(ctx, "nobody", "x", "value1", "a.test"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("secret of an unknown tenant: %v", err)
	}
	// B's scope sees none of A's secrets and cannot write them.
	bctx := tenant.WithID(ctx, "B")
	if got, err := s.GetSecrets(bctx, "A", nil); err != nil || len(got) != 0 {
		t.Errorf("B read A's secrets: %+v %v", got, err)
	}
	if got, err := s.ListSecrets(bctx, "A"); err != nil || len(got) != 0 {
		t.Errorf("B listed A's secrets: %+v %v", got, err)
	}
	wantErr(t, "B writes A's secret", func() error { _, err := put(bctx, "A", "gh-token", "stolen-value", "evil.test"); return err }(), errdefs.ErrPermissionDenied)
	wantErr(t, "B deletes A's secret", s.DeleteSecret(bctx, "A", "gh-token"), errdefs.ErrNotFound)
	if got, _ := s.GetSecrets(ctx, "A", []string{"gh-token"}); len(got) != 1 || got[0].Value != "ghp_second_value" {
		t.Errorf("A's secret changed: %+v", got)
	}
	if _, err := put(bctx, "B", "gh-token", "b-own-value", "api.github.com"); err != nil {
		t.Errorf("B puts its own: %v", err)
	}
	if err := s.DeleteSecret(ctx, "A", "aws"); err != nil {
		t.Fatal(err)
	}
	wantErr(t, "delete twice", s.DeleteSecret(ctx, "A", "aws"), errdefs.ErrNotFound)
	if err := s.DeleteTenant(ctx, "A"); err != nil {
		t.Fatal(err)
	}
	if got, err := s.GetSecrets(ctx, "A", nil); err != nil || len(got) != 0 {
		t.Errorf("secrets outlived their tenant: %+v %v", got, err)
	}
	if got, _ := s.GetSecrets(ctx, "B", nil); len(got) != 1 || got[0].Value != "b-own-value" {
		t.Errorf("B's secrets: %+v", got)
	}
}
