package storetest

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/store"
	"github.com/sandlot/sandlot/templates"
	"github.com/sandlot/sandlot/tenant"
)

const digestA = "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"

// testTemplates: create, get by name and id, list, delete; names unique
// per tenant and among public templates; a tenant's name shadows a
// public one; bad input; tenant B never gets, lists, writes or deletes
// A's templates; public ones are visible to all and deleted only by the
// operator; deleting a tenant deletes its templates.
func testTemplates(t *testing.T, s store.Backend) {
	ctx := context.Background()
	for i, id := range []string{"A", "B"} {
		if err := s.CreateTenant(ctx, &tenant.Tenant{ID: id, CreatedAt: base}, tenant.HashKey("e2b_t"+id+strings.Repeat("x", i))); err != nil {
			t.Fatal(err)
		}
	}
	settings := templates.Settings{User: "user", Workdir: "/srv", Env: map[string]string{"MODE": "test"}, StartCmd: "sleep 1", ReadyCmd: "true",
		Kernels: []string{"python", "bash"}, Prestart: []string{"python"},
		Resources: templates.Resources{CPUs: 0.5, MemoryBytes: 1 << 30, DiskBytes: 1 << 28, PIDs: 64}}
	create := func(ctx context.Context, tn, name string) (templates.Template, error) {
		return s.CreateTemplate(ctx, templates.Template{TenantID: tn, Name: name, Image: digestA, Source: "example.test/py:1", Settings: settings, CreatedAt: base})
	}
	mustT := func(tp templates.Template, err error) templates.Template {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return tp
	}
	pyA := mustT(create(ctx, "A", "py"))
	pyB := mustT(create(ctx, "B", "py"))
	pub := mustT(create(ctx, "", "base"))
	if pyA.ID == "" || pyA.ID == pyB.ID || !pyA.CreatedAt.Equal(ms(base)) {
		t.Fatalf("created %+v and %+v", pyA, pyB)
	}
	got, err := s.GetTemplate(ctx, "A", "py")
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(pyA, got); d != "" {
		t.Errorf("get A's py (-created +got):\n%s", d)
	}
	for _, tc := range []struct {
		what     string
		ctx      context.Context
		tenant   string
		ref      string
		want     string // id; "" = not found
		wantByID bool
	}{
		{"A by name", ctx, "A", "py", pyA.ID, true},
		{"B by name", ctx, "B", "py", pyB.ID, true},
		{"A by id", ctx, "A", pyA.ID, pyA.ID, true},
		{"A by B's id", ctx, "A", pyB.ID, "", true},
		{"A sees public", ctx, "A", "base", pub.ID, true},
		{"A sees public by id", ctx, "A", pub.ID, pub.ID, true},
		{"public only", ctx, "", "base", pub.ID, true},
		{"public does not see A's", ctx, "", "py", "", true},
		{"public by A's id", ctx, "", pyA.ID, "", true},
		{"B's scope asks for A's", tenant.WithID(ctx, "B"), "A", "py", "", false},
		{"B's scope asks for A's id", tenant.WithID(ctx, "B"), "A", pyA.ID, "", false},
		{"B's scope sees public", tenant.WithID(ctx, "B"), "B", "base", pub.ID, true},
		{"unknown", ctx, "A", "nope", "", true},
	} {
		t.Run(tc.what, func(t *testing.T) {
			got, err := s.GetTemplate(tc.ctx, tc.tenant, tc.ref)
			if tc.want == "" {
				wantErr(t, "get", err, errdefs.ErrNotFound)
				return
			}
			if err != nil || got.ID != tc.want {
				t.Fatalf("get = %s %v, want %s", got.ID, err, tc.want)
			}
		})
	}
	bctx := tenant.WithID(ctx, "B")
	if _, err := s.TemplateByID(ctx, pyA.ID); err != nil {
		t.Errorf("the operator's lookup by id: %v", err)
	}
	wantErr(t, "B's scope looks up A's id", func() error { _, err := s.TemplateByID(bctx, pyA.ID); return err }(), errdefs.ErrNotFound)
	if got, err := s.TemplateByID(bctx, pub.ID); err != nil || got.Name != "base" {
		t.Errorf("B's scope looks up a public id: %+v %v", got, err)
	}
	names := func(ts []templates.Template) []string {
		var out []string
		for _, tp := range ts {
			out = append(out, tp.Name+"@"+tp.TenantID)
		}
		return out
	}
	for _, tc := range []struct {
		what   string
		ctx    context.Context
		tenant string
		all    bool
		want   []string
	}{
		{"A", ctx, "A", false, []string{"base@", "py@A"}},
		{"public", ctx, "", false, []string{"base@"}},
		{"B's scope lists A", bctx, "A", false, []string{"base@"}},
		{"all", ctx, "", true, []string{"base@", "py@A", "py@B"}},
	} {
		got, err := s.ListTemplates(tc.ctx, tc.tenant, tc.all)
		if err != nil {
			t.Fatalf("list %s: %v", tc.what, err)
		}
		if d := cmp.Diff(tc.want, names(got)); d != "" {
			t.Errorf("list %s (-want +got):\n%s", tc.what, d)
		}
	}
	wantErr(t, "B's scope lists all", func() error { _, err := s.ListTemplates(bctx, "", true); return err }(), errdefs.ErrPermissionDenied)

	// Bad input and conflicts.
	wantErr(t, "same name, same tenant", func() error { _, err := create(ctx, "A", "py"); return err }(), errdefs.ErrAlreadyExists)
	wantErr(t, "same public name", func() error { _, err := create(ctx, "", "base"); return err }(), errdefs.ErrAlreadyExists)
	wantErr(t, "a built-in's name", func() error { _, err := create(ctx, "A", templates.Default); return err }(), errdefs.ErrAlreadyExists)
	// A name may carry a tag ("py:v1", templates/tags.go); the latest tag
	// is the bare name.
	for _, bad := range []string{"", "Py", "a/b", "a:", "a:B", "a:latest", "a:1:2", ":1", "../x", strings.Repeat("a", 64)} {
		wantErr(t, "name "+bad, func() error { _, err := create(ctx, "A", bad); return err }(), errdefs.ErrInvalidArgument)
	}
	if tagged, err := create(ctx, "A", "py:v1"); err != nil {
		t.Errorf("a tagged name: %v", err)
	} else if got, err := s.GetTemplate(ctx, "A", "py:v1"); err != nil || got.ID != tagged.ID {
		t.Errorf("get py:v1: %+v %v", got, err)
	} else if err := s.DeleteTemplate(ctx, "A", tagged.ID); err != nil {
		t.Errorf("delete py:v1: %v", err)
	}
	wantErr(t, "not a digest", func() error {
		_, err := s.CreateTemplate(ctx, templates.Template{TenantID: "A", Name: "x", Image: "python:3"})
		return err
	}(), errdefs.ErrInvalidArgument)
	wantErr(t, "unknown kernel", func() error {
		_, err := s.CreateTemplate(ctx, templates.Template{TenantID: "A", Name: "x", Image: digestA, Settings: templates.Settings{Kernels: []string{"cobol"}}})
		return err
	}(), errdefs.ErrInvalidArgument)
	wantErr(t, "prestart not offered", func() error {
		_, err := s.CreateTemplate(ctx, templates.Template{TenantID: "A", Name: "x", Image: digestA, Settings: templates.Settings{Kernels: []string{"bash"}, Prestart: []string{"python"}}})
		return err
	}(), errdefs.ErrInvalidArgument)
	wantErr(t, "relative workdir", func() error {
		_, err := s.CreateTemplate(ctx, templates.Template{TenantID: "A", Name: "x", Image: digestA, Settings: templates.Settings{Workdir: "srv/../x"}})
		return err
	}(), errdefs.ErrInvalidArgument)
	wantErr(t, "unknown tenant", func() error { _, err := create(ctx, "nobody", "x"); return err }(), errdefs.ErrNotFound)
	wantErr(t, "B's scope writes A's", func() error { _, err := create(bctx, "A", "stolen"); return err }(), errdefs.ErrPermissionDenied)
	wantErr(t, "B's scope writes a public one", func() error { _, err := create(bctx, "", "stolen"); return err }(), errdefs.ErrPermissionDenied)

	// A's own name shadows the public one, for A only.
	own := mustT(create(tenant.WithID(ctx, "A"), "A", "base"))
	if got, _ := s.GetTemplate(ctx, "A", "base"); got.ID != own.ID {
		t.Errorf("A's base = %s, want its own %s", got.ID, own.ID)
	}
	if got, _ := s.GetTemplate(ctx, "B", "base"); got.ID != pub.ID {
		t.Errorf("B's base = %s, want the public %s", got.ID, pub.ID)
	}

	// Deletes.
	wantErr(t, "B's scope deletes A's", s.DeleteTemplate(bctx, "A", pyA.ID), errdefs.ErrNotFound)
	wantErr(t, "B deletes A's by id", s.DeleteTemplate(ctx, "B", pyA.ID), errdefs.ErrNotFound)
	wantErr(t, "B's scope deletes a public one", s.DeleteTemplate(bctx, "", pub.ID), errdefs.ErrNotFound)
	wantErr(t, "a tenant deletes a public one as its own", s.DeleteTemplate(bctx, "B", pub.ID), errdefs.ErrNotFound)
	if _, err := s.GetTemplate(ctx, "A", pyA.ID); err != nil {
		t.Fatalf("A's template after B's attempts: %v", err)
	}
	if err := s.DeleteTemplate(tenant.WithID(ctx, "A"), "A", pyA.ID); err != nil {
		t.Fatal(err)
	}
	wantErr(t, "delete twice", s.DeleteTemplate(ctx, "A", pyA.ID), errdefs.ErrNotFound)
	if err := s.DeleteTemplate(ctx, "", pub.ID); err != nil {
		t.Fatalf("the operator deletes a public one: %v", err)
	}
	if err := s.DeleteTenant(ctx, "B"); err != nil {
		t.Fatal(err)
	}
	wantErr(t, "template outlived its tenant", func() error { _, err := s.TemplateByID(ctx, pyB.ID); return err }(), errdefs.ErrNotFound)
	if got, _ := s.ListTemplates(ctx, "", true); len(got) != 1 || got[0].ID != own.ID {
		t.Errorf("left: %v", names(got))
	}
}

