package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandlot/sandlot/api"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/internal/testenv"
)

// TestKeyAndUsageCommands runs sandlot key and sandlot usage against a
// `sandlot serve`: a key made by `key create` (printed alone on stdout)
// works and is the current one in its own listing, never shown whole
// there; `key revoke` ends it (exit 10, unauthenticated); the tenant's
// last key is refused (exit 5); usage counts the context an exec made.
func TestKeyAndUsageCommands(t *testing.T) {
	testenv.RequireOCIRuntime(t)
	bin := testenv.SandlotBinary(t)
	env := append(os.Environ(), "SANDLOT_AGENT_BIN="+testenv.AgentBinary(t), envNode+"=")
	data := t.TempDir()
	state, err := os.MkdirTemp("", "slk-") // short: socket paths are bounded
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(state) }) // after the daemon's check (startServeBinary)
	srv := startServeBinary(t, bin, env, "--data-dir", data, "--state-dir", state)
	t.Setenv(envClientConfig, filepath.Join(t.TempDir(), "none.yaml"))
	t.Setenv(envURL, srv.URL)
	t.Setenv(envAPIKey, "")
	t.Setenv(envDataDir, data) // the bootstrap key from the data dir

	out, errw, err := run(t, "", "key", "create", "ci runner")
	newKey := strings.TrimSpace(out)
	if err != nil || !strings.HasPrefix(newKey, "e2b_") || strings.Count(out, "\n") != 1 || !strings.Contains(errw, "shown this once") {
		t.Fatalf("key create: %q %q %v", out, errw, err)
	}
	t.Setenv(envAPIKey, newKey)
	out, _, err = run(t, "", "key", "list", "-o", "json")
	var l api.APIKeyList
	if err != nil || json.Unmarshal([]byte(out), &l) != nil || len(l.Keys) != 2 {
		t.Fatalf("key list with the new key: %q %v", out, err)
	}
	if strings.Contains(out, newKey) {
		t.Fatalf("the listing holds the key: %s", out)
	}
	var made, first api.APIKey
	for _, k := range l.Keys {
		if k.Name == "ci runner" {
			made = k
		} else {
			first = k
		}
	}
	if !made.Current || first.Current || made.Prefix != newKey[:len(made.Prefix)] {
		t.Fatalf("key list: %+v", l.Keys)
	}
	out, _, err = run(t, "", "key", "ls")
	if err != nil || !strings.Contains(out, "LAST USED") || !strings.Contains(out, made.ID) || !strings.Contains(out, "ci runner") {
		t.Fatalf("key ls: %q %v", out, err)
	}

	t.Setenv(envAPIKey, "")
	if out, _, err = run(t, "", "key", "revoke", made.ID); err != nil || out != "revoked "+made.ID+"\n" {
		t.Fatalf("key revoke: %q %v", out, err)
	}
	t.Setenv(envAPIKey, newKey)
	if _, _, err := run(t, "", "key", "list"); errdefs.ExitCode(err) != 10 {
		t.Errorf("key list with the revoked key: %v (exit %d), want 10", err, errdefs.ExitCode(err))
	}
	t.Setenv(envAPIKey, "")
	if _, _, err := run(t, "", "key", "revoke", first.ID); errdefs.ExitCode(err) != 5 {
		t.Errorf("revoking the last key: %v (exit %d), want 5", err, errdefs.ExitCode(err))
	}
	if _, _, err := run(t, "", "key", "revoke", "key_0000000000000000"); errdefs.ExitCode(err) != 3 {
		t.Errorf("revoking an unknown key: %v (exit %d), want 3", err, errdefs.ExitCode(err))
	}

	if out, _, err := run(t, "", "exec", "--conversation", "u", "--lang", "python", "print(6*7)"); err != nil || out != "42\n" {
		t.Fatalf("exec: %q %v", out, err)
	}
	out, _, err = run(t, "", "usage", "-o", "json")
	var u api.Usage
	if err != nil || json.Unmarshal([]byte(out), &u) != nil || u.Tenant == "" {
		t.Fatalf("usage: %q %v", out, err)
	}
	used := map[string]int64{}
	for _, q := range u.Quotas {
		used[q.Name] = q.Used
	}
	if used["contexts"] != 1 || used["contextsPerConversation"] != 1 || used["requestsInFlight"] < 1 {
		t.Errorf("usage after one exec: %v", used)
	}
	out, _, err = run(t, "", "usage")
	if err != nil || !strings.Contains(out, "QUOTA") || !strings.Contains(out, "contextsPerConversation") {
		t.Fatalf("usage: %q %v", out, err)
	}
}
