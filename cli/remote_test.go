package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sandlot/sandlot/api"
	"github.com/sandlot/sandlot/api/server"
	"github.com/sandlot/sandlot/api/server/servertest"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/store"
	"github.com/sandlot/sandlot/tenant"
)

// run runs the CLI with args and returns stdout, stderr and the error.
func run(t *testing.T, stdin string, args ...string) (string, string, error) {
	t.Helper()
	var out, errw bytes.Buffer
	err := Run(context.Background(), args, strings.NewReader(stdin), &out, &errw)
	return out.String(), errw.String(), err
}

func TestClientCommands(t *testing.T) {
	e := servertest.NewEnv(nil)
	ts := httptest.NewServer(e.Handler)
	defer ts.Close()
	// The key comes from the data dir's key file, the URL from the env.
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, keyFile), []byte(e.KeyA+"\n"), 0o600)
	t.Setenv(envURL, ts.URL)
	t.Setenv(envAPIKey, "")
	t.Setenv(envDataDir, dir)

	out, _, err := run(t, "", "exec", "--conversation", "c", "--lang", "python", "x=5\nprint(x)")
	if err != nil || out != "5\n" {
		t.Fatalf("exec: %q %v", out, err)
	}
	os.WriteFile(filepath.Join(dir, "code.py"), []byte("print(x)"), 0o644)
	out, _, err = run(t, "", "exec", "--conversation", "c", "--file", filepath.Join(dir, "code.py"))
	if err != nil || out != "5\n" {
		t.Fatalf("exec --file: %q %v", out, err)
	}
	out, _, err = run(t, "print(x)", "exec", "--conversation", "c", "--json", "--file", "-")
	var res map[string]any
	if err != nil || json.Unmarshal([]byte(out), &res) != nil || res["stdout"] != "5\n" {
		t.Fatalf("exec --json: %q %v", out, err)
	}
	if _, _, err = run(t, "", "exec", "--lang", "cobol", "x"); errdefs.ExitCode(err) != 2 {
		t.Fatalf("bad language: %v (exit %d)", err, errdefs.ExitCode(err))
	}
	if _, _, err = run(t, "", "exec"); errdefs.ExitCode(err) != 2 {
		t.Fatalf("no code: %v", err)
	}

	out, _, err = run(t, "", "ctx", "ls")
	if err != nil || !strings.Contains(out, "CONVERSATION") || !strings.Contains(out, "ready") {
		t.Fatalf("ctx ls: %q %v", out, err)
	}
	out, _, err = run(t, "", "ctx", "ls", "--json")
	var l struct{ Contexts []struct{ ID string } }
	if err != nil || json.Unmarshal([]byte(out), &l) != nil || len(l.Contexts) != 1 {
		t.Fatalf("ctx ls --json: %q %v", out, err)
	}
	id := l.Contexts[0].ID
	if out, _, err = run(t, "", "ctx", "get", id); err != nil || !strings.Contains(out, "conversation") {
		t.Fatalf("ctx get: %q %v", out, err)
	}

	local := filepath.Join(dir, "data.csv")
	os.WriteFile(local, []byte("a,b\n1,2\n"), 0o644)
	if out, _, err = run(t, "", "files", "put", "--context", id, local, "in/data.csv"); err != nil || !strings.Contains(out, "/home/user/in/data.csv") {
		t.Fatalf("files put: %q %v", out, err)
	}
	if out, _, err = run(t, "", "files", "ls", "--conversation", "c", "in"); err != nil || !strings.Contains(out, "data.csv") {
		t.Fatalf("files ls: %q %v", out, err)
	}
	if out, _, err = run(t, "", "files", "get", "--context", id, "in/data.csv", "-"); err != nil || out != "a,b\n1,2\n" {
		t.Fatalf("files get -: %q %v", out, err)
	}
	dst := filepath.Join(dir, "back.csv")
	if _, _, err = run(t, "", "files", "get", "--context", id, "in/data.csv", dst); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(dst); string(b) != "a,b\n1,2\n" {
		t.Fatalf("downloaded %q", b)
	}
	if _, _, err = run(t, "", "files", "get", "--context", id, "../../etc/passwd", "-"); errdefs.ExitCode(err) != 2 {
		t.Fatalf("traversal: %v", err)
	}

	if _, _, err = run(t, "", "ctx", "rm", id); err != nil {
		t.Fatal(err)
	}
	if _, _, err = run(t, "", "ctx", "get", "nope"); errdefs.ExitCode(err) != 3 {
		t.Fatalf("unknown id: %v", err)
	}
	t.Setenv(envAPIKey, e.KeyB)
	if _, _, err = run(t, "", "ctx", "get", id); errdefs.ExitCode(err) != 3 {
		t.Fatalf("foreign tenant: %v", err)
	}
}

