package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/sandlot/sandlot/api"
	"github.com/sandlot/sandlot/client"
	"github.com/sandlot/sandlot/image"
	"github.com/sandlot/sandlot/image/debian/debiantest"
	"github.com/sandlot/sandlot/image/imagetest"
	"github.com/sandlot/sandlot/internal/testenv"
	"github.com/sandlot/sandlot/provider/local"
)

// TestBackupRestoreRealDaemon backs up the data dir of a running daemon
// that holds a context, a template and a tenant key, restores the archive
// into another data dir, starts a daemon there and uses the restored key:
// it authenticates, finds the context and the template, and runs code.
// The template's image comes back into the restored image store by the
// same digest.
func TestBackupRestoreRealDaemon(t *testing.T) {
	testenv.RequireOCIRuntime(t)
	bin := testenv.SandlotBinary(t)
	env := append(os.Environ(), "SANDLOT_AGENT_BIN="+testenv.AgentBinary(t), envNode+"=")
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	// destroy removes the sandboxes left in a state dir.
	destroy := func(dir string) {
		if p, err := local.New(local.Config{StateDir: dir, AgentPath: testenv.AgentBinary(t)}); err == nil {
			ids, _ := p.List(context.Background())
			for _, id := range ids {
				p.Destroy(context.Background(), id)
			}
		}
	}
	stateDir := func() string {
		dir, err := os.MkdirTemp("", "slb-") // short: socket paths are bounded
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(dir) }) // after the daemons' checks (startServeBinary)
		return dir
	}
	run := func(c *client.Client, conv, code string) string {
		t.Helper()
		res, err := c.RunCode(ctx, client.RunCodeRequest{Target: client.Target{ConversationID: conv}, Language: "python", Code: code})
		if err != nil {
			t.Fatalf("run %q: %v", code, err)
		}
		if res.Error != nil {
			t.Fatalf("run %q: %s", code, res.Error.Name)
		}
		return res.Stdout
	}

	data, state := t.TempDir(), stateDir()
	srv := startServeBinary(t, bin, env, "--data-dir", data, "--state-dir", state)
	keyBytes, err := os.ReadFile(filepath.Join(data, keyFile))
	if err != nil {
		t.Fatal(err)
	}
	key := strings.TrimSpace(string(keyBytes))
	c := client.New(srv.URL, client.WithAPIKey(key))
	if got := run(c, "kept", "x = 6; print(x * 7)"); got != "42\n" {
		t.Fatalf("before: %q", got)
	}
	list, err := c.ListContexts(ctx, client.ListOptions{})
	if err != nil || len(list.Contexts) != 1 {
		t.Fatalf("contexts: %+v, %v", list, err)
	}
	ctxID := list.Contexts[0].ID
	img := imagetest.Image(t, imagetest.Layer(t, imagetest.File{Name: "etc/backup-test", Body: "kept"}))
	var archive bytes.Buffer
	if err := tarball.Write(name.MustParseReference("backup-test:1"), img, &archive); err != nil {
		t.Fatal(err)
	}
	tpl, err := c.ImportTemplate(ctx, "kept-template", api.TemplateSettings{}, &archive)
	if err != nil {
		t.Fatal(err)
	}

	// The backup is taken while the daemon runs.
	out := filepath.Join(t.TempDir(), "backup.tar.gz")
	if code, stdout, errw := cliRun("backup", "--data-dir", data, "--out", out, "--templates", "--images-dir", debiantest.StoreDir()); code != 0 {
		t.Fatalf("backup: exit %d\n%s%s", code, stdout, errw)
	}
	srv.stop(t)
	// The host is lost, sandboxes and all; a new one has the same paths.
	destroy(state)

	restored := filepath.Join(t.TempDir(), "restored")
	if code, stdout, errw := cliRun("restore", "--from", out, "--data-dir", restored); code != 0 {
		t.Fatalf("restore: exit %d\n%s%s", code, stdout, errw)
	}
	if b, err := os.ReadFile(filepath.Join(restored, keyFile)); err != nil || strings.TrimSpace(string(b)) != key {
		t.Errorf("the restored api-key file: %q, %v", b, err)
	}
	// The template's image is in the restored data dir's image store.
	imgs, err := image.Open(filepath.Join(restored, "images"), image.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := imgs.V1(ctx, mustHash(t, tpl.Image)); err != nil {
		t.Errorf("the template's image %s is not in the restored image store: %v", tpl.Image, err)
	}

	srv2 := startServeBinary(t, bin, env, "--data-dir", restored, "--state-dir", state)
	c2 := client.New(srv2.URL, client.WithAPIKey(key))
	got, err := c2.GetContext(ctx, ctxID)
	if err != nil || got.ConversationID != "kept" {
		t.Errorf("the restored daemon's context %s: %+v, %v", ctxID, got, err)
	}
	tl, err := c2.ListTemplates(ctx)
	found := false
	for _, x := range tl.Templates {
		found = found || x.Name == "kept-template" && x.ID == tpl.ID
	}
	if err != nil || !found {
		t.Errorf("the restored daemon's templates: %+v, %v", tl, err)
	}
	if got := run(c2, "after", "print(6 * 7)"); got != "42\n" {
		t.Errorf("after: %q", got)
	}
	// The restored daemon is the node it was (its node id came back), so
	// the conversation whose sandbox was lost goes on at once, in a new
	// sandbox.
	if got := run(c2, "kept", "print('x' in globals())"); got != "False\n" {
		t.Errorf("the restored conversation: %q", got)
	}
	// A key the restored store does not hold is still refused.
	if _, err := client.New(srv2.URL, client.WithAPIKey("sk_not_a_key")).ListContexts(ctx, client.ListOptions{}); err == nil {
		t.Error("an unknown key was accepted")
	}
}

func mustHash(t *testing.T, s string) v1.Hash {
	t.Helper()
	h, err := v1.NewHash(s)
	if err != nil {
		t.Fatal(err)
	}
	return h
}