// testTemplateRebuild: what a build of a name the tenant has does (the
// catalog's replace: delete the tenant's record of the name, create the
// new one), in the tenant's scope: B, in its scope or naming A, never
// deletes A's record, and B's rebuild of its own "app" leaves A's alone;
// the new record has a new id and the build's settings.
func testTemplateRebuild(t *testing.T, s store.Backend) {
	ctx := context.Background()
	for i, id := range []string{"A", "B"} {
		if err := s.CreateTenant(ctx, &tenant.Tenant{ID: id, CreatedAt: base}, tenant.HashKey("e2b_r"+id+strings.Repeat("y", i))); err != nil {
			t.Fatal(err)
		}
	}
	built := templates.Settings{User: "user", Workdir: "/home/user", StartCmd: "serve", ReadyCmd: "check"}
	create := func(tn string) templates.Template {
		t.Helper()
		tp, err := s.CreateTemplate(tenant.WithID(ctx, tn), templates.Template{TenantID: tn, Name: "app", Image: digestA, Source: "build", Settings: built})
		if err != nil {
			t.Fatal(err)
		}
		return tp
	}
	a, b := create("A"), create("B")
	for _, c := range []struct {
		ctx    context.Context
		tenant string
	}{{tenant.WithID(ctx, "B"), "B"}, {tenant.WithID(ctx, "B"), "A"}, {ctx, "B"}} {
		if err := s.DeleteTemplate(c.ctx, c.tenant, a.ID); !errors.Is(err, errdefs.ErrNotFound) {
			t.Errorf("delete A's template as %s: %v, want not_found", c.tenant, err)
		}
	}
	bctx := tenant.WithID(ctx, "B")
	if err := s.DeleteTemplate(bctx, "B", b.ID); err != nil {
		t.Fatal(err)
	}
	b2 := create("B")
	if b2.ID == b.ID {
		t.Errorf("the rebuilt record kept the id %s", b.ID)
	}
	got, err := s.GetTemplate(ctx, "A", "app")
	if err != nil || got.ID != a.ID {
		t.Errorf("A's app after B's rebuild: %+v %v", got, err)
	}
	got, err = s.GetTemplate(bctx, "B", "app")
	if err != nil || got.ID != b2.ID || !cmp.Equal(got.Settings, built) {
		t.Errorf("B's rebuilt app: %+v %v", got, err)
	}
}
