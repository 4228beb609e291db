package templates_test

import (
	"archive/tar"
	"context"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"

	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/image"
	"github.com/sandlot/sandlot/image/debian"
	"github.com/sandlot/sandlot/image/imagetest"
	"github.com/sandlot/sandlot/templates"
	"github.com/sandlot/sandlot/templates/templatestest"
)

// sharedNames are names in the daemon-wide image store that a tenant's
// input must never move: the built-ins', the Debian base's cache name
// (anyone can compute it from the public recipe) and an operator's
// pulled reference.
func sharedNames() []string {
	return []string{templates.Default, templates.Desktop, templates.CodeInterpreter,
		debian.CachePrefix + debian.Config{}.Key(), name.MustParseReference("python:3.12").Name()}
}

// wallCatalog is a catalog offering every built-in over a store whose
// shared names all point at the image marked "real"; it returns that
// image's digest.
func wallCatalog(t *testing.T) (*templates.Catalog, *image.Store, v1.Hash) {
	t.Helper()
	c, imgs := newCatalogWith(t, func(c *templates.Config) {
		c.PullAllow, c.Desktop, c.CodeInterpreter = templatestest.Loopback, &templates.Settings{}, true
	})
	ctx := context.Background()
	real, err := imgs.Put(ctx, templatestest.Image(t, "real"), image.PutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range sharedNames() {
		if err := imgs.Tag(ctx, n, real.Digest); err != nil {
			t.Fatal(err)
		}
	}
	return c, imgs, real.Digest
}

// refMap is the store's names and what they point at.
func refMap(t *testing.T, imgs *image.Store) map[string]v1.Hash {
	t.Helper()
	refs, err := imgs.Refs(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]v1.Hash{}
	for _, r := range refs {
		out[r.Name] = r.Digest
	}
	return out
}

// wantNamesKept fails unless the store's names are exactly before, and
// another tenant still resolves every built-in to the real image.
func wantNamesKept(t *testing.T, c *templates.Catalog, imgs *image.Store, before map[string]v1.Hash, real v1.Hash) {
	t.Helper()
	if after := refMap(t, imgs); !maps.Equal(after, before) {
		t.Errorf("the store's names changed:\n before %v\n after  %v", before, after)
	}
	for _, b := range []string{templates.Default, templates.Desktop, templates.CodeInterpreter} {
		got, err := c.Resolve(context.Background(), "B", b)
		if err != nil || got.Image != real.String() {
			t.Errorf("B's %s: image %q (%v), want the real %s", b, got.Image, err, real)
		}
	}
}

// TestWallImportNames is the attack of the outside review: a tenant's
// POST /v1/templates imports an archive whose own names (an OCI index's
// annotations, a docker archive's RepoTags) are shared names of the
// image store. The import may succeed as the tenant's template, but no
// name in the store may move or appear, and another tenant's built-ins
// stay the real images. A two-image layout is refused and moves nothing
// either. Before, the archive's names became store names and the
// cleanup only took back names that were new: `default` pointed at the
// attacker's image, also after the 400 of a two-image layout.
func TestWallImportNames(t *testing.T) {
	ctx := context.Background()
	c, imgs, real := wallCatalog(t)
	before := refMap(t, imgs)
	evil := templatestest.Image(t, "evil")
	var n int
	for _, ref := range append(sharedNames(), "fresh-name:1") {
		t.Run("layout "+ref, func(t *testing.T) {
			n++
			path := templatestest.OCILayout(t, templatestest.Annotated{Image: evil, Ref: ref})
			if _, err := c.Import(ctx, "A", path, templates.Spec{Name: "imp" + strconv.Itoa(n)}, nil); err != nil {
				t.Fatalf("import: %v", err)
			}
			wantNamesKept(t, c, imgs, before, real)
		})
	}
	t.Run("docker archive", func(t *testing.T) {
		path := templatestest.DockerArchive(t, evil, "python:3.12")
		if _, err := c.Import(ctx, "A", path, templates.Spec{Name: "docker"}, nil); err != nil {
			t.Fatalf("import: %v", err)
		}
		wantNamesKept(t, c, imgs, before, real)
	})
	t.Run("two images", func(t *testing.T) {
		path := templatestest.OCILayout(t, templatestest.Annotated{Image: evil, Ref: templates.Default},
			templatestest.Annotated{Image: templatestest.Image(t, "evil2"), Ref: debian.CachePrefix + debian.Config{}.Key()})
		_, err := c.Import(ctx, "A", path, templates.Spec{Name: "two"}, nil)
		wantErr(t, "two-image layout", err, errdefs.ErrInvalidArgument)
		wantNamesKept(t, c, imgs, before, real)
	})
}

// TestWallImportKeepsOthersNames: a name someone else gives while a
// tenant's import runs is theirs. Before, the import's cleanup took back
// every name that had not existed when it began, so an operator's tag
// (or the daemon naming a freshly built base) made meanwhile was lost.
func TestWallImportKeepsOthersNames(t *testing.T) {
	ctx := context.Background()
	c, imgs, real := wallCatalog(t)
	path := templatestest.OCILayout(t, templatestest.Annotated{Image: templatestest.Image(t, "tenant"), Ref: "x"})
	var once sync.Once
	if _, err := c.Import(ctx, "A", path, templates.Spec{Name: "imp"}, func(image.Progress) {
		once.Do(func() {
			if err := imgs.Tag(ctx, "operator/new:1", real); err != nil {
				t.Error(err)
			}
		})
	}); err != nil {
		t.Fatal(err)
	}
	if d, err := imgs.Resolve(ctx, "operator/new:1"); err != nil || d != real {
		t.Errorf("the operator's name made during the import: %v %v", d, err)
	}
}

// TestWallTenantPullNames: a tenant's pull of a reference the operator
// has pulled before (the store names it) leaves that name where the
// operator put it, and names nothing new: the tenant's record keeps its
// image. Before, the pull re-pointed the operator's name at whatever the
// registry served the tenant.
func TestWallTenantPullNames(t *testing.T) {
	ctx := context.Background()
	c, imgs, real := wallCatalog(t)
	reg := templatestest.Registry(t)
	ref := reg + "/team/tool:1"
	if err := imgs.Tag(ctx, ref, real); err != nil { // the operator's earlier pull
		t.Fatal(err)
	}
	templatestest.Push(t, ref, templatestest.Image(t, "newer"))
	before := refMap(t, imgs)
	got, err := c.Pull(ctx, "A", ref, templates.Spec{Name: "tool"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got.Image == real.String() {
		t.Fatalf("the tenant's pull recorded the store's image, not the registry's")
	}
	wantNamesKept(t, c, imgs, before, real)
}

// TestWallBuiltinPinned: a built-in resolves to the image it had when
// the daemon first used it, whatever a name in the store says later (a
// name is the store's, reachable by every writer of it). Before, every
// resolution read the name `default` afresh.
func TestWallBuiltinPinned(t *testing.T) {
	ctx := context.Background()
	c, imgs, real := wallCatalog(t)
	wantNamesKept(t, c, imgs, refMap(t, imgs), real) // first use
	evil, err := imgs.Put(ctx, templatestest.Image(t, "evil"), image.PutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range []string{templates.Default, templates.Desktop, templates.CodeInterpreter} {
		if err := imgs.Tag(ctx, b, evil.Digest); err != nil {
			t.Fatal(err)
		}
	}
	for _, b := range []string{templates.Default, templates.Desktop, templates.CodeInterpreter} {
		if got, err := c.Resolve(ctx, "B", b); err != nil || got.Image != real.String() {
			t.Errorf("%s after its name moved: %q %v, want %s", b, got.Image, err, real)
		}
	}
}

// layoutWithout writes img as an OCI layout tarball, leaving out the
// blobs named in omit (what its author does not have).
func layoutWithout(t *testing.T, img v1.Image, omit ...v1.Hash) string {
	t.Helper()
	dir := t.TempDir()
	p, err := layout.Write(filepath.Join(dir, "layout"), empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.AppendImage(img); err != nil {
		t.Fatal(err)
	}
	for _, h := range omit {
		if err := os.Remove(filepath.Join(dir, "layout", "blobs", h.Algorithm, h.Hex)); err != nil {
			t.Fatal(err)
		}
	}
	out := filepath.Join(dir, "layout.tar")
	f, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tw := tar.NewWriter(f)
	if err := tw.AddFS(os.DirFS(filepath.Join(dir, "layout"))); err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestWallImportLayerByDigest: in a store shared by tenants a layer's
// digests are names too, and knowing them must not be having the layer.
// Tenant A imports a private image; tenant B, who learnt its layer's
// digests, imports (1) a layout whose manifest names A's layer blob
// without holding its bytes, and (2) a layout with a layer of B's own
// whose config claims A's layer's diff id. Both are refused and B gets no
// template holding A's file. Before, the store took both as cached: B's
// template's tree was A's layer, secret included.
func TestWallImportLayerByDigest(t *testing.T) {
	ctx := context.Background()
	c, imgs := newCatalog(t)
	secretLayer := imagetest.Layer(t, imagetest.File{Name: "secret", Body: "A-SECRET"})
	secret := imagetest.Image(t, secretLayer)
	if _, err := c.Import(ctx, "A", templatestest.OCILayout(t, templatestest.Annotated{Image: secret, Ref: "x"}), templates.Spec{Name: "priv"}, nil); err != nil {
		t.Fatal(err)
	}
	blob, _ := secretLayer.Digest()
	diffID, _ := secretLayer.DiffID()

	named, err := mutate.Append(empty.Image, mutate.Addendum{Layer: secretLayer})
	if err != nil {
		t.Fatal(err)
	}
	lying := imagetest.Image(t, imagetest.Layer(t, imagetest.File{Name: "mine", Body: "B"}))
	cf, _ := lying.ConfigFile()
	cf = cf.DeepCopy()
	cf.RootFS.DiffIDs = []v1.Hash{diffID}
	if lying, err = mutate.ConfigFile(lying, cf); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		path string
	}{
		{"a manifest naming A's layer without its bytes", layoutWithout(t, named, blob)},
		{"a layer of B's own claiming A's diff id", layoutWithout(t, lying)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := c.Import(ctx, "B", tc.path, templates.Spec{Name: "steal"}, nil)
			if err == nil {
				img, _ := imgs.Get(ctx, got.Image)
				b, _ := os.ReadFile(filepath.Join(img.LowerDirs()[0], "secret"))
				c.Delete(ctx, "B", got.ID)
				t.Fatalf("B's import made template %s holding %q", got.ID, b)
			}
			if !errors.Is(err, errdefs.ErrInvalidArgument) {
				t.Errorf("B's import: %v, want invalid_argument", err)
			}
		})
	}
}
