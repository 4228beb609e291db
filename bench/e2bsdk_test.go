package bench

import (
	"os"
	"path/filepath"
	"testing"
)

// TestE2BSDKDirRelative: a relative --e2b-sdk comes back absolute (node's
// createRequire refuses a relative path), and the SDK is looked for there.
func TestE2BSDKDirRelative(t *testing.T) {
	wd := t.TempDir()
	if err := os.MkdirAll(filepath.Join(wd, "sdk", "node_modules", "e2b"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(wd, "sdk", "node_modules", "e2b", "package.json"), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Chdir(wd)
	got, err := E2BSDKDir("sdk")
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(wd, "sdk"); got != want {
		t.Errorf("E2BSDKDir(%q) = %q, want %q", "sdk", got, want)
	}
	if _, err := E2BSDKDir("missing"); err == nil {
		t.Error("a directory without the SDK was accepted")
	}
}
