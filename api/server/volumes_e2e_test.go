package server_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/volumes"
)

// TestE2EVolumes: /v1/volumes through the Go client against `sandlot
// serve`: create, list, inspect, remove; bad names and sizes are 400, a
// second volume of a name 409, the tenant's count quota 429; another
// tenant gets not_found for the volume by name or id on every route, as
// for one that does not exist, and its list is empty.
func TestE2EVolumes(t *testing.T) {
	runtimePreconditions(t)
	d := startDaemon(t, t.TempDir())
	ctx := context.Background()
	a := d.client(d.key)
	b := d.client(d.newTenant(t, "volumes-b"))

	v, err := a.CreateVolume(ctx, "data", 32<<20)
	if err != nil {
		t.Fatal(err)
	}
	if !volumes.ValidID(v.ID) || v.Name != "data" || v.SizeBytes != 32<<20 {
		t.Fatalf("created %+v", v)
	}
	got, err := a.GetVolume(ctx, "data")
	if err != nil || got.ID != v.ID || len(got.MountedBy) != 0 {
		t.Fatalf("get: %+v, %v", got, err)
	}
	if l, err := a.ListVolumes(ctx); err != nil || len(l.Volumes) != 1 || l.Volumes[0].ID != v.ID {
		t.Fatalf("list: %+v, %v", l, err)
	}

	for _, tc := range []struct {
		name string
		size int64
		want error
	}{
		{"data", 0, errdefs.ErrAlreadyExists},
		{"..", 0, errdefs.ErrInvalidArgument},
		{"a/b", 0, errdefs.ErrInvalidArgument},
		{"a\x00b", 0, errdefs.ErrInvalidArgument},
		{strings.Repeat("a", 300), 0, errdefs.ErrInvalidArgument},
		{"tiny", 1 << 20, errdefs.ErrInvalidArgument},
		{"huge", 1 << 50, errdefs.ErrInvalidArgument},
	} {
		if _, err := a.CreateVolume(ctx, tc.name, tc.size); !errors.Is(err, tc.want) {
			t.Errorf("create %.20q of %d: %v, want %v", tc.name, tc.size, err, tc.want)
		}
	}

	// Another tenant: not found, whatever it names.
	for _, ref := range []string{"data", v.ID, "nope"} {
		if _, err := b.GetVolume(ctx, ref); !errors.Is(err, errdefs.ErrNotFound) {
			t.Errorf("B gets %s: %v, want not_found", ref, err)
		}
		if err := b.DeleteVolume(ctx, ref); !errors.Is(err, errdefs.ErrNotFound) {
			t.Errorf("B deletes %s: %v, want not_found", ref, err)
		}
	}
	if l, err := b.ListVolumes(ctx); err != nil || len(l.Volumes) != 0 {
		t.Errorf("B's list: %+v, %v", l, err)
	}
	// B may have a volume of the same name: names are per tenant.
	if _, err := b.CreateVolume(ctx, "data", 0); err != nil {
		t.Errorf("B's own data: %v", err)
	}

	// The count quota (20): 19 more fit, the next is resource_exhausted.
	for i := range volumes.DefaultMaxPerTenant - 1 {
		if _, err := a.CreateVolume(ctx, "q"+strings.Repeat("x", i), 16<<20); err != nil {
			t.Fatalf("volume %d: %v", i+2, err)
		}
	}
	if _, err := a.CreateVolume(ctx, "one-too-many", 16<<20); !errors.Is(err, errdefs.ErrResourceExhausted) {
		t.Errorf("past the count quota: %v, want resource_exhausted", err)
	}

	if err := a.DeleteVolume(ctx, v.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := a.GetVolume(ctx, v.ID); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("get after delete: %v", err)
	}
}
