package templates_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/image"
	"github.com/sandlot/sandlot/internal/testenv"
	"github.com/sandlot/sandlot/store/memory"
	"github.com/sandlot/sandlot/templates"
	"github.com/sandlot/sandlot/templates/templatestest"
	"github.com/sandlot/sandlot/tenant"
)

func newCatalog(t *testing.T) (*templates.Catalog, *image.Store) {
	t.Helper()
	// The tests' registries listen on loopback, which a tenant's pull
	// reaches only when the operator allows it.
	return newCatalogWith(t, func(c *templates.Config) { c.PullAllow = templatestest.Loopback })
}

func newCatalogWith(t *testing.T, mod func(*templates.Config)) (*templates.Catalog, *image.Store) {
	t.Helper()
	testenv.RequireRoot(t)
	imgs, err := image.Open(t.TempDir(), image.Config{})
	if err != nil {
		t.Fatal(err)
	}
	st := memory.New()
	for _, id := range []string{"A", "B"} {
		if err := st.CreateTenant(context.Background(), &tenant.Tenant{ID: id}, tenant.HashKey("e2b_c"+id)); err != nil {
			t.Fatal(err)
		}
	}
	cfg := templates.Config{Store: st, Images: imgs}
	mod(&cfg)
	return templates.New(cfg), imgs
}

func wantErr(t *testing.T, what string, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Errorf("%s: err = %v, want %v", what, err, want)
	}
}

