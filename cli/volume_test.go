package cli

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandlot/sandlot/api"
	"github.com/sandlot/sandlot/api/server"
	"github.com/sandlot/sandlot/api/server/servertest"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/store/memory"
	"github.com/sandlot/sandlot/tenant"
	"github.com/sandlot/sandlot/volumes"
)

// TestVolumeCommands: sandlot volume create, ls, inspect and rm through
// /v1; another tenant's key finds nothing (exit 3, not found).
func TestVolumeCommands(t *testing.T) {
	st := memory.New()
	for _, id := range []string{"tenant-a", "tenant-b"} {
		st.CreateTenant(context.Background(), &tenant.Tenant{ID: id}, tenant.HashKey("e2b_"+id))
	}
	h, err := volumes.NewHost(filepath.Join(t.TempDir(), "volumes"))
	if err != nil {
		t.Fatal(err)
	}
	e := servertest.NewEnv(func(c *server.Config) { c.Volumes = volumes.NewService(st, h, volumes.Config{}) })
	ts := httptest.NewServer(e.Handler)
	defer ts.Close()
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, keyFile), []byte(e.KeyA+"\n"), 0o600)
	t.Setenv(envURL, ts.URL)
	t.Setenv(envAPIKey, "")
	t.Setenv(envDataDir, dir)

	out, _, err := run(t, "", "volume", "create", "data", "--size-mib", "32")
	if err != nil || !strings.HasPrefix(out, "data vol") {
		t.Fatalf("volume create: %q %v", out, err)
	}
	if _, _, err := run(t, "", "volume", "create", "bad/name"); errdefs.ExitCode(err) != 2 {
		t.Errorf("bad name: %v (exit %d)", err, errdefs.ExitCode(err))
	}
	out, _, err = run(t, "", "volume", "ls")
	if err != nil || !strings.Contains(out, "NAME") || !strings.Contains(out, "data") {
		t.Fatalf("volume ls: %q %v", out, err)
	}
	out, _, err = run(t, "", "volume", "inspect", "data", "-o", "json")
	var v api.Volume
	if err != nil || json.Unmarshal([]byte(out), &v) != nil || v.SizeBytes != 32<<20 || v.UsedBytes <= 0 {
		t.Fatalf("volume inspect: %q %v", out, err)
	}
	t.Setenv(envAPIKey, e.KeyB)
	for _, ref := range []string{"data", v.ID} {
		if _, _, err := run(t, "", "volume", "inspect", ref); errdefs.ExitCode(err) != 3 {
			t.Errorf("B inspects %s: %v (exit %d)", ref, err, errdefs.ExitCode(err))
		}
		if _, _, err := run(t, "", "volume", "rm", ref); errdefs.ExitCode(err) != 3 {
			t.Errorf("B removes %s: %v (exit %d)", ref, err, errdefs.ExitCode(err))
		}
	}
	t.Setenv(envAPIKey, e.KeyA)
	if out, _, err = run(t, "", "volume", "rm", "data"); err != nil || out != "removed data\n" {
		t.Fatalf("volume rm: %q %v", out, err)
	}
	if _, _, err := run(t, "", "volume", "inspect", "data"); errdefs.ExitCode(err) != 3 {
		t.Errorf("inspect after rm: %v", err)
	}
}
