package local

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/image/debian/debiantest"
	"github.com/sandlot/sandlot/runtime"
)

// TestCapture snapshots a real sandbox's writable layer on each runtime
// after the sandbox wrote hostile things into it: symlinks to the host's
// files, a sparse file far past the bound, a FIFO, a whiteout. The tar
// holds the files it wrote with image ids, links as links, nothing of the
// host; the sparse file is refused by its apparent size; the sandbox runs
// on after a capture and a paused one stays paused.
func TestCapture(t *testing.T) {
	s, _ := debiantest.Default(t)
	for _, kind := range testKinds {
		t.Run(kind, func(t *testing.T) {
			p := newImageProvider(t, kind, s, false)
			c := create(t, p, contexts.Spec{})
			ctx := context.Background()
			r := sh(t, c, `set -e; cd /home/user; echo kept > note.txt; ln -s /etc/shadow shadow; ln -s ../../../../ up; mkfifo pipe;
truncate -s 1T /home/user/sparse; echo ok`)
			if r.ExitCode != 0 {
				t.Fatalf("setup: %+v", r)
			}
			rctx, cancel := context.WithTimeout(ctx, time.Minute)
			defer cancel()
			if r, err := c.Exec(rctx, agent.ExecParams{Shell: "rm /etc/debian_version", User: agent.RootUser, TimeoutMs: 30000}, nil); err != nil || r.ExitCode != 0 {
				t.Fatalf("rm as root: %+v, %v", r, err)
			}
			var buf bytes.Buffer
			if err := p.Capture(ctx, c.ID(), &buf, 64<<20); !errors.Is(err, errdefs.ErrResourceExhausted) {
				t.Fatalf("capture with a 1 TiB sparse file = %v, want resource_exhausted", err)
			}
			sh(t, c, "rm /home/user/sparse")
			buf.Reset()
			if err := p.Capture(ctx, c.ID(), &buf, 64<<20); err != nil {
				t.Fatal(err)
			}
			got := map[string]string{}
			tr := tar.NewReader(&buf)
			for {
				h, err := tr.Next()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				body, _ := io.ReadAll(tr)
				got[h.Name] = string(body) + "|" + h.Linkname
				if h.Name == "home/user/note.txt" && (h.Uid != 1000 || h.Gid != 1000) {
					t.Errorf("note.txt ids %d:%d, want the image's 1000:1000", h.Uid, h.Gid)
				}
				if strings.Contains(string(body), "root:") {
					t.Errorf("%s holds what looks like the host's shadow: %q", h.Name, body)
				}
			}
			for name, want := range map[string]string{
				"home/user/note.txt":     "kept\n|",
				"home/user/shadow":       "|/etc/shadow",
				"home/user/up":           "|../../../../",
				"etc/.wh.debian_version": "|",
			} {
				if got[name] != want {
					t.Errorf("%s = %q, want %q (tar: %v)", name, got[name], want, got)
				}
			}
			// gVisor keeps a FIFO in its sentry: the host layer has none.
			if _, ok := got["home/user/pipe"]; ok != (kind != "runsc") {
				t.Errorf("pipe in the tar: %v", ok)
			}
			if r := sh(t, c, "cat /home/user/note.txt"); r.Stdout != "kept\n" {
				t.Errorf("after the capture: %+v", r)
			}
			if err := p.Pause(ctx, c.ID()); err != nil {
				t.Fatal(err)
			}
			if err := p.Capture(ctx, c.ID(), io.Discard, 64<<20); err != nil {
				t.Fatal(err)
			}
			if st, err := p.rt.State(ctx, c.ID()); err != nil || st.Status != runtime.StatusPaused {
				t.Errorf("a paused sandbox after capture: %+v, %v", st, err)
			}
			if err := p.Resume(ctx, c.ID()); err != nil {
				t.Fatal(err)
			}
		})
	}
}
