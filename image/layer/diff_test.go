package layer

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"

	"github.com/sandlot/sandlot/internal/testenv"
)

// mountOverlay mounts lowers (top first) with an optional upper at a new
// directory and returns it; the mount goes away with the test.
func mountOverlay(t *testing.T, lowers []string, upper string) string {
	t.Helper()
	merged := t.TempDir()
	opts := "lowerdir=" + strings.Join(lowers, ":")
	if upper != "" {
		opts += ",upperdir=" + upper + ",workdir=" + t.TempDir()
	}
	opts += ",redirect_dir=off,metacopy=off,index=off"
	if err := unix.Mount("overlay", merged, "overlay", 0, opts); err != nil {
		t.Fatalf("mount overlay %s: %v", opts, err)
	}
	t.Cleanup(func() { _ = unix.Unmount(merged, unix.MNT_DETACH) })
	return merged
}

// TestOverlayStacksLayers checks that Apply's whiteouts and opaque
// directories mean to overlayfs what they meant in the tarball.
func TestOverlayStacksLayers(t *testing.T) {
	testenv.RequireRoot(t)
	l1, l2 := t.TempDir(), t.TempDir()
	if _, err := apply(t, l1, Limits{},
		ent{name: "etc/motd", body: "hello"},
		ent{name: "etc/hostname", body: "h"},
		ent{name: "opt/old/a", body: "a"},
		ent{name: "opt/b", body: "b"},
	); err != nil {
		t.Fatal(err)
	}
	if _, err := apply(t, l2, Limits{},
		ent{name: "etc/.wh.motd"},
		ent{name: "opt/.wh..wh..opq"},
		ent{name: "opt/new", body: "n"},
	); err != nil {
		t.Fatal(err)
	}
	merged := mountOverlay(t, []string{l2, l1}, "")
	got := tree(t, merged)
	want := map[string]string{
		"etc": "dir 0755 0:0", "etc/hostname": `file 0644 0:0 "h"`,
		"opt": "dir 0755 0:0 [user.overlay.opaque=y]", "opt/new": `file 0644 0:0 "n"`, // visible in trusted mode
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("merged (-want +got):\n%s", diff)
	}
}

// TestDiffRoundTrip changes a mounted overlay, turns its upper dir into a
// layer with Diff, applies that layer and checks that the new stack shows
// exactly what the changed mount showed.
func TestDiffRoundTrip(t *testing.T) {
	testenv.RequireRoot(t)
	base := t.TempDir()
	if _, err := apply(t, base, Limits{},
		ent{name: "etc/motd", body: "hello"},
		ent{name: "etc/keep", body: "k"},
		ent{name: "opt/old/a", body: "a"},
		ent{name: "var/x", body: "x"},
	); err != nil {
		t.Fatal(err)
	}
	upper := t.TempDir()
	m := mountOverlay(t, []string{base}, upper)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.Remove(filepath.Join(m, "etc/motd")))
	must(os.RemoveAll(filepath.Join(m, "opt")))
	must(os.MkdirAll(filepath.Join(m, "opt/new"), 0o750)) // overlayfs makes opt opaque
	must(os.WriteFile(filepath.Join(m, "opt/new/f"), []byte("f"), 0o640))
	must(os.Link(filepath.Join(m, "opt/new/f"), filepath.Join(m, "opt/new/g")))
	must(os.Symlink("/etc/keep", filepath.Join(m, "ln")))
	must(os.WriteFile(filepath.Join(m, "var/x"), []byte("changed"), 0o644))
	must(os.Chown(filepath.Join(m, "var/x"), 1000, 1000))
	must(unix.Setxattr(filepath.Join(m, "var/x"), "user.tag", []byte("t"), 0))
	must(unix.Mknod(filepath.Join(m, "var/null"), unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))))
	want := tree(t, m)
	delete(want, "var/null") // devices are not carried
	// The layer marks opaque dirs in both xattr namespaces; a mount in
	// trusted mode shows the user.* one as an ordinary xattr.
	want["opt"] += " [" + xattrUserOpaque + "=y]"
	must(unix.Unmount(m, 0))

	var buf bytes.Buffer
	epoch := time.Unix(1700000000, 0)
	st, err := Diff(context.Background(), upper, &buf, DiffOptions{Epoch: epoch})
	must(err)
	if st.Whiteouts != 1 || st.Opaques != 1 || st.SkippedDevices != 1 {
		t.Errorf("diff stats = %+v", st)
	}
	again := new(bytes.Buffer)
	_, err = Diff(context.Background(), upper, again, DiffOptions{Epoch: epoch})
	must(err)
	if !bytes.Equal(buf.Bytes(), again.Bytes()) {
		t.Error("two diffs of the same tree differ")
	}

	l2 := t.TempDir()
	_, err = Apply(context.Background(), l2, &buf, Limits{})
	must(err)
	got := tree(t, mountOverlay(t, []string{l2, base}, ""))
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("stack after round trip (-want +got):\n%s", diff)
	}
	b := make([]byte, 8)
	n, err := unix.Lgetxattr(filepath.Join(l2, "var/x"), "user.tag", b)
	if err != nil || string(b[:n]) != "t" {
		t.Errorf("user.tag = %q, %v", b[:n], err)
	}
}

func TestDiffMapsIDs(t *testing.T) {
	testenv.RequireRoot(t)
	dir := t.TempDir()
	for name, id := range map[string]int{"in": 101000, "root": 100000, "out": 5} {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(p, id, id); err != nil {
			t.Fatal(err)
		}
	}
	var buf bytes.Buffer
	if _, err := Diff(context.Background(), dir, &buf, DiffOptions{HostIDBase: 100000}); err != nil {
		t.Fatal(err)
	}
	l := t.TempDir()
	if _, err := Apply(context.Background(), l, &buf, Limits{}); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"in": `file 0644 1000:1000 ""`, "root": `file 0644 0:0 ""`, "out": `file 0644 65534:65534 ""`}
	if diff := cmp.Diff(want, tree(t, l)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}
