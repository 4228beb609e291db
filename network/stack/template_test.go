package stack

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/sandlot/sandlot/api/e2bcompat"
	"github.com/sandlot/sandlot/api/e2bcompat/e2bcompattest"
	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/image/build"
	"github.com/sandlot/sandlot/image/debian/debiantest"
	"github.com/sandlot/sandlot/internal/testenv"
	"github.com/sandlot/sandlot/network/nettest"
	"github.com/sandlot/sandlot/provider/local"
	"github.com/sandlot/sandlot/provider/local/localtest"
	"github.com/sandlot/sandlot/store/memory"
	"github.com/sandlot/sandlot/templates"
	"github.com/sandlot/sandlot/templates/builds"
	"github.com/sandlot/sandlot/tenant"
)

// newBuildDaemon is the E2B surface with template builds: a catalog over a
// memory store, a builder whose RUN steps run in sandboxes (crun) with the
// network allow gives them, and a manager that creates sandboxes of the
// built templates on the default Debian image's store.
func newBuildDaemon(t *testing.T, e *env, allow []string) string {
	t.Helper()
	images, _ := debiantest.Default(t)
	log := slog.New(slog.DiscardHandler)
	st := memory.New()
	if err := st.CreateTenant(context.Background(), &tenant.Tenant{ID: "closed"}, tenant.HashKey(e2bKey)); err != nil {
		t.Fatal(err)
	}
	cat := templates.New(templates.Config{Store: st, Images: images})
	p := localtest.New(t, local.Config{Runtime: "crun", Networks: e.st, Images: images, Templates: cat})
	m := contexts.NewManager(memory.New(), p, contexts.Config{PoolSize: -1, MaxPerTenant: 20, Networks: e.st, Catalog: cat, Logger: log})
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close(context.Background()) })
	pol, err := local.BuildNetwork(allow)
	if err != nil {
		t.Fatal(err)
	}
	b := build.New(build.Config{Store: images, Runner: p.BuildRunner(local.BuildConfig{Network: pol, Tenant: "closed"}), Logger: log})
	h := e2bcompat.New(e2bcompat.Config{Manager: m, Logger: log, Tenants: e2bcompattest.Tenants{e2bKey: "closed"},
		Catalog: cat, Builds: builds.New(builds.Config{Builder: b, Images: images, Catalog: cat})})
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return "http://" + l.Addr().String()
}

// TestTemplatePackages runs e2e/e2b/packages.mjs: the official SDK's
// Template.build with pipInstall and npmInstall (global, as root, and
// local, as the user) against a package index in the fake internet that
// the build's allowlist opens, then a sandbox of the template imports the
// Python module and requires the npm package. pipInstall uses the default
// base's own pip; the image gets npm (e2e/e2b's pinned npm 10) through copy
// first: the base has none.
func TestTemplatePackages(t *testing.T) {
	e := newEnv(t, 0)
	dir := sdkDir(t)
	npmDir := filepath.Join(dir, "node_modules/npm")
	testenv.RequireFile(t, filepath.Join(npmDir, "package.json"))

	const base = "http://pkgs.test:8080"
	idx := newPkgIndex(t, base, "sandlot-demo-js", "sandlot-demo-py")
	e.world.Serve(t, nettest.Web2.String()+":8080", idx)
	url := newBuildDaemon(t, e, []string{"pkgs.test:8080"})

	ctxDir := t.TempDir()
	tools := filepath.Join(ctxDir, "tools")
	if err := os.Mkdir(tools, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("cp", "-a", npmDir, tools).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v %s", err, out)
	}
	if out, ok := runSDK(t, "packages.mjs", 10*time.Minute, "E2B_API_KEY="+e2bKey, "E2B_API_URL="+url, "E2B_SANDBOX_URL="+url,
		"ALIAS=pkgs", "CONTEXT_DIR="+ctxDir, "INDEX="+base,
		"NPM_PACKAGE="+idx.npmName, "PY_PACKAGE="+idx.pyName); !ok {
		t.Fatalf("node packages.mjs:\n%s\nindex saw: %v", out, idx.paths())
	}
	// Both installs went through the index (nothing came from a cache).
	seen := idx.paths()
	for _, p := range []string{"/npm/sandlot-demo-js", "/simple/sandlot-demo-py/", "/files/" + idx.whl} {
		if !slices.Contains(seen, p) {
			t.Errorf("the index never saw %s: %v", p, seen)
		}
	}
}
