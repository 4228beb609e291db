package server_test

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"

	"github.com/sandlot/sandlot/client"
)

// TestDaemonUsers attacks the key (004 §2.1) on a real daemon, real
// sandboxes and the Go client: two end users behind one tenant key name
// the same task. They get two sandboxes; a file alice writes (by code, and
// by the files route of her conversation) is not in bob's; the sandbox
// knows its user (USER_ID); and the listing shows whose each context is.
func TestDaemonUsers(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: skipped with -short")
	}
	runtimePreconditions(t)
	dir, err := os.MkdirTemp("", "sl-e2eu-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	d := startDaemon(t, dir)
	defer d.cleanup(t, d.key)
	c := d.client(d.key)
	ctx := context.Background()
	run := func(t *testing.T, user, code string) string {
		t.Helper()
		res, err := c.RunCode(ctx, client.RunCodeRequest{Target: client.Target{UserID: user, TaskID: "task-7"}, Language: "python", Code: code})
		if err != nil || !res.Success || res.UserID != user || res.ConversationID != "task-7" {
			t.Fatalf("run as %s: %+v %v", user, res, err)
		}
		return res.Stdout
	}
	if out := run(t, "alice", `import os; open("/home/user/mine.txt", "w").write("alice-only"); print(os.environ["USER_ID"])`); out != "alice\n" {
		t.Fatalf("alice's USER_ID: %q", out)
	}
	if out := run(t, "bob", `import os; print(os.path.exists("/home/user/mine.txt"), os.environ["USER_ID"])`); out != "False bob\n" {
		t.Fatalf("bob's sandbox: %q", out)
	}
	if _, err := c.Upload(ctx, client.FileTarget{UserID: "alice", ConversationID: "task-7"}, "up.txt", strings.NewReader("uploaded")); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	_, err = c.Download(ctx, client.FileTarget{UserID: "bob", ConversationID: "task-7"}, "up.txt", &buf, nil)
	if !client.IsNotFound(err) {
		t.Fatalf("bob's download of alice's upload: %q %v", buf.String(), err)
	}
	if out := run(t, "alice", `print(open("/home/user/mine.txt").read(), open("/home/user/up.txt").read())`); out != "alice-only uploaded\n" {
		t.Fatalf("alice's files: %q", out)
	}
	l, err := c.ListContexts(ctx, client.ListOptions{ConversationID: "task-7", Status: []string{"active"}})
	if err != nil || len(l.Contexts) != 2 || l.Contexts[0].SandboxID == l.Contexts[1].SandboxID {
		t.Fatalf("contexts of task-7: %+v %v", l, err)
	}
	users := map[string]bool{}
	for _, x := range l.Contexts {
		users[x.UserID] = true
	}
	if !users["alice"] || !users["bob"] {
		t.Fatalf("the listing's users: %v", users)
	}
}
