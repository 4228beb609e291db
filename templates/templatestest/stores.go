package templatestest

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/sandlot/sandlot/image"
	"github.com/sandlot/sandlot/store"
	"github.com/sandlot/sandlot/store/postgres"
	"github.com/sandlot/sandlot/store/postgres/pgtest"
	"github.com/sandlot/sandlot/store/sqlite"
	"github.com/sandlot/sandlot/templates"
	"github.com/sandlot/sandlot/tenant"
)

// OnRealStores runs test once on each real store, as subtests named for
// it: SQLite in a temporary directory, Postgres on a fresh schema
// (pgtest). dir is the subtest's own temporary directory. The store is
// closed after the subtest's other cleanups, so managers test starts are
// closed first.
func OnRealStores(t *testing.T, test func(t *testing.T, st store.Backend, dir string)) {
	for _, tc := range []struct {
		name string
		open func(t *testing.T, dir string) (store.Backend, error)
	}{
		{"sqlite", func(t *testing.T, dir string) (store.Backend, error) {
			return sqlite.Open(context.Background(), filepath.Join(dir, "sandlot.db"), sqlite.Config{})
		}},
		{"postgres", func(t *testing.T, dir string) (store.Backend, error) {
			return postgres.Open(context.Background(), pgtest.SchemaURL(t), postgres.Config{})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			st, err := tc.open(t, dir)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
			test(t, st, dir)
		})
	}
}

// AppTenant creates tenant tenantID in st and imports its template "app"
// (Image's busybox, kernel sh) into an image store under dir/images. It
// returns that image store, over which the caller makes its catalogs
// (templates.Config{Store: st, Images: images, Snapshots: st}).
func AppTenant(t *testing.T, st store.Backend, dir, tenantID string) *image.Store {
	t.Helper()
	ctx := context.Background()
	imgs, err := image.Open(filepath.Join(dir, "images"), image.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.CreateTenant(ctx, &tenant.Tenant{ID: tenantID}, tenant.HashKey("e2b_key"+tenantID)); err != nil {
		t.Fatal(err)
	}
	catalog := templates.New(templates.Config{Store: st, Images: imgs, Snapshots: st})
	archive := DockerArchive(t, Image(t, "base"), "example.test/app:v1")
	if _, err := catalog.Import(ctx, tenantID, archive, templates.Spec{Name: "app", Settings: templates.Settings{Kernels: []string{"sh"}}}, nil); err != nil {
		t.Fatal(err)
	}
	return imgs
}
