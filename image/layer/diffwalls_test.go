package layer

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/internal/testenv"
)

// tarNames reads a layer tarball's entries: name -> body (regular files)
// or link target.
func tarNames(t *testing.T, b []byte) map[string]string {
	t.Helper()
	out := map[string]string{}
	tr := tar.NewReader(bytes.NewReader(b))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(tr)
		out[h.Name] = string(body) + h.Linkname
	}
}

// TestDiffHostileUpper captures upper dirs a sandbox wrote as it liked,
// one trick each: nothing of the host outside the dir may reach the tar.
func TestDiffHostileUpper(t *testing.T) {
	testenv.RequireRoot(t)
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "f"), []byte("HOST SECRET"), 0o600); err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		name  string
		setup func(t *testing.T, up string)
		// swap runs once the directory rel is listed (a writer still
		// running between Diff's look and its read).
		swap    func(t *testing.T, up, rel string)
		limits  Limits
		wantErr error
	}{
		{name: "symlinks stay links", setup: func(t *testing.T, up string) {
			must(os.Symlink(filepath.Join(outside, "f"), filepath.Join(up, "abs")))
			must(os.Symlink("../../../../../../"+outside, filepath.Join(up, "rel")))
		}},
		{name: "a directory swapped for a symlink after its listing", setup: func(t *testing.T, up string) {
			must(os.Mkdir(filepath.Join(up, "a"), 0o755))
			must(os.WriteFile(filepath.Join(up, "a", "f"), []byte("mine"), 0o644))
		}, swap: func(t *testing.T, up, rel string) {
			if rel != "a" {
				return
			}
			must(os.Rename(filepath.Join(up, "a"), filepath.Join(up, "a.old")))
			must(os.Symlink(outside, filepath.Join(up, "a")))
		}},
		{name: "a directory swapped before its listing", setup: func(t *testing.T, up string) {
			must(os.Mkdir(filepath.Join(up, "a"), 0o755))
			must(os.WriteFile(filepath.Join(up, "a", "f"), []byte("mine"), 0o644))
		}, swap: func(t *testing.T, up, rel string) {
			if rel != "" {
				return
			}
			must(os.Rename(filepath.Join(up, "a"), filepath.Join(up, "a.old")))
			must(os.Symlink(outside, filepath.Join(up, "a")))
		}},
		{name: "devices are dropped", setup: func(t *testing.T, up string) {
			must(mknod(filepath.Join(up, "sda"), 0o060000|0o600, 8, 0))
			must(mknod(filepath.Join(up, "mem"), 0o020000|0o600, 1, 1))
		}},
		{name: "a huge sparse file", setup: func(t *testing.T, up string) {
			f, err := os.Create(filepath.Join(up, "sparse"))
			must(err)
			must(f.Truncate(1 << 40))
			must(f.Close())
		}, limits: Limits{MaxBytes: 64 << 20}, wantErr: errdefs.ErrResourceExhausted},
		{name: "hardlinks stay inside", setup: func(t *testing.T, up string) {
			must(os.WriteFile(filepath.Join(up, "x"), []byte("x"), 0o644))
			must(os.Link(filepath.Join(up, "x"), filepath.Join(up, "y")))
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			up := t.TempDir()
			tc.setup(t, up)
			if tc.swap != nil {
				testHookListed = func(rel string) { tc.swap(t, up, rel) }
				t.Cleanup(func() { testHookListed = nil })
			}
			var buf bytes.Buffer
			_, err := Diff(context.Background(), up, &buf, DiffOptions{Limits: tc.limits})
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("Diff = %v, want %v", err, tc.wantErr)
				}
				return
			}
			if err != nil && tc.swap == nil {
				t.Fatal(err)
			}
			// A swap may fail the capture; what it may never do is put
			// the host's bytes in it.
			if strings.Contains(buf.String(), "HOST SECRET") {
				t.Fatalf("the tar holds a file from outside the upper dir: %v", tarNames(t, buf.Bytes()))
			}
			for name := range tarNames(t, buf.Bytes()) {
				if name == "sda" || name == "mem" {
					t.Errorf("device %s captured", name)
				}
			}
		})
	}
}

func mknod(path string, mode uint32, major, minor uint32) error {
	return unix.Mknod(path, mode, int(unix.Mkdev(major, minor)))
}
