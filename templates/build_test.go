package templates_test

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"

	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/image"
	"github.com/sandlot/sandlot/image/build"
	"github.com/sandlot/sandlot/templates"
	"github.com/sandlot/sandlot/templates/templatestest"
)

// TestCatalogBuild: a build is recorded as its tenant's template with the
// image's user and workdir and the recipe's start and ready commands; the
// image keeps no name; another tenant neither resolves, uses as a FROM,
// nor deletes it; a rebuild replaces the record only when it succeeds; GC
// keeps a built template's image.
func TestCatalogBuild(t *testing.T) {
	ctx := context.Background()
	c, imgs := newCatalog(t)
	put := func(body, user, workdir string) func(context.Context) (build.Result, error) {
		return func(ctx context.Context) (build.Result, error) {
			img := templatestest.Image(t, body)
			cf, err := img.ConfigFile()
			if err != nil {
				return build.Result{}, err
			}
			cf = cf.DeepCopy()
			cf.Config.User, cf.Config.WorkingDir = user, workdir
			withCfg, err := mutate.ConfigFile(img, cf)
			if err != nil {
				return build.Result{}, err
			}
			stored, err := imgs.Put(ctx, withCfg, image.PutOptions{})
			return build.Result{Image: stored, StartCmd: "serve", ReadyCmd: "check"}, err
		}
	}
	a, err := c.Build(ctx, "A", templates.BuildSpec{Name: "app"}, put("one", "user:user", "/srv/./app"))
	if err != nil {
		t.Fatal(err)
	}
	want := templates.Settings{User: "user", Workdir: "/srv/app", StartCmd: "serve", ReadyCmd: "check"}
	if diff := cmp.Diff(want, a.Settings); diff != "" || a.TenantID != "A" || a.Source != "build" {
		t.Errorf("record %+v (settings -want +got):\n%s", a, diff)
	}
	if refs, _ := imgs.Refs(ctx); len(refs) != 0 {
		t.Errorf("a build left names in the store: %v", refs)
	}
	if got, err := c.Resolve(ctx, "A", "app"); err != nil || got.ID != a.ID {
		t.Errorf("A resolves app: %+v %v", got, err)
	}
	if _, err := c.Image(ctx, "A", "app"); err != nil {
		t.Errorf("A's FROM app: %v", err)
	}
	for _, ref := range []string{"app", a.ID} {
		if _, err := c.Resolve(ctx, "B", ref); !errors.Is(err, errdefs.ErrNotFound) {
			t.Errorf("B resolves A's %s: %v", ref, err)
		}
		if _, err := c.Image(ctx, "B", ref); !errors.Is(err, errdefs.ErrNotFound) {
			t.Errorf("B's FROM %s: %v", ref, err)
		}
		if err := c.Delete(ctx, "B", ref); !errors.Is(err, errdefs.ErrNotFound) {
			t.Errorf("B deletes A's %s: %v", ref, err)
		}
	}
	// B's own "app" is another template; A's stays.
	b, err := c.Build(ctx, "B", templates.BuildSpec{Name: "app"}, put("two", "", ""))
	if err != nil || b.ID == a.ID {
		t.Fatalf("B's build: %+v %v", b, err)
	}

	// A failed rebuild, or one whose result is not a valid template,
	// leaves A's template as it was.
	if _, err := c.Build(ctx, "A", templates.BuildSpec{Name: "app"}, func(context.Context) (build.Result, error) {
		return build.Result{}, errdefs.ErrFailedPrecondition
	}); !errors.Is(err, errdefs.ErrFailedPrecondition) {
		t.Errorf("failed build: %v", err)
	}
	if _, err := c.Build(ctx, "A", templates.BuildSpec{Name: "app"}, put("three", "bad user!", "")); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("build with a bad user: %v", err)
	}
	if got, _ := c.Resolve(ctx, "A", "app"); got.ID != a.ID {
		t.Errorf("after failed rebuilds A's app is %q, want %q", got.ID, a.ID)
	}
	// A rebuild replaces it (a new id); the old id is gone.
	a2, err := c.Build(ctx, "A", templates.BuildSpec{Name: "app"}, put("four", "", ""))
	if err != nil || a2.ID == a.ID {
		t.Fatalf("rebuild: %+v %v", a2, err)
	}
	if _, err := c.Resolve(ctx, "A", a.ID); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("the replaced template's id: %v", err)
	}
	for _, bad := range []templates.BuildSpec{{Name: "default"}, {Name: "Bad"}, {Name: "ok", ID: "short"}} {
		if _, err := c.Build(ctx, "A", bad, put("five", "", "")); err == nil {
			t.Errorf("build %+v: no error", bad)
		}
	}

	// GC keeps the built templates' images.
	if _, err := c.GC(ctx, nil); err != nil {
		t.Fatal(err)
	}
	for _, tpl := range []templates.Template{a2, b} {
		h, _ := v1.NewHash(tpl.Image)
		if _, err := imgs.Get(ctx, h.String()); err != nil {
			t.Errorf("GC took %s's image: %v", tpl.Name, err)
		}
	}
}
