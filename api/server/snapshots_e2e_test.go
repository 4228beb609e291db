package server_test

import (
	"context"
	"errors"
	"os/exec"
	"strings"
	"testing"

	"github.com/sandlot/sandlot/api"
	"github.com/sandlot/sandlot/client"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/internal/testenv"
)

// TestSnapshotsServe: through `sandlot serve` on the real runtime, the CLI
// snapshots a context whose sandbox wrote files, a context started from
// the snapshot has them, another tenant neither lists, snapshots, starts
// from nor deletes it, a daemon restart keeps it, and rm deletes it.
func TestSnapshotsServe(t *testing.T) {
	runtimePreconditions(t)
	dir := t.TempDir()
	d := startDaemon(t, dir, "--image-gc-interval", "0")
	bin := testenv.SandlotBinary(t)
	otherKey := d.newTenant(t, "other")
	ctx := context.Background()
	a, b := d.client(d.key), d.client(otherKey)
	sh := func(c *client.Client, conv, tpl, code string) (*api.RunCodeResult, error) {
		return c.RunCode(ctx, client.RunCodeRequest{Target: client.Target{ConversationID: conv}, Language: "sh", Code: code, Template: tpl})
	}
	src, err := sh(a, "src", "", "mkdir -p /home/user/work && echo 'state kept' > /home/user/work/notes.txt && rm -f /etc/motd; echo ok")
	if err != nil || src.Stdout != "ok\n" {
		t.Fatalf("source: %+v %v", src, err)
	}
	cli := func(key string, args ...string) (string, error) {
		t.Helper()
		out, err := exec.Command(bin, append(append([]string{"snapshot"}, args...), "--url", d.URL, "--api-key", key)...).CombinedOutput()
		return string(out), err
	}
	if out, err := cli(d.key, "create", src.ContextID, "--name", "after-setup"); err != nil || !strings.Contains(out, "after-setup") {
		t.Fatalf("snapshot create: %v: %s", err, out)
	}
	if out, err := cli(otherKey, "create", src.ContextID); err == nil {
		t.Errorf("another tenant snapshotted A's context: %s", out)
	}
	from := func(c *client.Client, conv string) (*api.RunCodeResult, error) {
		return sh(c, conv, "after-setup", "cat /home/user/work/notes.txt")
	}
	if r, err := from(a, "from-1"); err != nil || r.Stdout != "state kept\n" {
		t.Errorf("a context from the snapshot: %+v %v", r, err)
	}
	// Fork onto another path of the same conversation: the files come
	// along, the kernel's variables do not (memory false); a second fork
	// onto the same path is refused, the source's own path too.
	if r, err := a.RunCode(ctx, client.RunCodeRequest{Target: client.Target{ConversationID: "src"}, Language: "python", Code: "kept = 41"}); err != nil || !r.Success {
		t.Fatalf("python in the source: %+v %v", r, err)
	}
	fr, err := a.Fork(ctx, src.ContextID, "branch")
	if err != nil || fr.Memory || fr.Context.PathID != "branch" || fr.Context.ConversationID != "src" || fr.Snapshot.ContextID != src.ContextID {
		t.Fatalf("fork: %+v %v", fr, err)
	}
	onBranch := client.Target{ConversationID: "src", PathID: "branch"}
	if r, err := a.RunCode(ctx, client.RunCodeRequest{Target: onBranch, Language: "sh", Code: "cat /home/user/work/notes.txt"}); err != nil || r.Stdout != "state kept\n" || r.ContextID != fr.Context.ID {
		t.Errorf("the fork's files: %+v %v", r, err)
	}
	if r, err := a.RunCode(ctx, client.RunCodeRequest{Target: onBranch, Language: "python", Code: "'kept' in globals()"}); err != nil || len(r.Results) == 0 || r.Results[0].Text != "False" {
		t.Errorf("the fork's kernel, fresh: %+v %v", r, err)
	}
	var e *api.Error
	for path, want := range map[string]errdefs.Code{"branch": errdefs.CodeAlreadyExists, "main": errdefs.CodeInvalidArgument} {
		if _, err := a.Fork(ctx, src.ContextID, path); !errors.As(err, &e) || e.Code != want {
			t.Errorf("fork onto %s: %v, want %s", path, err, want)
		}
	}
	if _, err := b.Fork(ctx, src.ContextID, "b-branch"); !errors.As(err, &e) || e.Code != errdefs.CodeNotFound {
		t.Errorf("another tenant's fork: %v, want not_found", err)
	}
	if _, err := from(b, "from-b"); !errors.As(err, &e) || e.Code != errdefs.CodeNotFound {
		t.Errorf("another tenant from A's snapshot: %v, want not_found", err)
	}
	if l, err := b.ListSnapshots(ctx, ""); err != nil || len(l.Snapshots) != 0 {
		t.Errorf("B's snapshots: %+v %v", l, err)
	}
	if err := b.DeleteSnapshot(ctx, "after-setup"); !errors.As(err, &e) || e.Code != errdefs.CodeNotFound {
		t.Errorf("B deleting A's snapshot: %v, want not_found", err)
	}
	d.cleanup(t, d.key, otherKey)
	d.stop(t)

	d = startDaemon(t, dir, "--image-gc-interval", "0")
	defer d.stop(t)
	defer d.cleanup(t, d.key, otherKey)
	a = d.client(d.key)
	l, err := a.ListSnapshots(ctx, src.ContextID)
	// The fork's template went when the fork's context ended (cleanup);
	// the tenant's own snapshot stays.
	if err != nil || len(l.Snapshots) != 1 || l.Snapshots[0].Name != "after-setup" || l.Snapshots[0].ContextID != src.ContextID {
		t.Fatalf("after a restart: %+v %v; want only after-setup (the fork's %s gone with its context)", l, err, fr.Snapshot.ID)
	}
	if r, err := from(a, "from-2"); err != nil || r.Stdout != "state kept\n" {
		t.Errorf("from the snapshot after a restart: %+v %v", r, err)
	}
	if out, err := cli(d.key, "rm", "after-setup"); err != nil {
		t.Fatalf("snapshot rm: %v: %s", err, out)
	}
	if out, err := cli(d.key, "ls"); err != nil || strings.Contains(out, "after-setup") {
		t.Errorf("ls after rm: %v: %s", err, out)
	}
	if err := a.DeleteSnapshot(ctx, "after-setup"); !errors.As(err, &e) || e.Code != errdefs.CodeNotFound {
		t.Errorf("a second rm: %v, want not_found", err)
	}
}
