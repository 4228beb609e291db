package cli

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/internal/testenv"
	"github.com/sandlot/sandlot/store"
	"github.com/sandlot/sandlot/templates/templatestest"
)

// TestTemplatePublic: the operator pulls, lists and removes a public
// template on the store itself (--public), pulled from a registry started
// here; the record is public and seen by every tenant.
func TestTemplatePublic(t *testing.T) {
	testenv.RequireRoot(t)
	ctx := context.Background()
	dir := t.TempDir()
	reg := templatestest.Registry(t)
	templatestest.Push(t, reg+"/ops/base:1", templatestest.Image(t, "ops"))
	run := func(args ...string) (string, error) {
		var out, errw bytes.Buffer
		err := Run(ctx, append(append([]string{"template"}, args...), "--public", "--data-dir", dir), strings.NewReader(""), &out, &errw)
		return out.String() + errw.String(), err
	}
	out, err := run("pull", "shared", reg+"/ops/base:1", "--kernels", "sh", "--env", "A=1")
	if err != nil {
		t.Fatalf("pull --public: %v: %s", err, out)
	}
	if out, err := run("ls", "--json"); err != nil || !strings.Contains(out, `"name": "shared"`) || !strings.Contains(out, `"public": true`) {
		t.Fatalf("ls --public: %v: %s", err, out)
	}
	st, err := store.Open(ctx, "sqlite://"+dir+"/sandlot.db")
	if err != nil {
		t.Fatal(err)
	}
	got, err := st.GetTemplate(ctx, "any-tenant", "shared")
	st.Close()
	if err != nil || !got.Public() || got.Settings.Env["A"] != "1" || got.Settings.Kernels[0] != "sh" {
		t.Fatalf("the record: %+v %v", got, err)
	}
	if _, err := run("pull", "shared", reg+"/ops/base:1"); !errors.Is(err, errdefs.ErrAlreadyExists) {
		t.Errorf("a second public template of the name: %v", err)
	}
	if out, err := run("rm", "shared"); err != nil {
		t.Fatalf("rm --public: %v: %s", err, out)
	}
	if _, err := run("rm", "shared"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("rm twice: %v", err)
	}
}