func TestTenantCommands(t *testing.T) {
	dir := t.TempDir()
	out, _, err := run(t, "", "tenant", "create", "--data-dir", dir, "--json", "acme")
	var created struct {
		ID     string `json:"id"`
		APIKey string `json:"apiKey"`
	}
	if err != nil || json.Unmarshal([]byte(out), &created) != nil || !tenant.ValidKey(created.APIKey) {
		t.Fatalf("create: %q %v", out, err)
	}
	// Flags may follow the positional arguments, as in the README.
	out, _, err = run(t, "", "tenant", "create", "acme2", "--data-dir", dir, "--admin", "--json")
	var created2 struct {
		Name  string `json:"name"`
		Admin bool   `json:"admin"`
	}
	if err != nil || json.Unmarshal([]byte(out), &created2) != nil || created2.Name != "acme2" || !created2.Admin {
		t.Fatalf("create with trailing flags: %q %v", out, err)
	}
	// The guard's entity types: a list, none, and an unknown type refused.
	out, _, err = run(t, "", "tenant", "create", "hr", "--data-dir", dir, "--guard-entities", "person,address", "--json")
	var created3 struct {
		GuardEntities []string `json:"guardEntities"`
	}
	if err != nil || json.Unmarshal([]byte(out), &created3) != nil || !slices.Equal(created3.GuardEntities, []string{"PERSON", "ADDRESS"}) {
		t.Fatalf("create with --guard-entities: %q %v", out, err)
	}
	if _, _, err := run(t, "", "tenant", "create", "hr2", "--data-dir", dir, "--guard-entities", "shoe_size"); errdefs.ExitCode(err) != 2 {
		t.Fatalf("an unknown entity type: %v", err)
	}
	if _, _, err := run(t, "", "tenant", "create", "--data-dir", dir, "--", "-dash"); err != nil {
		t.Fatalf("create after --: %v", err)
	}
	if _, _, err := run(t, "", "tenant", "create", "a", "b", "--data-dir", dir); errdefs.ExitCode(err) != 2 {
		t.Fatalf("two names: %v", err)
	}
	out, _, err = run(t, "", "tenant", "list", "--data-dir", dir)
	if err != nil || !strings.Contains(out, "acme") || !strings.Contains(out, created.ID) || strings.Contains(out, created.APIKey) {
		t.Fatalf("list: %q %v", out, err)
	}
	out, _, err = run(t, "", "tenant", "rotate-key", "--data-dir", dir, "--json", created.ID)
	var rotated struct{ APIKey string }
	if err != nil || json.Unmarshal([]byte(out), &rotated) != nil || rotated.APIKey == created.APIKey {
		t.Fatalf("rotate: %q %v", out, err)
	}
	sf := storeFlags{dataDir: dir}
	st, err := store.Open(context.Background(), sf.storeURL())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.TenantByKeyHash(context.Background(), tenant.HashKey(created.APIKey)); err == nil {
		t.Error("the old key still works")
	}
	if tn, err := st.TenantByKeyHash(context.Background(), tenant.HashKey(rotated.APIKey)); err != nil || tn.ID != created.ID {
		t.Errorf("the new key: %v", err)
	}
	st.Close()
	if _, _, err = run(t, "", "tenant", "delete", "--data-dir", dir, created.ID); err != nil {
		t.Fatal(err)
	}
	if _, _, err = run(t, "", "tenant", "delete", "--data-dir", dir, created.ID); errdefs.ExitCode(err) != 3 {
		t.Fatalf("delete twice: %v", err)
	}
}

