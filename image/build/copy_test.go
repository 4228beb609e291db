package build

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandlot/sandlot/image/recipe"
)

// TestCopyDirectoryContents: COPY of a directory copies its contents, not
// the directory: a dest the image lacks is 0755 of the --chown owner
// whatever the source directory's mode (an uploaded context's root is
// 0700, which made `COPY . /opt/app/` a directory the user could not
// read), a directory inside keeps its own mode, and a dest the image has
// keeps its metadata.
func TestCopyDirectoryContents(t *testing.T) {
	b, _ := newBuilder(t)
	ctxDir := writeContext(t, map[string]string{"a.txt": "a", "sub/f": "f"})
	if err := os.Chmod(ctxDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(ctxDir, "sub"), 0o750); err != nil {
		t.Fatal(err)
	}
	rec, err := recipe.ParseDockerfile(strings.NewReader(`FROM base
COPY . /opt/app/
COPY --chown=user:staff sub /opt/sub2
COPY a.txt sub /multi/
COPY sub /home/user
`), nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := b.Build(context.Background(), rec, Options{ContextDir: ctxDir})
	if err != nil {
		t.Fatal(err)
	}
	m := mounted(t, res.Image)
	want := map[string]string{
		"opt/app":       "dir 0:0 0755",
		"opt/app/a.txt": `file 0:0 0644 "a"`,
		"opt/app/sub":   "dir 0:0 0750",
		"opt/sub2":      "dir 1000:50 0755",
		"opt/sub2/f":    `file 1000:50 0644 "f"`,
		"multi/a.txt":   `file 0:0 0644 "a"`,
		"multi/f":       `file 0:0 0644 "f"`,
		"multi/sub":     "missing",
		"home/user":     "dir 1000:1000 0700",
		"home/user/f":   `file 0:0 0644 "f"`,
	}
	wantFiles(t, m, want)
}
