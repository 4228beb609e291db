package daemon

import (
	"bytes"
	"encoding/base64"
	"os"
	"path/filepath"
	"testing"
)

func TestSecretsKey(t *testing.T) {
	dir := t.TempDir()
	k1, err := SecretsKey(dir, "", "")
	if err != nil || len(k1) != secretsKeySize {
		t.Fatalf("first start: %x %v", k1, err)
	}
	fi, err := os.Stat(filepath.Join(dir, secretsKeyFile))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v %v", fi, err)
	}
	if k2, err := SecretsKey(dir, "", ""); err != nil || !bytes.Equal(k1, k2) {
		t.Errorf("second start: another key (%v)", err)
	}
	want := bytes.Repeat([]byte{3}, secretsKeySize)
	b64 := filepath.Join(dir, "b64")
	os.WriteFile(b64, []byte(base64.StdEncoding.EncodeToString(want)+"\n"), 0o600)
	if k, err := SecretsKey(dir, b64, ""); err != nil || !bytes.Equal(k, want) {
		t.Errorf("base64 file: %x %v", k, err)
	}
	if k, err := SecretsKey(t.TempDir(), "", base64.RawStdEncoding.EncodeToString(want)); err != nil || !bytes.Equal(k, want) {
		t.Errorf("from the environment: %x %v", k, err)
	}
	for name, path := range map[string]string{"missing": filepath.Join(dir, "none"), "short": filepath.Join(dir, "short")} {
		os.WriteFile(filepath.Join(dir, "short"), []byte("c2hvcnQ="), 0o600)
		if _, err := SecretsKey(dir, path, ""); err == nil {
			t.Errorf("%s key file accepted", name)
		}
	}
}
