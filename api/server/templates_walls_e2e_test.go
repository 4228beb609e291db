package server_test

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/sandlot/sandlot/client"
	"github.com/sandlot/sandlot/image"
	"github.com/sandlot/sandlot/image/debian"
	"github.com/sandlot/sandlot/templates"
	"github.com/sandlot/sandlot/templates/templatestest"
)

// TestWallImportDefaultServe replays the outside review's critical attack
// on `sandlot serve` over HTTP, with the real store, catalog and runtime.
// The daemon's store holds its default template's image (here a small
// one marked REAL) under `default` and under the Debian base's cache
// name, which anyone can compute from the public recipe. Tenant A then
// imports, through POST /v1/templates, an OCI layout whose index
// annotates its image `default`, and a two-image layout annotated with
// `desktop` and the cache name (refused, 400). Another tenant's next
// sandbox on the default template must still run the real image, the
// store's names must not have moved, and after a restart (which looks the
// base up by its cache name) the default must still be the real image.
// Before, the first import re-pointed `default`, the refused one moved
// both of its names, B's sandbox ran the attacker's image, and the
// restarted daemon re-tagged `default` from the poisoned cache name.
func TestWallImportDefaultServe(t *testing.T) {
	runtimePreconditions(t)
	ctx := context.Background()
	dataDir := t.TempDir()
	cacheName := debian.CachePrefix + debian.Config{}.Key()
	imgs, err := image.Open(filepath.Join(dataDir, "images"), image.Config{})
	if err != nil {
		t.Fatal(err)
	}
	real, err := imgs.Put(ctx, templatestest.Image(t, "REAL"), image.PutOptions{Name: cacheName})
	if err != nil {
		t.Fatal(err)
	}
	if err := imgs.Tag(ctx, templates.Default, real.Digest); err != nil {
		t.Fatal(err)
	}
	names := func() map[string]v1.Hash {
		t.Helper()
		refs, err := imgs.Refs(ctx)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]v1.Hash{}
		for _, r := range refs {
			out[r.Name] = r.Digest
		}
		return out
	}
	before := names()

	// --default-image debian (the default): the base is found under its
	// cache name, so nothing is built.
	d := startServe(t, dataDir, "--image-gc-interval", "0")
	stopped := false
	defer func() {
		if !stopped {
			d.stop(t)
		}
	}()
	keyB := d.newTenant(t, "victim")
	defer func() { d.cleanup(t, d.key, keyB) }()

	evil := templatestest.Image(t, "EVIL")
	importAs := func(name string, imgs ...templatestest.Annotated) int {
		t.Helper()
		body, err := os.ReadFile(templatestest.OCILayout(t, imgs...))
		if err != nil {
			t.Fatal(err)
		}
		code, out := raw(t, "POST", d.URL+"/v1/templates?name="+name, d.key, string(body), "Content-Type", "application/x-tar")
		t.Logf("import %s: %d %s", name, code, out)
		return code
	}
	if code := importAs("poison", templatestest.Annotated{Image: evil, Ref: templates.Default}); code != 201 {
		t.Errorf("import of a layout annotated default: %d, want 201 (the tenant's own template)", code)
	}
	if code := importAs("two", templatestest.Annotated{Image: evil, Ref: templates.Desktop},
		templatestest.Annotated{Image: templatestest.Image(t, "EVIL2"), Ref: cacheName}); code != 400 {
		t.Errorf("import of a two-image layout: %d, want 400", code)
	}
	if after := names(); !maps.Equal(after, before) {
		t.Errorf("the store's names moved:\n before %v\n after  %v", before, after)
	}

	marker := func(conv string) string {
		t.Helper()
		r, err := d.client(keyB).RunCode(ctx, client.RunCodeRequest{Target: client.Target{ConversationID: conv}, Language: "sh", Code: "cat /marker"})
		if err != nil {
			t.Fatalf("B's run on the default template: %v", err)
		}
		return r.Stdout
	}
	if got := marker("before-restart"); got != "REAL" {
		t.Errorf("B's sandbox on the default template runs the image marked %q, want REAL", got)
	}

	d.cleanup(t, d.key, keyB)
	d.stop(t)
	stopped = true
	d = startServe(t, dataDir, "--image-gc-interval", "0")
	stopped = false
	if got := marker("after-restart"); got != "REAL" {
		t.Errorf("after a restart, B's sandbox on the default template runs the image marked %q, want REAL", got)
	}
	if after := names(); !maps.Equal(after, before) {
		t.Errorf("after a restart the store's names are:\n before %v\n after  %v", before, after)
	}
}
