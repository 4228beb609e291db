package templates_test

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/image"
	"github.com/sandlot/sandlot/image/build"
	"github.com/sandlot/sandlot/templates"
	"github.com/sandlot/sandlot/templates/templatestest"
)

// TestCatalogTags: a build's tags are kept, each resolving to that build
// ("name" and "name:latest" to the latest one); a later build of one tag
// moves only that tag; Tag adds tags to the tenant's own build, Untag
// removes them; another tenant neither resolves, tags nor untags them.
func TestCatalogTags(t *testing.T) {
	ctx := context.Background()
	c, imgs := newCatalog(t)
	built := func(tenantID, name string, tags []string, body string) templates.Template {
		t.Helper()
		tpl, err := c.Build(ctx, tenantID, templates.BuildSpec{Name: name, Tags: tags}, func(ctx context.Context) (build.Result, error) {
			img, err := imgs.Put(ctx, templatestest.Image(t, body), image.PutOptions{})
			return build.Result{Image: img}, err
		})
		if err != nil {
			t.Fatalf("build %s %v: %v", name, tags, err)
		}
		return tpl
	}
	imageOf := func(tenantID, ref string) string {
		t.Helper()
		tpl, err := c.Resolve(ctx, tenantID, ref)
		if err != nil {
			return "error: " + err.Error()
		}
		return tpl.Image
	}
	one := built("A", "app", nil, "one")                 // latest
	two := built("A", "app:v2", []string{"prod"}, "two") // v2 and prod
	for ref, want := range map[string]string{"app": one.Image, "app:latest": one.Image, "app:v2": two.Image, "app:prod": two.Image} {
		if got := imageOf("A", ref); got != want {
			t.Errorf("A resolves %s: %s, want %s", ref, got, want)
		}
	}
	if two.Name != "app:v2" {
		t.Errorf("the build's record: %s, want app:v2", two.Name)
	}
	// A new build of prod moves prod only.
	three := built("A", "app", []string{"prod"}, "three")
	if got := imageOf("A", "app:prod"); got != three.Image {
		t.Errorf("prod after its rebuild: %s", got)
	}
	if got := imageOf("A", "app:v2"); got != two.Image {
		t.Errorf("v2 moved with prod: %s", got)
	}
	if got := imageOf("A", "app"); got != one.Image {
		t.Errorf("latest moved with a build tagged prod: %s", got)
	}
	// Tag and Untag.
	if _, err := c.Tag(ctx, "A", "app:v2", []string{"stable", "latest"}); err != nil {
		t.Fatal(err)
	}
	for _, ref := range []string{"app", "app:stable", "app:v2"} {
		if got := imageOf("A", ref); got != two.Image {
			t.Errorf("after Tag, %s: %s, want v2's", ref, got)
		}
	}
	tags, err := c.Tags(ctx, "A", "app:v2")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, ti := range tags {
		names = append(names, ti.Tag)
	}
	if diff := cmp.Diff([]string{"latest", "prod", "stable", "v2"}, names); diff != "" {
		t.Errorf("Tags (-want +got):\n%s", diff)
	}
	if err := c.Untag(ctx, "A", "app", []string{"stable", "nope"}); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("Untag of a missing tag: %v, want not_found", err)
	}
	if got := imageOf("A", "app:stable"); got != two.Image {
		t.Errorf("a failed Untag removed stable: %s", got)
	}
	if err := c.Untag(ctx, "A", "app", []string{"stable"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Resolve(ctx, "A", "app:stable"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("app:stable after Untag: %v", err)
	}
	// Walls: another tenant.
	for _, ref := range []string{"app:v2", "app:prod", two.ID} {
		if _, err := c.Resolve(ctx, "B", ref); !errors.Is(err, errdefs.ErrNotFound) {
			t.Errorf("B resolves A's %s: %v", ref, err)
		}
		if _, err := c.Tag(ctx, "B", ref, []string{"mine"}); !errors.Is(err, errdefs.ErrNotFound) {
			t.Errorf("B tags A's %s: %v", ref, err)
		}
	}
	if err := c.Untag(ctx, "B", "app", []string{"v2"}); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("B untags A's v2: %v", err)
	}
	// Bad names and tags.
	for _, bad := range []struct {
		name string
		tags []string
	}{{"app:", nil}, {"app:Bad", nil}, {"app:a:b", nil}, {"app", []string{"../x"}}, {"app", []string{""}}, {"default:v1", nil}} {
		_, err := c.Build(ctx, "A", templates.BuildSpec{Name: bad.name, Tags: bad.tags}, func(context.Context) (build.Result, error) {
			t.Errorf("build %q %v ran", bad.name, bad.tags)
			return build.Result{}, errors.New("no")
		})
		if err == nil {
			t.Errorf("build %q %v: no error", bad.name, bad.tags)
		}
	}
	if _, err := c.Tag(ctx, "A", "app", []string{"UP"}); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("Tag UP: %v", err)
	}
}

// TestCatalogNamed: a bare name resolves once any of its tags is built
// (the newest record, the tenant's own before a public one), "latest"
// first when it exists; an unknown name, a prefix or another tenant's
// name stays not_found.
func TestCatalogNamed(t *testing.T) {
	ctx := context.Background()
	c, imgs := newCatalog(t)
	built := func(tenantID, name string) templates.Template {
		t.Helper()
		tpl, err := c.Build(ctx, tenantID, templates.BuildSpec{Name: name}, func(ctx context.Context) (build.Result, error) {
			img, err := imgs.Put(ctx, templatestest.Image(t, tenantID+name), image.PutOptions{})
			return build.Result{Image: img}, err
		})
		if err != nil {
			t.Fatalf("build %s: %v", name, err)
		}
		return tpl
	}
	named := func(tenantID, ref string) string {
		t.Helper()
		tpl, err := c.Named(ctx, tenantID, ref)
		if err != nil {
			if !errors.Is(err, errdefs.ErrNotFound) {
				t.Errorf("%s %s: %v, want not_found", tenantID, ref, err)
			}
			return "not_found"
		}
		return tpl.ID
	}
	v1 := built("A", "app:v1")
	if got := named("A", "app"); got != v1.ID {
		t.Errorf("app with only v1: %s, want %s", got, v1.ID)
	}
	v2 := built("A", "app:v2")
	if got := named("A", "app"); got != v2.ID {
		t.Errorf("app after v2: %s, want the newest %s", got, v2.ID)
	}
	for _, ref := range []string{"ap", "app:v3", "other"} {
		if got := named("A", ref); got != "not_found" {
			t.Errorf("A %s: %s, want not_found", ref, got)
		}
	}
	if got := named("B", "app"); got != "not_found" {
		t.Errorf("B sees A's app: %s", got)
	}
	latest := built("A", "app")
	if got := named("A", "app"); got != latest.ID {
		t.Errorf("app with a latest build: %s, want %s", got, latest.ID)
	}
}
