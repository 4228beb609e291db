package daemon

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestGuardKey: the audit HMAC key is created once, private, and reused,
// so HMACs of the same value match across restarts.
func TestGuardKey(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	k1, err := guardKey(dir)
	if err != nil || len(k1) != 32 {
		t.Fatalf("%x %v", k1, err)
	}
	fi, err := os.Stat(filepath.Join(dir, guardKeyFile))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v %v", fi, err)
	}
	k2, err := guardKey(dir)
	if err != nil || !bytes.Equal(k1, k2) {
		t.Fatalf("second start got another key: %v", err)
	}
	other, _ := guardKey(t.TempDir())
	if bytes.Equal(k1, other) {
		t.Fatal("two data dirs share a key")
	}
}
