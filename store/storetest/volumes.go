package storetest

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/store"
	"github.com/sandlot/sandlot/tenant"
	"github.com/sandlot/sandlot/volumes"
)

// testVolumes: create, get by name and id, list; names unique per
// tenant; bad input refused; tenant B never gets, lists, attaches or
// deletes A's volume, and gets not_found for it as for a volume that does
// not exist; a volume a live context mounts cannot be deleted, and can
// once that context ended; deleting a tenant deletes its volumes.
func testVolumes(t *testing.T, s store.Backend) {
	ctx := context.Background()
	for i, id := range []string{"A", "B"} {
		if err := s.CreateTenant(ctx, &tenant.Tenant{ID: id, CreatedAt: base}, tenant.HashKey("e2b_v"+id+strings.Repeat("x", i))); err != nil {
			t.Fatal(err)
		}
	}
	create := func(ctx context.Context, tn, name string) (volumes.Volume, error) {
		return s.CreateVolume(ctx, volumes.Volume{TenantID: tn, Name: name, SizeBytes: 1 << 30, CreatedAt: base})
	}
	dataA, err := create(ctx, "A", "data")
	if err != nil {
		t.Fatal(err)
	}
	if !volumes.ValidID(dataA.ID) || !dataA.CreatedAt.Equal(ms(base)) {
		t.Fatalf("created %+v", dataA)
	}
	dataB, err := create(tenant.WithID(ctx, "B"), "B", "data")
	if err != nil || dataB.ID == dataA.ID {
		t.Fatalf("B's data: %+v, %v", dataB, err)
	}
	for _, ref := range []string{"data", dataA.ID} {
		got, err := s.GetVolume(ctx, "A", ref)
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(dataA, got); d != "" {
			t.Errorf("get A's %s (-created +got):\n%s", ref, d)
		}
	}
	for _, tc := range []struct {
		what string
		err  error
	}{
		{"same name", func() error { _, err := create(ctx, "A", "data"); return err }()},
		{"name with ..", func() error { _, err := create(ctx, "A", ".."); return err }()},
		{"name with /", func() error { _, err := create(ctx, "A", "a/b"); return err }()},
		{"name with NUL", func() error { _, err := create(ctx, "A", "a\x00b"); return err }()},
		{"long name", func() error { _, err := create(ctx, "A", strings.Repeat("a", 64)); return err }()},
		{"no size", func() error {
			_, err := s.CreateVolume(ctx, volumes.Volume{TenantID: "A", Name: "nosize"})
			return err
		}()},
		{"no such tenant", func() error { _, err := create(ctx, "C", "data"); return err }()},
		{"B writes A's", func() error { _, err := create(tenant.WithID(ctx, "B"), "A", "evil"); return err }()},
	} {
		want := map[string]error{"same name": errdefs.ErrAlreadyExists, "no such tenant": errdefs.ErrNotFound, "B writes A's": errdefs.ErrPermissionDenied}[tc.what]
		if want == nil {
			want = errdefs.ErrInvalidArgument
		}
		if !errors.Is(tc.err, want) {
			t.Errorf("%s: %v, want %v", tc.what, tc.err, want)
		}
	}

	// Another tenant's volume is not found, by any path, scoped or not.
	bCtx := tenant.WithID(ctx, "B")
	for _, tc := range []struct {
		what string
		err  error
	}{
		{"get by id as B", func() error { _, err := s.GetVolume(bCtx, "B", dataA.ID); return err }()},
		{"get A's with B's scope", func() error { _, err := s.GetVolume(bCtx, "A", dataA.ID); return err }()},
		{"get A's id under B", func() error { _, err := s.GetVolume(ctx, "B", dataA.ID); return err }()},
		{"attach A's as B", s.AttachVolume(bCtx, "B", "0b7e4f7c-6a52-4c39-9b7e-6f6d1c1f0b0b", volumes.Mount{VolumeID: dataA.ID, Path: "/x"})},
		{"attach A's with B's scope", s.AttachVolume(bCtx, "A", "0b7e4f7c-6a52-4c39-9b7e-6f6d1c1f0b0b", volumes.Mount{VolumeID: dataA.ID, Path: "/x"})},
		{"users of A's as B", func() error { _, err := s.VolumeUsers(bCtx, "B", dataA.ID); return err }()},
		{"delete A's as B", s.DeleteVolume(bCtx, "B", dataA.ID)},
		{"delete A's with B's scope", s.DeleteVolume(bCtx, "A", dataA.ID)},
		{"missing", func() error { _, err := s.GetVolume(ctx, "A", "nope"); return err }()},
	} {
		if !errors.Is(tc.err, errdefs.ErrNotFound) {
			t.Errorf("%s: %v, want not_found", tc.what, tc.err)
		}
	}
	if list, err := s.ListVolumes(bCtx, "A"); err != nil || len(list) != 0 {
		t.Errorf("A's list with B's scope: %+v, %v", list, err)
	}
	if _, err := s.ListVolumes(bCtx, ""); !errors.Is(err, errdefs.ErrPermissionDenied) {
		t.Errorf("every tenant's list with B's scope: %v", err)
	}
	list, err := s.ListVolumes(ctx, "B")
	if err != nil || len(list) != 1 || list[0].ID != dataB.ID {
		t.Errorf("B's list: %+v, %v", list, err)
	}
	all, err := s.ListVolumes(ctx, "")
	if err != nil || len(all) != 2 {
		t.Errorf("every tenant's list: %+v, %v", all, err)
	}

	// In use while a live context mounts it.
	rec := mustCreate(t, s, newRec(ident("A", "vol-conv", "main")))
	mount := volumes.Mount{VolumeID: dataA.ID, Path: "/mnt/data", ReadOnly: true}
	if err := s.AttachVolume(tenant.WithID(ctx, "A"), "A", rec.ID, mount); err != nil {
		t.Fatal(err)
	}
	if err := s.AttachVolume(ctx, "A", rec.ID, volumes.Mount{VolumeID: dataA.ID, Path: "/other"}); err != nil {
		t.Fatalf("attach twice: %v", err)
	}
	if got, err := s.ContextVolumes(tenant.WithID(ctx, "A"), "A", rec.ID); err != nil || len(got) != 1 || got[0] != mount {
		t.Errorf("A's context's volumes: %+v, %v; want the first attachment %+v", got, err, mount)
	}
	if got, err := s.ContextVolumes(bCtx, "B", rec.ID); err != nil || len(got) != 0 {
		t.Errorf("A's context's volumes as B: %+v, %v", got, err)
	}
	if got, err := s.ContextVolumes(bCtx, "A", rec.ID); err != nil || len(got) != 0 {
		t.Errorf("A's context's volumes with B's scope: %+v, %v", got, err)
	}
	if users, err := s.VolumeUsers(ctx, "A", dataA.ID); err != nil || len(users) != 1 || users[0] != rec.ID {
		t.Errorf("users: %v, %v", users, err)
	}
	if err := s.DeleteVolume(ctx, "A", dataA.ID); !errors.Is(err, errdefs.ErrFailedPrecondition) {
		t.Fatalf("delete while mounted: %v, want failed_precondition", err)
	}
	if _, err := s.Terminate(ctx, rec.ID, contexts.ReasonManual, base.Add(time.Minute), ""); err != nil {
		t.Fatal(err)
	}
	if users, err := s.VolumeUsers(ctx, "A", dataA.ID); err != nil || len(users) != 0 {
		t.Errorf("users after the context ended: %v, %v", users, err)
	}
	if err := s.DeleteVolume(tenant.WithID(ctx, "A"), "A", dataA.ID); err != nil {
		t.Fatalf("delete after the context ended: %v", err)
	}
	if _, err := s.GetVolume(ctx, "A", dataA.ID); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("get after delete: %v", err)
	}
	if err := s.DeleteVolume(ctx, "A", dataA.ID); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("delete twice: %v", err)
	}
	if err := s.AttachVolume(ctx, "A", rec.ID, mount); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("attach a deleted volume: %v", err)
	}

	// Deleting a tenant deletes its volumes.
	if err := s.DeleteTenant(ctx, "B"); err != nil {
		t.Fatal(err)
	}
	if all, err := s.ListVolumes(ctx, ""); err != nil || len(all) != 0 {
		t.Errorf("volumes after their tenant was deleted: %+v, %v", all, err)
	}
}
