package cli

import (
	"context"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandlot/sandlot/api/server/servertest"
	"github.com/sandlot/sandlot/contexts"
)

// TestUserFlag: --user makes a command one end user's: exec keeps one
// user's state apart from another's of the same conversation, ctx ls
// filters and shows the user, ctx get resolves a conversation per user,
// and files reach the user's context.
func TestUserFlag(t *testing.T) {
	e := servertest.NewEnv(nil)
	ts := httptest.NewServer(e.Handler)
	defer ts.Close()
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, keyFile), []byte(e.KeyA+"\n"), 0o600)
	t.Setenv(envURL, ts.URL)
	t.Setenv(envAPIKey, "")
	t.Setenv(envDataDir, dir)

	if out, _, err := run(t, "", "exec", "--user", "alice", "--conversation", "c", "x=1\nprint(x)"); err != nil || out != "1\n" {
		t.Fatalf("exec as alice: %q %v", out, err)
	}
	if out, _, err := run(t, "", "exec", "--user", "bob", "--conversation", "c", "x=2\nprint(x)"); err != nil || out != "2\n" {
		t.Fatalf("exec as bob: %q %v", out, err)
	}
	if out, _, err := run(t, "", "exec", "--user", "alice", "--conversation", "c", "print(x)"); err != nil || out != "1\n" {
		t.Fatalf("alice's state: %q %v", out, err)
	}
	out, _, err := run(t, "", "ctx", "ls", "--user", "bob")
	if err != nil || !strings.Contains(out, "USER") || !strings.Contains(out, "bob") || strings.Contains(out, "alice") {
		t.Fatalf("ctx ls --user bob: %q %v", out, err)
	}
	out, _, err = run(t, "", "ctx", "get", "--user", "alice", "c")
	if err != nil || !strings.Contains(out, "alice") {
		t.Fatalf("ctx get --user alice c: %q %v", out, err)
	}
	local := filepath.Join(dir, "f.txt")
	os.WriteFile(local, []byte("alice-only"), 0o644)
	if _, _, err := run(t, "", "files", "put", "--user", "alice", "--conversation", "c", local, "f.txt"); err != nil {
		t.Fatal(err)
	}
	recs, _ := e.Contexts.List(context.Background(), contexts.Filter{UserID: "alice"})
	if len(recs) != 1 {
		t.Fatalf("alice's contexts: %v", recs)
	}
	if _, ok := e.Contexts.File(recs[0].ID, "/home/user/f.txt"); !ok {
		t.Fatal("files put --user alice did not reach alice's context")
	}
	// A conversation of no user is not a user's.
	if _, _, err := run(t, "", "ctx", "get", "c"); err == nil {
		t.Fatal("ctx get c found a user's context as the no-user conversation's")
	}
}
