package oci

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/sandlot/sandlot/errdefs"
)

// TestCopyLayerSwap: an entry swapped between the copy's stat of it and
// its open (a sandbox still running, or anything else writing the tree)
// is refused: the copy never takes one file's data under another's owner
// and mode, never reads a FIFO, a directory as a file or a symlink's
// target, and never walks a directory other than the one it stat'ed.
func TestCopyLayerSwap(t *testing.T) {
	outside := t.TempDir()
	secret := []byte("host secret\n")
	if err := os.WriteFile(filepath.Join(outside, "secret"), secret, 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		victim string // swapped once the copy has stat'ed it
		swap   func(src, spare, victim string) error
		typed  bool // refused as invalid_argument (else the kernel refuses the open)
	}{
		{"file for another file", "f", func(src, spare, victim string) error {
			return os.Rename(filepath.Join(spare, "file"), victim)
		}, true},
		{"file for a FIFO", "f", func(src, spare, victim string) error {
			return errors.Join(os.Remove(victim), unix.Mkfifo(victim, 0o644))
		}, true},
		{"file for a directory", "f", func(src, spare, victim string) error {
			return errors.Join(os.Remove(victim), os.Rename(filepath.Join(spare, "dir"), victim))
		}, true},
		{"file for a symlink out", "f", func(src, spare, victim string) error {
			return errors.Join(os.Remove(victim), os.Symlink(filepath.Join(outside, "secret"), victim))
		}, false},
		{"directory for another directory", "d", func(src, spare, victim string) error {
			return errors.Join(os.Rename(victim, filepath.Join(spare, "old")), os.Rename(filepath.Join(spare, "dir"), victim))
		}, true},
		{"directory for a file", "d", func(src, spare, victim string) error {
			return errors.Join(os.Rename(victim, filepath.Join(spare, "old")), os.Rename(filepath.Join(spare, "file"), victim))
		}, false},
		{"directory for a symlink out", "d", func(src, spare, victim string) error {
			return errors.Join(os.Rename(victim, filepath.Join(spare, "old")), os.Symlink(outside, victim))
		}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs := layerTmpfs(t)
			src, spare := filepath.Join(fs, "upper"), filepath.Join(fs, "spare")
			for _, d := range []string{src, spare, filepath.Join(src, "d"), filepath.Join(spare, "dir")} {
				if err := os.Mkdir(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			for p, data := range map[string]string{
				filepath.Join(src, "f"):            "layer data",
				filepath.Join(src, "d", "inner"):   "inner",
				filepath.Join(spare, "file"):       "swapped in",
				filepath.Join(spare, "dir", "not"): "swapped in",
			} {
				if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			swapped := false
			layerEntryStat = func(name string) {
				if name == tt.victim && !swapped {
					swapped = true
					if err := tt.swap(src, spare, filepath.Join(src, name)); err != nil {
						t.Error(err)
					}
				}
			}
			defer func() { layerEntryStat = nil }()
			dst := filepath.Join(t.TempDir(), "layer")
			err := copyLayer(src, dst, defaultLayerLimits)
			if !swapped {
				t.Fatal("the hook never ran")
			}
			if err == nil {
				t.Fatal("a copy with an entry swapped under it was not refused")
			}
			if tt.typed && !errors.Is(err, errdefs.ErrInvalidArgument) {
				t.Errorf("refused with %v, want invalid_argument", err)
			}
			_ = filepath.WalkDir(dst, func(p string, d os.DirEntry, err error) error {
				if err != nil || !d.Type().IsRegular() {
					return nil
				}
				if b, _ := os.ReadFile(p); bytes.Contains(b, secret) || bytes.Contains(b, []byte("swapped in")) {
					t.Errorf("%s in the copy holds %q, not the layer's", p, b)
				}
				return nil
			})
		})
	}
}