// The key printed at first start is an ordinary tenant's: it cannot switch
// the guard off per request (403), unless --bootstrap-admin asked for an
// admin. Before, the bootstrap tenant was always an admin.
func TestBootstrapTenant(t *testing.T) {
	for _, admin := range []bool{false, true} {
		t.Run(fmt.Sprintf("admin=%v", admin), func(t *testing.T) {
			dir := t.TempDir()
			st, err := store.Open(context.Background(), "memory:")
			if err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			std := IO{Out: &out, Err: &out}
			if err := bootstrapTenant(context.Background(), st, dir, "", admin, std); err != nil {
				t.Fatal(err)
			}
			b, err := os.ReadFile(filepath.Join(dir, keyFile))
			key := strings.TrimSpace(string(b))
			if err != nil || !tenant.ValidKey(key) || !strings.Contains(out.String(), key) {
				t.Fatalf("%q %v", out.String(), err)
			}
			if fi, _ := os.Stat(filepath.Join(dir, keyFile)); fi.Mode().Perm() != 0o600 {
				t.Fatalf("mode %v", fi.Mode())
			}
			if tn, err := st.TenantByKeyHash(context.Background(), tenant.HashKey(key)); err != nil || tn.Admin != admin {
				t.Fatalf("%+v %v, want admin %v", tn, err, admin)
			}
			// The guard override with the bootstrap key.
			e := servertest.NewEnv(func(c *server.Config) { c.Auth = tenant.NewAuthenticator(st, tenant.AuthConfig{}) })
			req := httptest.NewRequest("GET", "/v1/tools", nil)
			req.Header.Set("X-API-KEY", key)
			req.Header.Set(api.HeaderGuardMode, tenant.GuardOff)
			w := httptest.NewRecorder()
			e.Handler.ServeHTTP(w, req)
			if want := map[bool]int{false: 403, true: 200}[admin]; w.Code != want {
				t.Fatalf("guard off with the bootstrap key: %d %s, want %d", w.Code, w.Body, want)
			}
			// A second start creates nothing and prints nothing.
			out.Reset()
			if err := bootstrapTenant(context.Background(), st, dir, "", admin, std); err != nil || out.Len() != 0 {
				t.Fatalf("%q %v", out.String(), err)
			}
		})
	}
}

// hiddenTenants lists no tenant: the view of a replica that read the store
// just before another replica made the default tenant.
type hiddenTenants struct{ store.Backend }

func (hiddenTenants) ListTenants(context.Context) ([]*tenant.Tenant, error) { return nil, nil }

// Two replicas that start at once on an empty store both find no tenant;
// the one that loses the race to create "default" starts as well (before,
// it failed on the taken name, and its pod restarted), and writes no key.
func TestBootstrapTenantRace(t *testing.T) {
	st, err := store.Open(context.Background(), "memory:")
	if err != nil {
		t.Fatal(err)
	}
	if err := bootstrapTenant(context.Background(), st, t.TempDir(), "", false, IO{Out: io.Discard, Err: io.Discard}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	var out bytes.Buffer
	if err := bootstrapTenant(context.Background(), hiddenTenants{st}, dir, "", false, IO{Out: &out, Err: &out}); err != nil {
		t.Fatalf("the replica that lost the race: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, keyFile)); !errors.Is(err, os.ErrNotExist) || out.Len() != 0 {
		t.Fatalf("the losing replica wrote a key or printed %q: %v", out.String(), err)
	}
	if ts, err := st.ListTenants(context.Background()); err != nil || len(ts) != 1 {
		t.Fatalf("tenants: %d %v", len(ts), err)
	}
}
