package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

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

// testForkSnapshots: the fork mark is kept as written (never by name: a
// tenant's own snapshot named fork-… is unmarked); ForkSnapshots lists the
// marked rows created before its time, oldest first, every tenant's on
// the system's ctx and only its own on a tenant's, bounded by limit; a
// deleted template takes its row out of the list.
func testForkSnapshots(t *testing.T, s store.Backend) {
	ctx := context.Background()
	for _, id := range []string{"A", "B"} {
		if err := s.CreateTenant(ctx, &tenant.Tenant{ID: id, CreatedAt: base}, tenant.HashKey("e2b_fork"+id)); err != nil {
			t.Fatal(err)
		}
	}
	row := func(tn, name string, at time.Duration, fork bool) templates.Snapshot {
		t.Helper()
		tp, err := s.CreateTemplate(ctx, templates.Template{TenantID: tn, Name: name, Image: digestA, Source: "snapshot", CreatedAt: base})
		if err != nil {
			t.Fatal(err)
		}
		sn := templates.Snapshot{ID: tp.ID, TenantID: tn, ContextID: "ctx-" + name, Template: "default", Bytes: 1, CreatedAt: base.Add(at), Fork: fork}
		if err := s.CreateSnapshot(tenant.WithID(ctx, tn), sn); err != nil {
			t.Fatal(err)
		}
		sn.CreatedAt = ms(sn.CreatedAt)
		return sn
	}
	aFork := row("A", "fork-aaaa", 0, true)
	aOwn := row("A", "fork-bbbb", time.Second, false) // the tenant's own, named like a fork's
	bFork := row("B", "fork-cccc", 2*time.Second, true)
	aLate := row("A", "fork-dddd", time.Hour, true)
	forks := func(ctx context.Context, before time.Time, limit int) []templates.Snapshot {
		t.Helper()
		got, err := s.ForkSnapshots(ctx, before, limit)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	cutoff := base.Add(time.Minute)
	for _, tc := range []struct {
		name   string
		ctx    context.Context
		before time.Time
		limit  int
		want   []templates.Snapshot
	}{
		{"the system's, every tenant's", ctx, cutoff, 0, []templates.Snapshot{aFork, bFork}},
		{"a limit", ctx, cutoff, 1, []templates.Snapshot{aFork}},
		{"later ones too", ctx, base.Add(2 * time.Hour), 0, []templates.Snapshot{aFork, bFork, aLate}},
		{"A's ctx", tenant.WithID(ctx, "A"), cutoff, 0, []templates.Snapshot{aFork}},
		{"B's ctx", tenant.WithID(ctx, "B"), cutoff, 0, []templates.Snapshot{bFork}},
	} {
		if diff := cmp.Diff(tc.want, forks(tc.ctx, tc.before, tc.limit)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.name, diff)
		}
	}
	got, err := s.ListSnapshots(ctx, "A", "")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]templates.Snapshot{aLate, aOwn, aFork}, got); diff != "" {
		t.Errorf("A's snapshots keep their marks (-want +got):\n%s", diff)
	}
	if err := s.DeleteTemplate(tenant.WithID(ctx, "A"), "A", aFork.ID); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]templates.Snapshot{bFork}, forks(ctx, cutoff, 0)); diff != "" {
		t.Errorf("after A's fork template's delete (-want +got):\n%s", diff)
	}
}
