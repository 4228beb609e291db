package cli

import (
	"bytes"
	"context"
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandlot/sandlot/network/secret"
	"github.com/sandlot/sandlot/tenant"
)

func TestSecretsKey(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(envSecretsKey, "")
	k1, err := secretsKey(dir, "")
	if err != nil || len(k1) != secretsKeySize {
		t.Fatalf("first start: %x %v", k1, err)
	}
	fi, err := os.Stat(filepath.Join(dir, secretsKeyFile))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v %v", fi, err)
	}
	if k2, err := secretsKey(dir, ""); err != nil || !bytes.Equal(k1, k2) {
		t.Errorf("second start: another key (%v)", err)
	}
	want := bytes.Repeat([]byte{3}, secretsKeySize)
	b64 := filepath.Join(dir, "b64")
	os.WriteFile(b64, []byte(base64.StdEncoding.EncodeToString(want)+"\n"), 0o600)
	if k, err := secretsKey(dir, b64); err != nil || !bytes.Equal(k, want) {
		t.Errorf("base64 file: %x %v", k, err)
	}
	t.Setenv(envSecretsKey, base64.RawStdEncoding.EncodeToString(want))
	if k, err := secretsKey(t.TempDir(), ""); err != nil || !bytes.Equal(k, want) {
		t.Errorf("from the environment: %x %v", k, err)
	}
	for name, path := range map[string]string{"missing": filepath.Join(dir, "none"), "short": filepath.Join(dir, "short")} {
		os.WriteFile(filepath.Join(dir, "short"), []byte("c2hvcnQ="), 0o600)
		if _, err := secretsKey(dir, path); err == nil {
			t.Errorf("%s key file accepted", name)
		}
	}
}

// TestSecretsKeyChanged: a daemon that starts on a store whose secrets
// another key sealed stops with a message that names the key.
func TestSecretsKeyChanged(t *testing.T) {
	t.Setenv(envSecretsKey, "")
	ctx := context.Background()
	dir := t.TempDir()
	sf := storeFlags{dataDir: dir, keyed: true}
	st, err := sf.open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.CreateTenant(ctx, &tenant.Tenant{ID: "t"}, tenant.HashKey("k")); err != nil {
		t.Fatal(err)
	}
	if _, err := st.PutSecret(ctx, "t", secret.Stored{Name: "gh", Secret: secret.Secret{Hosts: []string{"a.test"}, Value: "value-0123"}}); err != nil {
		t.Fatal(err)
	}
	st.Close()
	if err := os.WriteFile(filepath.Join(dir, secretsKeyFile), bytes.Repeat([]byte{9}, secretsKeySize), 0o600); err != nil {
		t.Fatal(err)
	}
	st, err = sf.open(ctx)
	if err == nil {
		st.Close()
		t.Fatal("opened with another key")
	}
	if !strings.Contains(err.Error(), "secrets key") {
		t.Errorf("error: %v", err)
	}
}
