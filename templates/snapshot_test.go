package templates_test

import (
	"archive/tar"
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/templates"
	"github.com/sandlot/sandlot/templates/templatestest"
)

// TestCatalogSnapshot: a snapshot is a template of its tenant's whose
// image is the source's layers plus the captured one, with the source's
// settings; the tenant's count is bounded; a delete takes its record with
// it and GC its layer.
func TestCatalogSnapshot(t *testing.T) {
	ctx := context.Background()
	var st templates.SnapshotStore
	c, imgs := newCatalogWith(t, func(cfg *templates.Config) {
		st = cfg.Store.(templates.SnapshotStore)
		cfg.Snapshots, cfg.MaxSnapshots = st, 1
	})
	archive := templatestest.DockerArchive(t, templatestest.Image(t, "base"), "example.test/app:v1")
	sh := templates.Settings{Kernels: []string{"sh"}, Workdir: "/srv"}
	src, err := c.Import(ctx, "A", archive, templates.Spec{Name: "app", Settings: sh}, nil)
	if err != nil {
		t.Fatal(err)
	}
	capture := func(ctx context.Context, w io.Writer, max int64) error {
		tw := tar.NewWriter(w)
		body := "written in the sandbox"
		if err := tw.WriteHeader(&tar.Header{Name: "srv/note.txt", Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(body))}); err != nil {
			return err
		}
		if _, err := io.WriteString(tw, body); err != nil {
			return err
		}
		return tw.Close()
	}
	tp, sn, err := c.Snapshot(ctx, "A", templates.SnapshotSpec{ContextID: "ctx-1", Template: src.ID, Name: "after"}, capture)
	if err != nil {
		t.Fatal(err)
	}
	if tp.TenantID != "A" || tp.Source != "snapshot" || tp.Settings.Workdir != "/srv" || sn.ID != tp.ID || sn.ContextID != "ctx-1" || sn.Template != src.ID || sn.Bytes == 0 {
		t.Fatalf("snapshot = %+v, %+v", tp, sn)
	}
	img, err := imgs.Get(ctx, tp.Image)
	if err != nil {
		t.Fatal(err)
	}
	base, err := imgs.Get(ctx, src.Image)
	if err != nil {
		t.Fatal(err)
	}
	lowers := img.LowerDirs()
	if len(lowers) != len(base.LowerDirs())+1 {
		t.Fatalf("snapshot layers %d, source %d", len(lowers), len(base.LowerDirs()))
	}
	if b, err := os.ReadFile(filepath.Join(lowers[0], "srv/note.txt")); err != nil || string(b) != "written in the sandbox" {
		t.Errorf("top layer's file = %q, %v", b, err)
	}
	if got, err := c.Resolve(ctx, "A", "after"); err != nil || got.ID != tp.ID {
		t.Errorf("Resolve(after) = %+v, %v", got, err)
	}
	if _, err := c.Resolve(ctx, "B", tp.ID); err == nil {
		t.Error("tenant B resolved A's snapshot")
	}
	_, _, err = c.Snapshot(ctx, "A", templates.SnapshotSpec{ContextID: "ctx-1", Template: src.ID}, capture)
	wantErr(t, "a snapshot past the tenant's bound", err, errdefs.ErrResourceExhausted)
	_, _, err = c.Snapshot(ctx, "B", templates.SnapshotSpec{ContextID: "ctx-2", Template: src.ID, Name: "app"}, capture)
	if err != nil {
		t.Errorf("B's first snapshot: %v", err)
	}
	ts, ss, err := c.Snapshots(ctx, "A", "")
	if err != nil || len(ts) != 1 || len(ss) != 1 || ts[0].ID != tp.ID {
		t.Fatalf("A's snapshots = %v %v, %v", ts, ss, err)
	}
	if err := c.Delete(ctx, "A", tp.ID); err != nil {
		t.Fatal(err)
	}
	if _, ss, _ := c.Snapshots(ctx, "A", ""); len(ss) != 0 {
		t.Errorf("after delete: %v", ss)
	}
	if _, err := c.GC(ctx, nil); err != nil {
		t.Fatal(err)
	}
	top, _ := v1.NewHash(tp.Image)
	if _, err := imgs.Get(ctx, top.String()); err == nil {
		t.Error("the deleted snapshot's image survived GC")
	}
}
