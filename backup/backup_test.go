package backup

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/store"
	"github.com/sandlot/sandlot/store/storetest"
)

// dataDir is a data dir as a daemon leaves it: the store (the upgrade
// fixture of today's schema), the secrets key and the state files, and
// what a backup leaves out (images/, nodes/).
func dataDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range map[string]string{
		"secrets-key": strings.Repeat("k", 32), "guard-hmac-key": strings.Repeat("g", 32), "metrics-token": "m0",
		"api-key": storetest.FixtureKey + "\n", "nodes/0123456789abcdef": "node-a\n", "nodes/not-a-node": "x", "images/refs.json": "{}",
	} {
		os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o700)
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, DatabaseName), fixtureDB(t), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestBackupRestore(t *testing.T) {
	ctx := context.Background()
	src := dataDir(t)
	out := filepath.Join(t.TempDir(), "b.tar.gz")
	m, err := Create(ctx, Config{DataDir: src, Out: out, Sandlot: "v1.2.3"})
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(out); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("archive mode %v, %v; want 0600 (it holds the secrets key)", fi.Mode(), err)
	}
	if m.Schema != store.SchemaVersion() || m.SecretsKey != KeyIncluded || m.Sandlot != "v1.2.3" {
		t.Errorf("manifest %+v", m)
	}
	var names []string
	for _, f := range m.Files {
		names = append(names, f.Name)
	}
	if got := strings.Join(names, ","); got != "sandlot.db,secrets-key,guard-hmac-key,metrics-token,api-key,nodes/0123456789abcdef" {
		t.Errorf("members %s", got)
	}
	if _, err := Create(ctx, Config{DataDir: src, Out: out}); !errors.Is(err, errdefs.ErrAlreadyExists) {
		t.Errorf("a second backup over the first: %v", err)
	}

	dst := filepath.Join(t.TempDir(), "restored")
	if _, err := Restore(ctx, RestoreConfig{From: out, DataDir: dst}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"secrets-key", "guard-hmac-key", "metrics-token", "api-key", "nodes/0123456789abcdef"} {
		a, _ := os.ReadFile(filepath.Join(src, name))
		b, err := os.ReadFile(filepath.Join(dst, name))
		if err != nil || string(a) != string(b) {
			t.Errorf("%s: restored %q, %v; want %q", name, b, err, a)
		}
	}
	for _, left := range []string{"nodes/not-a-node", "images"} {
		if _, err := os.Stat(filepath.Join(dst, left)); err == nil {
			t.Errorf("%s was restored", left)
		}
	}
	s, err := store.Open(ctx, filepath.Join(dst, DatabaseName))
	if err != nil {
		t.Fatal(err)
	}
	storetest.CheckFixture(t, s, store.SchemaVersion())
	s.Close()

	// A data dir that holds something is not overwritten unless asked.
	if _, err := Restore(ctx, RestoreConfig{From: out, DataDir: dst}); !errors.Is(err, errdefs.ErrFailedPrecondition) || !strings.Contains(err.Error(), "--force") {
		t.Errorf("restore over a data dir: %v", err)
	}
	// With --force it is, and a stale WAL of the old database goes.
	os.WriteFile(filepath.Join(dst, DatabaseName+"-wal"), []byte("stale"), 0o600)
	os.WriteFile(filepath.Join(dst, "metrics-token"), []byte("changed"), 0o600)
	if _, err := Restore(ctx, RestoreConfig{From: out, DataDir: dst, Force: true}); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(dst, "metrics-token")); string(b) != "m0" {
		t.Errorf("metrics-token after --force: %q", b)
	}
	if _, err := os.Stat(filepath.Join(dst, DatabaseName+"-wal")); err == nil {
		t.Error("the old database's WAL survived the restore")
	}
}

// TestBackupWithoutKey: the secrets key can be left out, and a key the
// daemon reads from outside the data dir is never in the archive; the
// manifest says which.
func TestBackupWithoutKey(t *testing.T) {
	ctx := context.Background()
	src := dataDir(t)
	for _, tc := range []struct {
		cfg  Config
		note string
	}{
		{Config{WithoutSecretsKey: true}, KeyLeftOut},
		{Config{ExternalKey: true}, KeyExternal},
	} {
		tc.cfg.DataDir, tc.cfg.Out = src, filepath.Join(t.TempDir(), "b.tar.gz")
		m, err := Create(ctx, tc.cfg)
		if err != nil {
			t.Fatal(err)
		}
		if m.SecretsKeyNote == "" {
			t.Errorf("%s: no note in words", tc.note)
		}
		if m.SecretsKey != tc.note {
			t.Errorf("secretsKey %q, want %q", m.SecretsKey, tc.note)
		}
		for _, f := range m.Files {
			if f.Name == "secrets-key" {
				t.Errorf("%s: the key is in the archive", tc.note)
			}
		}
	}
}

func TestBackupPostgresRefused(t *testing.T) {
	_, err := Create(context.Background(), Config{DataDir: t.TempDir(), StoreURL: "postgres://sandlot@db/sandlot", Out: filepath.Join(t.TempDir(), "b")})
	if !errors.Is(err, errdefs.ErrFailedPrecondition) || !strings.Contains(err.Error(), "pg_dump") || !strings.Contains(err.Error(), "secrets-key") {
		t.Fatalf("Create on Postgres: %v", err)
	}
}

// TestRestoreNewerSchema: an archive of a database a newer sandlot
// migrated is refused, by its manifest and by the database itself.
func TestRestoreNewerSchema(t *testing.T) {
	ctx := context.Background()
	src := dataDir(t)
	db, err := sql.Open("sqlite", filepath.Join(src, DatabaseName))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`INSERT INTO schema_migrations VALUES (?, '9999_future.sql', 0)`, store.SchemaVersion()+1); err != nil {
		t.Fatal(err)
	}
	db.Close()
	out := filepath.Join(t.TempDir(), "b.tar.gz")
	if _, err := Create(ctx, Config{DataDir: src, Out: out, Sandlot: "v9"}); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), "d")
	_, err = Restore(ctx, RestoreConfig{From: out, DataDir: dst})
	if !errors.Is(err, errdefs.ErrFailedPrecondition) || !strings.Contains(err.Error(), "newer than this sandlot's") {
		t.Fatalf("Restore of a newer schema: %v", err)
	}
	if ents, _ := os.ReadDir(dst); len(ents) != 0 {
		t.Errorf("the refused restore left %v", ents)
	}
}