// TestCatalog pulls a template from a registry started here and imports
// another from a docker archive, under two tenants with the same name;
// resolves them per tenant; refuses bad input and others' deletes; and
// shows that GC takes a deleted template's layers and keeps the others'.
func TestCatalog(t *testing.T) {
	ctx := context.Background()
	c, imgs := newCatalog(t)
	reg := templatestest.Registry(t)
	templatestest.Push(t, reg+"/team/app:v1", templatestest.Image(t, "pulled"))
	archive := templatestest.DockerArchive(t, templatestest.Image(t, "imported"), "example.test/app:v2")

	sh := templates.Settings{Kernels: []string{"sh"}, Workdir: "/srv", Env: map[string]string{"GREETING": "hi"}}
	a, err := c.Pull(ctx, "A", reg+"/team/app:v1", templates.Spec{Name: "app", Settings: sh}, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.Import(ctx, "B", archive, templates.Spec{Name: "app"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := c.Pull(ctx, "", reg+"/team/app:v1", templates.Spec{Name: "shared"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if a.Image == b.Image || a.Image != pub.Image || a.Source != reg+"/team/app:v1" || b.Source != "import" {
		t.Fatalf("templates %+v %+v %+v", a, b, pub)
	}
	if refs, _ := imgs.Refs(ctx); len(refs) != 0 {
		t.Errorf("pull and import left names in the store (the records keep the images): %+v", refs)
	}
	marker := func(tp templates.Template) string {
		img, err := imgs.Get(ctx, tp.Image)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := os.ReadFile(filepath.Join(img.LowerDirs()[0], "marker"))
		return string(b)
	}
	if marker(a) != "pulled" || marker(b) != "imported" {
		t.Errorf("markers %q %q", marker(a), marker(b))
	}

	for _, tc := range []struct {
		tenant, ref string
		want        string // id; "" not found
	}{
		{"A", "app", a.ID}, {"B", "app", b.ID}, {"A", b.ID, ""}, {"B", a.ID, ""}, {"B", "shared", pub.ID},
		{"A", "", templates.Default}, {"A", templates.Host, ""}, {"A", "nope", ""},
	} {
		got, err := c.Resolve(ctx, tc.tenant, tc.ref)
		if tc.want == "" {
			wantErr(t, "resolve "+tc.tenant+" "+tc.ref, err, errdefs.ErrNotFound)
		} else if err != nil || got.ID != tc.want {
			t.Errorf("resolve %s %q = %s %v, want %s", tc.tenant, tc.ref, got.ID, err, tc.want)
		}
	}
	if got, err := c.ByID(ctx, a.ID); err != nil || !cmp.Equal(got.Settings, sh) {
		t.Errorf("by id: %+v %v", got, err)
	}
	list, err := c.List(ctx, "A")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tp := range list {
		names = append(names, tp.Name+"@"+tp.TenantID)
	}
	if d := cmp.Diff([]string{"default@", "app@A", "shared@"}, names); d != "" {
		t.Errorf("A's list (-want +got):\n%s", d)
	}

	// Bad input: checked before anything is fetched (the registry named
	// here does not exist).
	wantErr(t, "a taken name", func() error {
		_, err := c.Pull(ctx, "A", "127.0.0.1:1/none:v1", templates.Spec{Name: "app"}, nil)
		return err
	}(), errdefs.ErrAlreadyExists)
	wantErr(t, "a bad name", func() error {
		_, err := c.Pull(ctx, "A", "127.0.0.1:1/none:v1", templates.Spec{Name: "../x"}, nil)
		return err
	}(), errdefs.ErrInvalidArgument)
	wantErr(t, "bad settings", func() error {
		_, err := c.Pull(ctx, "A", "127.0.0.1:1/none:v1", templates.Spec{Name: "x", Settings: templates.Settings{Kernels: []string{"cobol"}}}, nil)
		return err
	}(), errdefs.ErrInvalidArgument)
	notTar := filepath.Join(t.TempDir(), "x.tar")
	os.WriteFile(notTar, []byte("this is not a tarball at all, just some bytes of text"), 0o600)
	wantErr(t, "import of a non-archive", func() error {
		_, err := c.Import(ctx, "A", notTar, templates.Spec{Name: "x"}, nil)
		return err
	}(), errdefs.ErrInvalidArgument)
	if _, err := c.Resolve(ctx, "A", "x"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("a failed import left a record: %v", err)
	}

	// Deletes: only the owner; public ones by the operator; never a built-in.
	wantErr(t, "B deletes A's by id", c.Delete(ctx, "B", a.ID), errdefs.ErrNotFound)
	wantErr(t, "A deletes a public one", c.Delete(ctx, "A", "shared"), errdefs.ErrPermissionDenied)
	wantErr(t, "A deletes a built-in", c.Delete(ctx, "A", templates.Default), errdefs.ErrFailedPrecondition)
	if err := c.Delete(ctx, "B", "app"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ByID(ctx, b.ID); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("a deleted template is still found by id: %v", err)
	}

	// GC takes the deleted template's layer (its marker), keeps the others'.
	imgB, _ := imgs.Get(ctx, b.Image)
	imgA, _ := imgs.Get(ctx, a.Image)
	st, err := c.GC(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(imgB.LowerDirs()[0]); !os.IsNotExist(err) || st.Layers == 0 {
		t.Errorf("GC kept the deleted template's layer (%+v): %v", st, err)
	}
	for _, d := range imgA.LowerDirs() {
		if _, err := os.Stat(d); err != nil {
			t.Errorf("GC took a live template's layer: %v", err)
		}
	}
	if err := c.Delete(ctx, "", "shared"); err != nil {
		t.Errorf("the operator deletes a public one: %v", err)
	}
}

// BenchmarkTemplateInfo is what the manager asks before every run (the
// language check): a built-in's and a record's info, from memory.
func BenchmarkTemplateInfo(b *testing.B) {
	imgs, err := image.Open(b.TempDir(), image.Config{})
	if err != nil {
		b.Fatal(err)
	}
	st := memory.New()
	ctx := context.Background()
	st.CreateTenant(ctx, &tenant.Tenant{ID: "A"}, tenant.HashKey("e2b_bench"))
	rec, err := st.CreateTemplate(ctx, templates.Template{TenantID: "A", Name: "app", Image: "sha256:" + strings.Repeat("a", 64)})
	if err != nil {
		b.Fatal(err)
	}
	c := templates.New(templates.Config{Store: st, Images: imgs})
	for _, id := range []string{templates.Default, rec.ID} {
		b.Run(id, func(b *testing.B) {
			for b.Loop() {
				if _, err := c.TemplateInfo(ctx, id); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestCatalogTenantPullCredentials: a tenant's pull is anonymous, so the
// daemon's registry credentials (its docker config) never fetch a private
// image for a tenant; the operator's public pull uses them.
func TestCatalogTenantPullCredentials(t *testing.T) {
	ctx := context.Background()
	c, _ := newCatalog(t)
	reg := templatestest.AuthRegistry(t)
	templatestest.Push(t, reg+"/private/app:1", templatestest.Image(t, "private"))
	_, err := c.Pull(ctx, "A", reg+"/private/app:1", templates.Spec{Name: "stolen"}, nil)
	if err == nil {
		t.Fatalf("a tenant pulled a private image with the daemon's credentials: %v", err)
	}
	if _, err := c.Resolve(ctx, "A", "stolen"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("a refused pull left a record: %v", err)
	}
	if _, err := c.Pull(ctx, "", reg+"/private/app:1", templates.Spec{Name: "ops"}, nil); err != nil {
		t.Errorf("the operator's pull with the docker config: %v", err)
	}
}

// TestDesktopBuiltin: the desktop template is a built-in only where the
// daemon offers it, with its settings (the resource defaults) and the
// image of its name once there is one; its name is reserved either way.
func TestDesktopBuiltin(t *testing.T) {
	ctx := context.Background()
	imgs, err := image.Open(t.TempDir(), image.Config{})
	if err != nil {
		t.Fatal(err)
	}
	off := templates.New(templates.Config{Store: memory.New(), Images: imgs})
	_, err = off.Resolve(ctx, "A", templates.Desktop)
	wantErr(t, "desktop not offered", err, errdefs.ErrNotFound)

	settings := &templates.Settings{Resources: templates.Resources{PIDs: 512, MemoryBytes: 2 << 30}}
	on := templates.New(templates.Config{Store: memory.New(), Images: imgs, Desktop: settings})
	got, err := on.Resolve(ctx, "A", templates.Desktop)
	if err != nil {
		t.Fatal(err)
	}
	want := templates.Template{ID: "desktop", Name: "desktop", Source: "built-in", Settings: *settings}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("resolve (-want +got):\n%s", d)
	}
	if !got.Public() {
		t.Error("the desktop built-in is not public")
	}
	byID, err := on.ByID(ctx, templates.Desktop)
	if err != nil || byID.Settings.Resources.PIDs != 512 {
		t.Errorf("ByID = %+v, %v", byID, err)
	}
	wantErr(t, "a tenant's template named desktop", templates.CheckName("desktop"), errdefs.ErrAlreadyExists)
}

// TestCodeInterpreterBuiltin: the code-interpreter template (R and Java)
// is a built-in where the daemon offers it, listed beside the default; its
// name is reserved either way.
func TestCodeInterpreterBuiltin(t *testing.T) {
	ctx := context.Background()
	imgs, err := image.Open(t.TempDir(), image.Config{})
	if err != nil {
		t.Fatal(err)
	}
	off := templates.New(templates.Config{Store: memory.New(), Images: imgs})
	_, err = off.Resolve(ctx, "A", templates.CodeInterpreter)
	wantErr(t, "code-interpreter not offered", err, errdefs.ErrNotFound)

	on := templates.New(templates.Config{Store: memory.New(), Images: imgs, CodeInterpreter: true})
	got, err := on.Resolve(ctx, "A", templates.CodeInterpreter)
	if err != nil {
		t.Fatal(err)
	}
	want := templates.Template{ID: "code-interpreter", Name: "code-interpreter", Source: "built-in"}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("resolve (-want +got):\n%s", d)
	}
	if _, err := on.ByID(ctx, templates.CodeInterpreter); err != nil {
		t.Errorf("ByID: %v", err)
	}
	l, err := on.List(ctx, "A")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tm := range l {
		names = append(names, tm.Name)
	}
	if d := cmp.Diff([]string{"default", "code-interpreter"}, names); d != "" {
		t.Errorf("list (-want +got):\n%s", d)
	}
	wantErr(t, "a tenant's template named code-interpreter", templates.CheckName("code-interpreter"), errdefs.ErrAlreadyExists)
	if err := (templates.Settings{Kernels: []string{"r", "java"}, Prestart: []string{"java"}}).Validate(); err != nil {
		t.Errorf("a template offering r and java: %v", err)
	}
}
