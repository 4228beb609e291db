package layer

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"

	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/internal/testenv"
)

// ent is one hand-written tar entry.
type ent struct {
	name, link, body string
	typ              byte
	mode             int64
	uid, gid         int
	size             int64 // 0: len(body)
	dev              int64 // devmajor
	xattrs           map[string]string
}

func tarOf(t testing.TB, ents ...ent) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range ents {
		h := &tar.Header{Name: e.name, Linkname: e.link, Typeflag: e.typ, Mode: e.mode, Uid: e.uid, Gid: e.gid,
			ModTime: time.Unix(1700000000, 0), Devmajor: e.dev, Format: tar.FormatPAX}
		if h.Typeflag == 0 {
			h.Typeflag = tar.TypeReg
		}
		if h.Mode == 0 {
			h.Mode = 0o644
		}
		if h.Typeflag == tar.TypeReg {
			h.Size = int64(len(e.body))
		}
		for k, v := range e.xattrs {
			if h.PAXRecords == nil {
				h.PAXRecords = map[string]string{}
			}
			h.PAXRecords["SCHILY.xattr."+k] = v
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			if _, err := tw.Write([]byte(e.body)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func apply(t testing.TB, dir string, lim Limits, ents ...ent) (Stats, error) {
	t.Helper()
	return Apply(context.Background(), dir, bytes.NewReader(tarOf(t, ents...)), lim)
}

// tree describes every object under dir: type, mode, owner and target or
// content, so a test sees everything Apply made.
func tree(t testing.TB, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if rel == "." {
			return nil
		}
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			return err
		}
		own := fmt.Sprintf("%d:%d", st.Uid, st.Gid)
		perm := fmt.Sprintf("%04o", st.Mode&0o7777)
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFDIR:
			out[rel] = "dir " + perm + " " + own + opaqueTag(p)
		case unix.S_IFREG:
			b, _ := os.ReadFile(p)
			out[rel] = fmt.Sprintf("file %s %s %q", perm, own, b)
		case unix.S_IFLNK:
			l, _ := os.Readlink(p)
			out[rel] = "link " + own + " -> " + l
		case unix.S_IFCHR:
			out[rel] = fmt.Sprintf("char %d:%d", unix.Major(st.Rdev), unix.Minor(st.Rdev))
		case unix.S_IFIFO:
			out[rel] = "fifo " + perm + " " + own
		default:
			out[rel] = "other"
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func opaqueTag(p string) string {
	var tags []string
	for _, n := range []string{xattrOpaque, xattrUserOpaque} {
		b := make([]byte, 4)
		if k, err := unix.Lgetxattr(p, n, b); err == nil {
			tags = append(tags, n+"="+string(b[:k]))
		}
	}
	if len(tags) == 0 {
		return ""
	}
	return " [" + strings.Join(tags, ",") + "]"
}

// outside makes a directory beside the layer holding a file that no layer
// may read, replace or link: the attacks aim at it.
func outside(t *testing.T) (dir, file string) {
	t.Helper()
	dir = t.TempDir()
	file = filepath.Join(dir, "secret")
	if err := os.WriteFile(file, []byte("host"), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir, file
}

func checkOutside(t *testing.T, dir string) {
	t.Helper()
	got := tree(t, dir)
	want := map[string]string{"secret": `file 0600 0:0 "host"`}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("outside the layer changed (-want +got):\n%s", diff)
	}
	var st unix.Stat_t
	if err := unix.Lstat(filepath.Join(dir, "secret"), &st); err == nil && st.Nlink != 1 {
		t.Errorf("outside file has %d links: a layer hardlinked it", st.Nlink)
	}
}

func TestApplyAttacks(t *testing.T) {
	testenv.RequireRoot(t)
	out, secret := outside(t)
	rel := func(layer string) string { // a relative path from inside the layer to out
		r, err := filepath.Rel(layer, out)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	tests := []struct {
		name    string
		ents    func(layer string) []ent
		wantErr error                          // category, nil: no error
		want    func(string) map[string]string // tree of the layer, nil: not checked
	}{
		{
			name:    "dotdot path",
			ents:    func(l string) []ent { return []ent{{name: "../" + rel(l) + "/pwned", body: "x"}} },
			wantErr: errdefs.ErrInvalidArgument,
		},
		{
			name:    "dotdot inside path",
			ents:    func(l string) []ent { return []ent{{name: "a/../../" + rel(l) + "/pwned", body: "x"}} },
			wantErr: errdefs.ErrInvalidArgument,
		},
		{
			name: "absolute path lands inside",
			ents: func(string) []ent { return []ent{{name: out + "/pwned", body: "x"}} },
			want: func(string) map[string]string {
				m := dirsOf(out, "dir 0755 0:0")
				m[strings.TrimPrefix(out, "/")+"/pwned"] = `file 0644 0:0 "x"`
				return m
			},
		},
		{
			name: "write through dangling absolute symlink dir",
			ents: func(string) []ent {
				return []ent{{name: "evil", typ: tar.TypeSymlink, link: out}, {name: "evil/pwned", body: "x"}}
			},
			wantErr: errdefs.ErrInvalidArgument,
		},
		{
			name: "write through dangling relative symlink climbing out",
			ents: func(l string) []ent {
				return []ent{{name: "evil", typ: tar.TypeSymlink, link: "../../../../../../../.." + out}, {name: "evil/pwned", body: "x"}}
			},
			wantErr: errdefs.ErrInvalidArgument,
		},
		{
			name: "write through symlink to root stays in the layer",
			ents: func(string) []ent {
				return []ent{{name: "evil", typ: tar.TypeSymlink, link: "/"}, {name: "evil/pwned", body: "x"}}
			},
			want: func(string) map[string]string {
				return map[string]string{"evil": "link 0:0 -> /", "pwned": `file 0644 0:0 "x"`}
			},
		},
		{
			name: "write through symlink climbing out stays in the layer",
			ents: func(l string) []ent {
				return []ent{
					{name: "a/b/", typ: tar.TypeDir, mode: 0o755},
					{name: "a/b/up", typ: tar.TypeSymlink, link: "../../../../../../../../../../../" + rel(l)},
					{name: "a/b/up/pwned", body: "x"},
				}
			},
			wantErr: errdefs.ErrInvalidArgument, // resolves to <layer>/<rel>, which does not exist
		},
		{
			name: "write through symlink climbing out to an existing dir stays in the layer",
			ents: func(l string) []ent {
				return []ent{
					{name: "tmp/", typ: tar.TypeDir, mode: 0o755},
					{name: "a/up", typ: tar.TypeSymlink, link: "../../../../../../../../../../../tmp"},
					{name: "a/up/pwned", body: "x"},
				}
			},
			want: func(string) map[string]string {
				return map[string]string{
					"tmp": "dir 0755 0:0", "a": "dir 0755 0:0", "tmp/pwned": `file 0644 0:0 "x"`,
					"a/up": "link 0:0 -> ../../../../../../../../../../../tmp",
				}
			},
		},
		{
			name: "overwrite a symlink to an outside file",
			ents: func(string) []ent {
				return []ent{{name: "s", typ: tar.TypeSymlink, link: secret}, {name: "s", body: "pwned"}}
			},
			want: func(string) map[string]string { return map[string]string{"s": `file 0644 0:0 "pwned"`} },
		},
		{
			name: "directory entry over a symlink",
			ents: func(string) []ent {
				return []ent{{name: "d", typ: tar.TypeSymlink, link: out}, {name: "d/", typ: tar.TypeDir, mode: 0o755}, {name: "d/f", body: "x"}}
			},
			want: func(string) map[string]string {
				return map[string]string{"d": "dir 0755 0:0", "d/f": `file 0644 0:0 "x"`}
			},
		},
		{
			name:    "hardlink with dotdot",
			ents:    func(l string) []ent { return []ent{{name: "h", typ: tar.TypeLink, link: "../" + rel(l) + "/secret"}} },
			wantErr: errdefs.ErrInvalidArgument,
		},
		{
			name:    "hardlink to absolute host path",
			ents:    func(string) []ent { return []ent{{name: "h", typ: tar.TypeLink, link: secret}} },
			wantErr: errdefs.ErrInvalidArgument,
		},
		{
			name: "hardlink through symlink dir",
			ents: func(string) []ent {
				return []ent{{name: "d", typ: tar.TypeSymlink, link: out}, {name: "h", typ: tar.TypeLink, link: "d/secret"}}
			},
			wantErr: errdefs.ErrInvalidArgument,
		},
		{
			name: "hardlink to a symlink links the symlink",
			ents: func(string) []ent {
				return []ent{{name: "s", typ: tar.TypeSymlink, link: secret}, {name: "h", typ: tar.TypeLink, link: "s"}}
			},
			want: func(string) map[string]string {
				return map[string]string{"s": "link 0:0 -> " + secret, "h": "link 0:0 -> " + secret}
			},
		},
		{
			name: "device nodes are skipped",
			ents: func(string) []ent {
				return []ent{
					{name: "null", typ: tar.TypeChar, dev: 1, mode: 0o666},
					{name: "sda", typ: tar.TypeBlock, dev: 8, mode: 0o660},
					{name: "fake-whiteout", typ: tar.TypeChar, mode: 0o600},
					{name: "fifo", typ: tar.TypeFifo, mode: 0o644},
				}
			},
			want: func(string) map[string]string { return map[string]string{"fifo": "fifo 0644 0:0"} },
		},
		{
			name:    "file larger than the limit",
			ents:    func(string) []ent { return []ent{{name: "big", body: strings.Repeat("x", 2048)}} },
			wantErr: errdefs.ErrResourceExhausted,
		},
		{
			name: "files adding up past the limit",
			ents: func(string) []ent {
				return []ent{{name: "a", body: strings.Repeat("x", 600)}, {name: "b", body: strings.Repeat("x", 600)}}
			},
			wantErr: errdefs.ErrResourceExhausted,
		},
		{
			name: "too many entries",
			ents: func(string) []ent {
				var e []ent
				for i := range 20 {
					e = append(e, ent{name: fmt.Sprintf("f%d", i)})
				}
				return e
			},
			wantErr: errdefs.ErrResourceExhausted,
		},
		{
			name: "setuid and setgid bits stripped, setgid dir and sticky kept",
			ents: func(string) []ent {
				return []ent{
					{name: "su", mode: 0o4755, body: "x"},
					{name: "sg", mode: 0o2755, body: "x"},
					{name: "gd/", typ: tar.TypeDir, mode: 0o2775},
					{name: "tmp/", typ: tar.TypeDir, mode: 0o1777},
				}
			},
			want: func(string) map[string]string {
				return map[string]string{
					"su": `file 0755 0:0 "x"`, "sg": `file 0755 0:0 "x"`,
					"gd": "dir 2775 0:0", "tmp": "dir 1777 0:0",
				}
			},
		},
		{
			name: "ids kept up to 65535, larger clamped to nobody",
			ents: func(string) []ent {
				return []ent{
					{name: "u", uid: 1000, gid: 1000, body: "x"},
					{name: "max", uid: 65535, gid: 65535, body: "x"},
					{name: "big", uid: 100000, gid: 4294967294, body: "x"},
				}
			},
			want: func(string) map[string]string {
				return map[string]string{
					"u": `file 0644 1000:1000 "x"`, "max": `file 0644 65535:65535 "x"`, "big": `file 0644 65534:65534 "x"`,
				}
			},
		},
		{
			name: "overlay and security xattrs dropped",
			ents: func(string) []ent {
				return []ent{
					{name: "d/", typ: tar.TypeDir, mode: 0o755, xattrs: map[string]string{xattrOpaque: "y", xattrUserOpaque: "y"}},
					{name: "f", body: "x", xattrs: map[string]string{
						"security.capability": "\x01\x00\x00\x02", "trusted.overlay.redirect": "/etc",
						"user.overlay.metacopy": "", "user.keep": "v",
					}},
				}
			},
			want: func(string) map[string]string {
				return map[string]string{"d": "dir 0755 0:0", "f": `file 0644 0:0 "x"`}
			},
		},
		{
			name:    "whiteout of dotdot",
			ents:    func(string) []ent { return []ent{{name: "a/.wh...", body: ""}} },
			wantErr: errdefs.ErrInvalidArgument,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			layer := t.TempDir()
			_, err := apply(t, layer, Limits{MaxBytes: 1024, MaxEntries: 10}, tt.ents(layer)...)
			checkOutside(t, out)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("err = %v, want %v", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tt.want != nil {
				if diff := cmp.Diff(tt.want(layer), tree(t, layer)); diff != "" {
					t.Errorf("layer (-want +got):\n%s", diff)
				}
			}
		})
	}
}

// dirsOf lists the directories of abs (an absolute path) as a layer holds
// them when an entry's parents are created implicitly.
func dirsOf(abs, desc string) map[string]string {
	m := map[string]string{}
	p := ""
	for _, c := range strings.Split(strings.TrimPrefix(abs, "/"), "/") {
		p = filepath.Join(p, c)
		m[p] = desc
	}
	return m
}

func TestApplyKeepsUserXattrs(t *testing.T) {
	testenv.RequireRoot(t)
	layer := t.TempDir()
	if _, err := apply(t, layer, Limits{}, ent{name: "f", body: "x", xattrs: map[string]string{"user.mime": "text/plain"}}); err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 64)
	n, err := unix.Lgetxattr(filepath.Join(layer, "f"), "user.mime", b)
	if err != nil || string(b[:n]) != "text/plain" {
		t.Fatalf("user.mime = %q, %v", b[:n], err)
	}
}

func TestApplyWhiteouts(t *testing.T) {
	testenv.RequireRoot(t)
	layer := t.TempDir()
	st, err := apply(t, layer, Limits{},
		ent{name: "etc/.wh.motd"},
		ent{name: "opt/.wh..wh..opq"},
		ent{name: "opt/new", body: "n"},
		ent{name: "keep", body: "k"},
		ent{name: ".wh.keep"},         // same layer: the file stays
		ent{name: ".wh.later"},        // replaced by the file below
		ent{name: "later", body: "l"}, //
		ent{name: "x/.wh..wh.plnk"},   // AUFS metadata: ignored
	)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"etc":      "dir 0755 0:0",
		"etc/motd": "char 0:0",
		"opt":      "dir 0755 0:0 [" + xattrOpaque + "=y," + xattrUserOpaque + "=y]",
		"opt/new":  `file 0644 0:0 "n"`,
		"keep":     `file 0644 0:0 "k"`,
		"later":    `file 0644 0:0 "l"`,
		"x":        "dir 0755 0:0",
	}
	if diff := cmp.Diff(want, tree(t, layer)); diff != "" {
		t.Errorf("layer (-want +got):\n%s", diff)
	}
	if st.Whiteouts != 2 || st.Opaques != 1 {
		t.Errorf("stats = %+v", st)
	}
}

func TestApplyOrdinary(t *testing.T) {
	testenv.RequireRoot(t)
	layer := t.TempDir()
	_, err := apply(t, layer, Limits{},
		ent{name: "./", typ: tar.TypeDir, mode: 0o755},
		ent{name: "usr/", typ: tar.TypeDir, mode: 0o755},
		ent{name: "usr/lib/", typ: tar.TypeDir, mode: 0o755},
		ent{name: "lib", typ: tar.TypeSymlink, link: "usr/lib"},
		ent{name: "lib/libx.so", body: "elf"}, // through an in-layer symlink
		ent{name: "usr/bin/tool", mode: 0o755, body: "bin"},
		ent{name: "usr/bin/alias", typ: tar.TypeLink, link: "usr/bin/tool"},
		ent{name: "home/user/", typ: tar.TypeDir, mode: 0o700, uid: 1000, gid: 1000},
		ent{name: "d/", typ: tar.TypeDir, mode: 0o755},
		ent{name: "d/x", body: "x"},
		ent{name: "d", body: "now a file"}, // replaces the directory
	)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"usr": "dir 0755 0:0", "usr/lib": "dir 0755 0:0", "lib": "link 0:0 -> usr/lib",
		"usr/lib/libx.so": `file 0644 0:0 "elf"`,
		"usr/bin":         "dir 0755 0:0", "usr/bin/tool": `file 0755 0:0 "bin"`, "usr/bin/alias": `file 0755 0:0 "bin"`,
		"home": "dir 0755 0:0", "home/user": "dir 0700 1000:1000",
		"d": `file 0644 0:0 "now a file"`,
	}
	if diff := cmp.Diff(want, tree(t, layer)); diff != "" {
		t.Errorf("layer (-want +got):\n%s", diff)
	}
	var a, b unix.Stat_t
	_ = unix.Lstat(filepath.Join(layer, "usr/bin/tool"), &a)
	_ = unix.Lstat(filepath.Join(layer, "usr/bin/alias"), &b)
	if a.Ino != b.Ino {
		t.Error("hardlink is a copy")
	}
	fi, err := os.Stat(filepath.Join(layer, "home/user"))
	if err != nil || !fi.ModTime().Equal(time.Unix(1700000000, 0)) {
		t.Errorf("dir mtime = %v, %v", fi.ModTime(), err)
	}
}

func TestApplyCorruptTar(t *testing.T) {
	layer := t.TempDir()
	b := tarOf(t, ent{name: "f", body: strings.Repeat("x", 4096)})
	for _, n := range []int{100, 700, 2000} {
		_, err := Apply(context.Background(), layer, bytes.NewReader(b[:n]), Limits{})
		if !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("cut at %d: err = %v, want invalid argument", n, err)
		}
	}
}

// TestApplyCheck: Limits.Check sees every entry before it is written, and
// its error stops Apply with nothing of that entry or later ones written.
func TestApplyCheck(t *testing.T) {
	dir := t.TempDir()
	refused := errors.New("refused")
	var seen []string
	check := func(h *tar.Header) error {
		seen = append(seen, h.Name)
		if h.Name == "b" {
			return refused
		}
		return nil
	}
	_, err := Apply(context.Background(), dir, bytes.NewReader(tarOf(t, ent{name: "a", body: "a"}, ent{name: "b", body: "b"}, ent{name: "c", body: "c"})), Limits{Check: check})
	if !errors.Is(err, refused) {
		t.Fatalf("err = %v, want the check's", err)
	}
	if strings.Join(seen, ",") != "a,b" {
		t.Errorf("checked %v, want a,b", seen)
	}
	for name, want := range map[string]bool{"a": true, "b": false, "c": false} {
		if _, err := os.Lstat(filepath.Join(dir, name)); (err == nil) != want {
			t.Errorf("%s written: %v, want %v", name, err == nil, want)
		}
	}
}
