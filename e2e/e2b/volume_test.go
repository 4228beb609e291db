package e2b

import (
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/sandlot/sandlot/internal/testenv"
)

// TestVolumes runs volume.mjs: a volume written by one sandbox and read by
// the next, across a restart of `sandlot serve` with a sandbox holding it
// (the new daemon mounts the same file system into a new sandbox), refused
// to another tenant's key as a volume that does not exist.
func TestVolumes(t *testing.T) {
	t.Parallel()
	npmReady(t)
	testenv.RequireRoot(t)
	bin := testenv.SandlotBinary(t)
	data := t.TempDir()
	state, err := os.MkdirTemp("", "sl-volumes-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(state) })

	url, key := serveIn(t, bin, data, state)
	out := strings.TrimSpace(node(t, url, key, "volume.mjs", "a"))
	lines := strings.Split(out, "\n")
	vol := lines[len(lines)-1]
	var v struct{ ID, Name string }
	if err := json.Unmarshal([]byte(vol), &v); err != nil || v.ID == "" {
		t.Fatalf("phase a printed %q", out)
	}
	stopServe(t, url)
	url, key = serveIn(t, bin, data, state)
	if out := node(t, url, key, "volume.mjs", "b", vol); !strings.Contains(out, "b: ok") {
		t.Fatalf("after the restart:\n%s", out)
	}
	other := newTenantKey(t, bin, data, "volumes-other")
	if out := node(t, url, other, "volume.mjs", "other", vol); !strings.Contains(out, "other: ok") {
		t.Fatalf("another tenant:\n%s", out)
	}
	if out := node(t, url, key, "volume.mjs", "end", vol); !strings.Contains(out, "end: ok") {
		t.Fatalf("destroy:\n%s", out)
	}
}

// newTenantKey creates a tenant in data (the CLI, as an operator would,
// while serve runs) and returns its key.
func newTenantKey(t *testing.T, bin, data, name string) string {
	t.Helper()
	out, err := exec.Command(bin, "tenant", "create", "--data-dir", data, "--json", name).Output()
	if err != nil {
		t.Fatalf("tenant create: %v", err)
	}
	var created struct{ APIKey string }
	if err := json.Unmarshal(out, &created); err != nil || created.APIKey == "" {
		t.Fatalf("tenant create: %q: %v", out, err)
	}
	return created.APIKey
}
