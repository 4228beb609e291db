package cli

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sandlot/sandlot/errdefs"
)

// TestTemplateBuildMode: --url builds remotely, $SANDLOT_URL too unless a
// local flag is given, --url with a local flag is a usage error.
func TestTemplateBuildMode(t *testing.T) {
	for _, tc := range []struct {
		name       string
		urlGiven   bool
		env        string
		local      []string
		want, fail bool
	}{
		{"nothing", false, "", nil, false, false},
		{"--url", true, "", nil, true, false},
		{"env", false, "http://x:1", nil, true, false},
		{"env and --tenant", false, "http://x:1", []string{"--tenant"}, false, false},
		{"--url and --images-dir", true, "", []string{"--images-dir"}, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(envURL, tc.env)
			got, err := remoteBuild(tc.urlGiven, tc.local)
			if (err != nil) != tc.fail || got != tc.want {
				t.Fatalf("remote %v, err %v; want %v, fail %v", got, err, tc.want, tc.fail)
			}
			if err != nil && !errors.Is(err, errdefs.ErrInvalidArgument) {
				t.Errorf("error %v, want invalid_argument", err)
			}
		})
	}
	// A remote build of an E2B template JSON is refused before anything
	// is sent.
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "t.json"), []byte(`{"fromImage":"x","steps":[]}`), 0o644)
	var out, errb bytes.Buffer
	err := Run(context.Background(), []string{"template", "build", "--url", "http://127.0.0.1:1", "-t", "x", "-f", filepath.Join(dir, "t.json"), dir}, nil, &out, &errb)
	if !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("E2B JSON through --url: %v", err)
	}
}

// TestWriteContext: the uploaded context holds directories, files and
// symlinks as links, no sockets, owners dropped, and a Dockerfile from
// outside the directory under its own name.
func TestWriteContext(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "app"), 0o755)
	os.WriteFile(filepath.Join(dir, "app", "main.py"), []byte("print(1)\n"), 0o644)
	os.Symlink("/etc/passwd", filepath.Join(dir, "link"))
	if l, err := net.Listen("unix", filepath.Join(dir, "sock")); err == nil {
		defer l.Close()
	}
	got := contextEntries(t, dir, remoteDockerfile, []byte("FROM x\n"))
	want := []string{remoteDockerfile + " FROM x", "app/ ", "app/main.py print(1)", "link /etc/passwd"}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("context entries (-want +got):\n%s", d)
	}
}

// TestWriteContextDockerIgnore: what .dockerignore names stays home, but
// for the Dockerfile and the .dockerignore (even when named); an ignored
// directory goes up empty only when a `!` pattern may take back a path in
// it, and that path goes up.
func TestWriteContextDockerIgnore(t *testing.T) {
	dir := t.TempDir()
	for name, body := range map[string]string{
		".dockerignore":    "*.log\nnode_modules\nbuild.Dockerfile\n.dockerignore\nsecrets\n!secrets/public.pem\n",
		"build.Dockerfile": "FROM x", "app.py": "1", "debug.log": "log",
		"node_modules/big/index.js": "x", "secrets/key": "k", "secrets/public.pem": "p",
	} {
		os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755)
		os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644)
	}
	got := contextEntries(t, dir, "build.Dockerfile", nil)
	want := []string{".dockerignore *.log\nnode_modules\nbuild.Dockerfile\n.dockerignore\nsecrets\n!secrets/public.pem",
		"app.py 1", "build.Dockerfile FROM x", "secrets/ ", "secrets/public.pem p"}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("context entries (-want +got):\n%s", d)
	}
	// A bad pattern fails the upload before anything goes.
	os.WriteFile(filepath.Join(dir, ".dockerignore"), []byte("[\n"), 0o644)
	if err := writeContext(io.Discard, dir, "build.Dockerfile", nil); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("a bad .dockerignore: %v", err)
	}
}

// contextEntries runs writeContext on dir and returns its entries, sorted,
// as "name linkname+body".
func contextEntries(t *testing.T, dir, dockerfile string, extra []byte) []string {
	t.Helper()
	var buf bytes.Buffer
	if err := writeContext(&buf, dir, dockerfile, extra); err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(&buf)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	var got []string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Uid != 0 || h.Gid != 0 {
			t.Errorf("%s owned by %d:%d", h.Name, h.Uid, h.Gid)
		}
		body, _ := io.ReadAll(tr)
		got = append(got, h.Name+" "+h.Linkname+strings.TrimSpace(string(body)))
	}
	sort.Strings(got)
	return got
}
