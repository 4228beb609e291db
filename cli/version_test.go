package cli

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sandlot/sandlot/api"
	"github.com/sandlot/sandlot/client"
	"github.com/sandlot/sandlot/internal/testenv"
)

// TestVersionAgreesWithServer runs the built binary (make build links the
// git describe version in) as `sandlot serve` and asks it over
// /v1/version: the answer is what the same binary's `version -o json` and
// `--version` print, and it carries a version, a commit and the schema.
func TestVersionAgreesWithServer(t *testing.T) {
	testenv.RequireOCIRuntime(t)
	bin := testenv.SandlotBinary(t)
	out, err := exec.Command(bin, "version", "-o", "json").Output()
	if err != nil {
		t.Fatalf("version -o json: %v", err)
	}
	var local api.Version
	if err := json.Unmarshal(out, &local); err != nil {
		t.Fatalf("version -o json: %v: %s", err, out)
	}
	if local.Version == "" || strings.HasPrefix(local.Version, "devel") || local.Commit == "" || local.SchemaVersion <= 0 {
		t.Errorf("the built binary reports %+v: want a version, a commit and a schema", local)
	}
	line, err := exec.Command(bin, "--version").Output()
	if err != nil {
		t.Fatal(err)
	}
	if want := versionLine(local); string(line) != want {
		t.Errorf("--version printed %q, want %q", line, want)
	}

	env := append(os.Environ(), "SANDLOT_AGENT_BIN="+testenv.AgentBinary(t), envNode+"=")
	srv := startServeBinary(t, bin, env, "--data-dir", t.TempDir(), "--state-dir", t.TempDir())
	defer srv.stop(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	remote, err := client.New(srv.URL).Version(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(local, *remote); diff != "" {
		t.Errorf("/v1/version differs from version -o json (-cli +server)\n%s", diff)
	}
}
