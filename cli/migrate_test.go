package cli

import (
	"compress/gzip"
	"context"
	"crypto/sha256"
	"database/sql"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sandlot/sandlot/internal/testenv"
	"github.com/sandlot/sandlot/store"
)

// fixtureDataDir is a data dir whose store is the SQLite upgrade fixture
// of schema version (store/sqlite/testdata), as a daemon of that version
// left it.
func fixtureDataDir(t *testing.T, version string) string {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "store", "sqlite", "testdata", "schema-"+version+".db.gz"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	out, err := os.Create(filepath.Join(dir, "sandlot.db"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, zr); err != nil {
		t.Fatal(err)
	}
	out.Close()
	return dir
}

// dirSums are the SHA-256 of every file in dir, by name.
func dirSums(t *testing.T, dir string) map[string][32]byte {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	sums := map[string][32]byte{}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		sums[e.Name()] = sha256.Sum256(b)
	}
	return sums
}

// TestMigrateDryRun: migrate --dry-run on a store of schema 7 lists the
// migrations after it, by number and name, and changes no byte of the
// data dir; migrate applies them; then there is nothing left to do.
func TestMigrateDryRun(t *testing.T) {
	dir := fixtureDataDir(t, "0007")
	before := dirSums(t, dir)
	code, out, errw := cliRun("migrate", "--dry-run", "--data-dir", dir)
	if code != 0 {
		t.Fatalf("migrate --dry-run: exit %d\n%s%s", code, out, errw)
	}
	for _, want := range []string{"is at schema 7; migrating to", "0008  tenant_names", "0009  sandbox_index_helpers", "0010  user"} {
		if !strings.Contains(out, want) {
			t.Errorf("dry run output lacks %q:\n%s", want, out)
		}
	}
	if after := dirSums(t, dir); len(after) != len(before) || after["sandlot.db"] != before["sandlot.db"] {
		t.Fatalf("the dry run changed the data dir: %d files before, %d after, database changed %v", len(before), len(after), after["sandlot.db"] != before["sandlot.db"])
	}
	// A data dir without a store: the dry run makes nothing.
	empty := t.TempDir()
	if code, out, _ := cliRun("migrate", "--dry-run", "--data-dir", filepath.Join(empty, "none")); code != 0 || !strings.Contains(out, "does not exist") {
		t.Errorf("dry run on no store: exit %d\n%s", code, out)
	}
	if ents, _ := os.ReadDir(empty); len(ents) != 0 {
		t.Errorf("the dry run made %v", ents)
	}

	if code, out, errw := cliRun("migrate", "--data-dir", dir); code != 0 || !strings.Contains(out, "migrated from schema 7 to") {
		t.Fatalf("migrate: exit %d\n%s%s", code, out, errw)
	}
	sc, err := store.InspectSchema(context.Background(), filepath.Join(dir, "sandlot.db"))
	if err != nil || sc.Current != sc.Latest || len(sc.Pending) != 0 {
		t.Fatalf("after migrate: %+v, %v", sc, err)
	}
	if code, out, _ := cliRun("migrate", "--dry-run", "--data-dir", dir, "-o", "json"); code != 0 || !strings.Contains(out, `"migrations": []`) {
		t.Errorf("dry run after migrate: exit %d\n%s", code, out)
	}
}

// newerSchema makes the fixture of today's schema record a migration
// this binary lacks, as a newer sandlot would leave it.
func newerSchema(t *testing.T) (dir string, latest int) {
	t.Helper()
	dir = fixtureDataDir(t, "0010")
	sc, err := store.InspectSchema(context.Background(), filepath.Join(dir, "sandlot.db"))
	if err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", filepath.Join(dir, "sandlot.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`INSERT INTO schema_migrations VALUES (?, '9999_future.sql', 0)`, sc.Latest+1); err != nil {
		t.Fatal(err)
	}
	return dir, sc.Latest
}

// TestServeRefusesNewerSchema: a daemon started on a store a newer
// sandlot migrated exits at once with failed_precondition's status and a
// message naming both versions and what to do; migrate refuses it too.
func TestServeRefusesNewerSchema(t *testing.T) {
	testenv.RequireRoot(t)
	dir, latest := newerSchema(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, testenv.SandlotBinary(t), "serve", "--data-dir", dir, "--addr", "127.0.0.1:0", "--state-dir", t.TempDir())
	b, err := cmd.CombinedOutput()
	out := string(b)
	ee, ok := err.(*exec.ExitError)
	if !ok || ee.ExitCode() != 5 {
		t.Fatalf("serve: %v, want exit status 5 (failed_precondition)\n%s", err, out)
	}
	for _, want := range []string{
		"schema is at version " + strconv.Itoa(latest+1), "newer than this sandlot's " + strconv.Itoa(latest),
		"Run that release or a later one", "restore a backup taken before the upgrade",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("serve's message lacks %q:\n%s", want, out)
		}
	}
	if code, _, errw := cliRun("migrate", "--data-dir", dir); code != 5 || !strings.Contains(errw, "newer than this sandlot's") {
		t.Errorf("migrate: exit %d\n%s", code, errw)
	}
}

// TestOperatorCommandsReadConfig: migrate and doctor find the data dir in
// serve's config file, as serve does.
func TestOperatorCommandsReadConfig(t *testing.T) {
	dir := fixtureDataDir(t, "0007")
	cfg := filepath.Join(t.TempDir(), "sandlot.yaml")
	if err := os.WriteFile(cfg, []byte("data-dir: "+dir+"\ncontext-ttl: 10m\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, out, errw := cliRun("migrate", "--dry-run", "--config", cfg); code != 0 || !strings.Contains(out, filepath.Join(dir, "sandlot.db")+" is at schema 7") {
		t.Errorf("migrate --config: exit %d\n%s%s", code, out, errw)
	}
	_, out, errw := cliRun("doctor", "--config", cfg, "-o", "json")
	if !strings.Contains(out, filepath.Join(dir, "sandlot.db")+" is at schema 7") {
		t.Errorf("doctor --config does not look at the file's data dir:\n%s%s", out, errw)
	}
}
