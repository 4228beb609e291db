package backup

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/sandlot/sandlot/internal/testenv"
	"github.com/sandlot/sandlot/store"
)

// fixtureDB is a SQLite database of today's schema: the store's upgrade
// fixture.
func fixtureDB(t *testing.T) []byte {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("../store/sqlite/testdata/schema-%04d.db.gz", store.SchemaVersion()))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// member is one tar entry of a hand-made archive.
type member struct {
	name string
	typ  byte
	link string
	body []byte
	size int64 // the header's size when not len(body) (a lie)
}

// craft writes a gzipped tar: manifest.json naming files, then members.
func craft(t *testing.T, files []File, members ...member) string {
	t.Helper()
	mb, err := json.Marshal(Manifest{Format: Format, Schema: 1, Files: files})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	all := append([]member{{name: ManifestName, body: mb}}, members...)
	for _, m := range all {
		typ := m.typ
		if typ == 0 {
			typ = tar.TypeReg
		}
		size := int64(len(m.body))
		if m.size != 0 {
			size = m.size
		}
		hdr := &tar.Header{Name: m.name, Typeflag: typ, Linkname: m.link, Mode: 0o600}
		if typ == tar.TypeReg {
			hdr.Size = size
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if typ == tar.TypeReg {
			if int64(len(m.body)) < size {
				// A body larger than the manifest says: zeros, which gzip
				// shrinks to nothing (a bomb).
				tw.Write(m.body)
				zeros := make([]byte, 1<<20)
				for left := size - int64(len(m.body)); left > 0; left -= int64(len(zeros)) {
					tw.Write(zeros[:min(left, int64(len(zeros)))])
				}
			} else {
				tw.Write(m.body)
			}
		}
	}
	tw.Close()
	zw.Close()
	path := filepath.Join(t.TempDir(), "evil.tar.gz")
	if err := os.WriteFile(path, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func fileOf(name string, body []byte) File {
	return File{Name: name, Size: int64(len(body)), SHA256: sha256Hex(body)}
}

// TestWallHostileArchive: an archive is input from whoever could write
// the file. No member may land outside the target (.., an absolute path,
// through a symlink or a hard link of its own), be anything but a regular
// file the manifest names, or be larger than the manifest and the limits
// allow; each is refused and the target and its surroundings stay as they
// were.
func TestWallHostileArchive(t *testing.T) {
	testenv.RequireRoot(t) // the oversized case mounts a small tmpfs
	db := fixtureDB(t)
	key := bytes.Repeat([]byte{7}, 32)
	for _, tc := range []struct {
		name    string
		archive func(t *testing.T, outside string) string
		want    string // in the error
	}{
		{"dot-dot", func(t *testing.T, outside string) string {
			return craft(t, []File{fileOf(DatabaseName, db)}, member{name: DatabaseName, body: db},
				member{name: "../../" + filepath.Base(filepath.Dir(outside)) + "/" + filepath.Base(outside), body: []byte("pwned")})
		}, "not in the manifest"},
		{"absolute path", func(t *testing.T, outside string) string {
			return craft(t, []File{fileOf(DatabaseName, db)}, member{name: DatabaseName, body: db}, member{name: outside, body: []byte("pwned")})
		}, "not in the manifest"},
		{"manifest names a path", func(t *testing.T, outside string) string {
			return craft(t, []File{fileOf(DatabaseName, db), fileOf("../x", []byte("pwned"))}, member{name: DatabaseName, body: db},
				member{name: "../x", body: []byte("pwned")})
		}, "no file of a data dir"},
		{"node id with a path", func(t *testing.T, outside string) string {
			return craft(t, []File{fileOf(DatabaseName, db), fileOf("nodes/../../x", []byte("pwned"))}, member{name: DatabaseName, body: db},
				member{name: "nodes/../../x", body: []byte("pwned")})
		}, "no file of a data dir"},
		{"symlinked nodes dir", func(t *testing.T, outside string) string {
			return craft(t, []File{fileOf(DatabaseName, db), fileOf("nodes/0123456789abcdef", []byte("pwned"))}, member{name: DatabaseName, body: db},
				member{name: "nodes", typ: tar.TypeSymlink, link: filepath.Dir(outside)}, member{name: "nodes/0123456789abcdef", body: []byte("pwned")})
		}, "not in the manifest"},
		{"symlink then write through it", func(t *testing.T, outside string) string {
			return craft(t, []File{fileOf(DatabaseName, db), fileOf("guard-hmac-key", key)}, member{name: DatabaseName, body: db},
				member{name: "guard-hmac-key", typ: tar.TypeSymlink, link: outside}, member{name: "guard-hmac-key", body: key})
		}, "not a regular file"},
		{"symlink as a state file", func(t *testing.T, outside string) string {
			return craft(t, []File{fileOf(DatabaseName, db), fileOf("metrics-token", nil)}, member{name: DatabaseName, body: db},
				member{name: "metrics-token", typ: tar.TypeSymlink, link: outside})
		}, "not a regular file"},
		{"hard link to a host file", func(t *testing.T, outside string) string {
			return craft(t, []File{fileOf(DatabaseName, db), fileOf("metrics-token", nil)}, member{name: DatabaseName, body: db},
				member{name: "metrics-token", typ: tar.TypeLink, link: "../../" + filepath.Base(filepath.Dir(outside)) + "/" + filepath.Base(outside)})
		}, "not a regular file"},
		{"member twice", func(t *testing.T, outside string) string {
			return craft(t, []File{fileOf(DatabaseName, db)}, member{name: DatabaseName, body: db}, member{name: DatabaseName, body: db})
		}, "twice"},
		{"larger than the manifest says", func(t *testing.T, outside string) string {
			return craft(t, []File{fileOf(DatabaseName, db)}, member{name: DatabaseName, body: db, size: 64 << 20})
		}, "the manifest says"},
		{"larger than the limit", func(t *testing.T, outside string) string {
			return craft(t, []File{{Name: DatabaseName, Size: 64 << 20, SHA256: strings.Repeat("0", 64)}}, member{name: DatabaseName, size: 64 << 20})
		}, "over the"},
		{"state file larger than a state file may be", func(t *testing.T, outside string) string {
			return craft(t, []File{fileOf(DatabaseName, db), {Name: "secrets-key", Size: 2 << 20, SHA256: strings.Repeat("0", 64)}},
				member{name: DatabaseName, body: db}, member{name: "secrets-key", size: 2 << 20})
		}, "over the"},
		{"checksum", func(t *testing.T, outside string) string {
			return craft(t, []File{fileOf(DatabaseName, db)}, member{name: DatabaseName, body: append(bytes.Clone(db[:len(db)-1]), db[len(db)-1]^1)})
		}, "checksum"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The target is on a 16 MiB file system, so a member that is
			// written past its bounds fails there instead of filling the
			// host's disk.
			base := t.TempDir()
			if err := unix.Mount("restore", base, "tmpfs", 0, "size=16m"); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { unix.Unmount(base, unix.MNT_DETACH) })
			outsideDir := filepath.Join(base, "host")
			os.Mkdir(outsideDir, 0o755)
			outside := filepath.Join(outsideDir, "precious")
			os.WriteFile(outside, []byte("host file"), 0o644)
			target := filepath.Join(base, "data")
			archive := tc.archive(t, outside)

			_, err := Restore(context.Background(), RestoreConfig{From: archive, DataDir: target, MaxBytes: 8 << 20})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Restore = %v, want an error saying %q", err, tc.want)
			}
			if b, _ := os.ReadFile(outside); string(b) != "host file" {
				t.Errorf("the host file now holds %q", b)
			}
			var st syscall.Stat_t
			if err := syscall.Stat(outside, &st); err != nil || st.Nlink != 1 {
				t.Errorf("the host file has %d links (%v)", st.Nlink, err)
			}
			if ents, _ := os.ReadDir(outsideDir); len(ents) != 1 {
				t.Errorf("files appeared beside the host file: %v", ents)
			}
			if ents, _ := os.ReadDir(base); len(ents) != 2 {
				t.Errorf("files appeared beside the target: %v", ents)
			}
			if ents, _ := os.ReadDir(target); len(ents) != 0 {
				t.Errorf("the refused archive left %v in the target", ents)
			}
		})
	}
}
