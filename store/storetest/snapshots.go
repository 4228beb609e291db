package storetest

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/store"
	"github.com/sandlot/sandlot/templates"
	"github.com/sandlot/sandlot/tenant"
)

// testSnapshots: a snapshot row needs its tenant's own template; lists are
// per tenant, newest first, filtered by context; deleting the template
// (or the tenant) deletes the row; tenant B neither lists nor writes A's.
func testSnapshots(t *testing.T, s store.Backend) {
	ctx := context.Background()
	for _, id := range []string{"A", "B"} {
		if err := s.CreateTenant(ctx, &tenant.Tenant{ID: id, CreatedAt: base}, tenant.HashKey("e2b_snap"+id)); err != nil {
			t.Fatal(err)
		}
	}
	tmpl := func(tn, name string) templates.Template {
		t.Helper()
		tp, err := s.CreateTemplate(ctx, templates.Template{TenantID: tn, Name: name, Image: digestA, Source: "snapshot", CreatedAt: base})
		if err != nil {
			t.Fatal(err)
		}
		return tp
	}
	a1, a2, b1 := tmpl("A", "s1"), tmpl("A", "s2"), tmpl("B", "s1")
	rows := []templates.Snapshot{
		{ID: a1.ID, TenantID: "A", ContextID: "ctx-1", Template: "default", Bytes: 10, CreatedAt: base},
		{ID: a2.ID, TenantID: "A", ContextID: "ctx-2", Template: "default", Bytes: 20, CreatedAt: base.Add(1e9)},
		{ID: b1.ID, TenantID: "B", ContextID: "ctx-3", Template: "default", Bytes: 30, CreatedAt: base},
	}
	for i, sn := range rows {
		if err := s.CreateSnapshot(tenant.WithID(ctx, sn.TenantID), sn); err != nil {
			t.Fatal(err)
		}
		rows[i].CreatedAt = ms(sn.CreatedAt)
	}
	for _, tc := range []struct {
		name string
		ctx  context.Context
		sn   templates.Snapshot
		want error
	}{
		{"B's row on A's template", ctx, templates.Snapshot{ID: a1.ID, TenantID: "B", ContextID: "c", Template: "default"}, errdefs.ErrNotFound},
		{"B writing A's row", tenant.WithID(ctx, "B"), templates.Snapshot{ID: a1.ID, TenantID: "A", ContextID: "c", Template: "default"}, errdefs.ErrPermissionDenied},
		{"no template", ctx, templates.Snapshot{ID: "nosuchtemplate000000", TenantID: "A", ContextID: "c", Template: "default"}, errdefs.ErrNotFound},
		{"no context", ctx, templates.Snapshot{ID: a1.ID, TenantID: "A", Template: "default"}, errdefs.ErrInvalidArgument},
	} {
		if err := s.CreateSnapshot(tc.ctx, tc.sn); !errors.Is(err, tc.want) {
			t.Errorf("%s: CreateSnapshot = %v, want %v", tc.name, err, tc.want)
		}
	}
	list := func(ctx context.Context, tn, c string) []templates.Snapshot {
		t.Helper()
		got, err := s.ListSnapshots(ctx, tn, c)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	if diff := cmp.Diff([]templates.Snapshot{rows[1], rows[0]}, list(ctx, "A", "")); diff != "" {
		t.Errorf("A's snapshots (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]templates.Snapshot{rows[0]}, list(tenant.WithID(ctx, "A"), "A", "ctx-1")); diff != "" {
		t.Errorf("A's snapshots of ctx-1 (-want +got):\n%s", diff)
	}
	if got := list(tenant.WithID(ctx, "B"), "A", ""); len(got) != 0 {
		t.Errorf("B listed A's snapshots: %v", got)
	}
	if err := s.DeleteTemplate(tenant.WithID(ctx, "A"), "A", a2.ID); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]templates.Snapshot{rows[0]}, list(ctx, "A", "")); diff != "" {
		t.Errorf("after its template's delete (-want +got):\n%s", diff)
	}
	if err := s.DeleteTenant(ctx, "B"); err != nil {
		t.Fatal(err)
	}
	if got := list(ctx, "B", ""); len(got) != 0 {
		t.Errorf("a deleted tenant's snapshots: %v", got)
	}
}
