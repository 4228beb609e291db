package server_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/sandlot/sandlot/api"
	"github.com/sandlot/sandlot/image"
	"github.com/sandlot/sandlot/templates"
	"github.com/sandlot/sandlot/templates/templatestest"
)

// TestWallBuildFromOthers is the outside review's attack on a build's
// FROM: tenant B builds FROM tenant A's private template by its image
// digest and by a name the shared store has for it (what a FROM pull
// with A's registry credentials left there), and is refused with 404
// (not_found: nothing says the image exists). FROM of B's own template,
// of a public template and of the built-in default still builds. Before,
// both refs fell through to the shared store without a tenant check, and
// B's image held A's files.
func TestWallBuildFromOthers(t *testing.T) {
	e := newBuildsEnv(t)
	ctx := context.Background()
	if _, err := e.imgs.Put(ctx, templatestest.Image(t, "the-default"), image.PutOptions{Name: templates.Default}); err != nil {
		t.Fatal(err)
	}
	import_ := func(tenantID, name, marker string) templates.Template {
		t.Helper()
		path := templatestest.DockerArchive(t, templatestest.Image(t, marker), "example.test/"+name+":1")
		tpl, err := e.cat.Import(ctx, tenantID, path, templates.Spec{Name: name}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return tpl
	}
	secret := import_("tenant-a", "secret", "A-SECRET")
	import_("tenant-b", "mine", "B-OWN")
	import_("", "shared", "PUBLIC")
	const private = "registry.example/a/private:1"
	digest, err := v1.NewHash(secret.Image)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.imgs.Tag(ctx, private, digest); err != nil {
		t.Fatal(err)
	}

	build := func(t *testing.T, key, name, from string) (int, api.TemplateBuild) {
		t.Helper()
		w := e.do(t, req{method: "POST", path: "/v1/templates/builds", key: key,
			body: api.TemplateBuildRequest{Name: name, Dockerfile: "FROM " + from + "\nENV BUILT=1\n"}})
		if w.Code != 202 {
			return w.Code, api.TemplateBuild{Reason: w.Body.String()}
		}
		var b api.TemplateBuild
		json.Unmarshal(w.Body.Bytes(), &b)
		return w.Code, e.wait(t, key, b.BuildID)
	}
	for i, tc := range []struct {
		name, from, marker string // marker "": refused
	}{
		{"A's template by digest", secret.Image, ""},
		{"A's template by a store name", private, ""},
		{"B's own", "mine", "B-OWN"},
		{"public", "shared", "PUBLIC"},
		{"built-in", templates.Default, "the-default"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, b := build(t, e.KeyB, "from-"+itoa(i), tc.from)
			if tc.marker == "" {
				if code != 404 {
					t.Fatalf("B's FROM %s: %d %+v, want 404", tc.from, code, b)
				}
				return
			}
			if code != 202 || b.Status != api.BuildReady || b.Template == nil {
				t.Fatalf("B's FROM %s: %d %+v", tc.from, code, b)
			}
			img, err := e.imgs.Get(ctx, b.Template.Image)
			if err != nil {
				t.Fatal(err)
			}
			var got []byte
			for _, dir := range img.LowerDirs() {
				if got, err = os.ReadFile(filepath.Join(dir, "marker")); err == nil {
					break
				}
			}
			if string(got) != tc.marker {
				t.Errorf("B's image FROM %s has marker %q, want %q", tc.from, got, tc.marker)
			}
		})
	}
}
