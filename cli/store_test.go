package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandlot/sandlot/network/secret"
	"github.com/sandlot/sandlot/tenant"
)

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
	if err := os.WriteFile(filepath.Join(dir, "secrets-key"), bytes.Repeat([]byte{9}, 32), 0o600); err != nil {
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
