package server_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/agent/internal/agenttest"
	"github.com/sandlot/sandlot/errdefs"
)

func TestFiles(t *testing.T) {
	c, a := agenttest.StartClient(t)
	ctx := context.Background()
	home := a.Home

	t.Run("write creates parents, read, stat", func(t *testing.T) {
		fi, err := c.WriteFile(ctx, agent.WriteParams{Path: "a/b/c.txt", Data: []byte("hello")})
		if err != nil {
			t.Fatal(err)
		}
		if fi.Path != filepath.Join(home, "a/b/c.txt") || fi.Size != 5 || fi.Type != "file" || fi.Mode != 0o644 {
			t.Fatalf("info %+v", fi)
		}
		if _, err := c.WriteFile(ctx, agent.WriteParams{Path: "a/b/c.txt", Data: []byte(" world"), Append: true}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.WriteFile(ctx, agent.WriteParams{Path: filepath.Join(home, "a/b/c.txt"), Data: []byte("J"), Offset: 6}); err != nil {
			t.Fatal(err)
		}
		r, err := c.ReadFile(ctx, agent.ReadParams{Path: "a/b/c.txt"})
		if err != nil {
			t.Fatal(err)
		}
		if string(r.Data) != "hello Jorld" || !r.EOF || r.Size != 11 {
			t.Fatalf("read %+v", r)
		}
		r, err = c.ReadFile(ctx, agent.ReadParams{Path: "a/b/c.txt", Offset: 6, Limit: 3})
		if err != nil || string(r.Data) != "Jor" || r.EOF {
			t.Fatalf("ranged read %+v %v", r, err)
		}
		st, err := c.Stat(ctx, "a/b")
		if err != nil || st.Type != "dir" || st.Name != "b" {
			t.Fatalf("stat %+v %v", st, err)
		}
		if _, err := c.Stat(ctx, "nope"); !errors.Is(err, errdefs.ErrNotFound) {
			t.Fatalf("stat missing: %v", err)
		}
		if _, err := c.ReadFile(ctx, agent.ReadParams{Path: "nope"}); !errors.Is(err, errdefs.ErrNotFound) {
			t.Fatalf("read missing: %v", err)
		}
	})

	t.Run("edit", func(t *testing.T) {
		if _, err := c.WriteFile(ctx, agent.WriteParams{Path: "e.py", Data: []byte("x = 1\ny = 1\nz = 2\n")}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.EditFile(ctx, agent.EditParams{Path: "e.py", Old: "w = 9", New: "w = 0"}); !errors.Is(err, errdefs.ErrNotFound) {
			t.Fatalf("missing old: %v", err)
		}
		if _, err := c.EditFile(ctx, agent.EditParams{Path: "e.py", Old: "= 1", New: "= 3"}); !errors.Is(err, errdefs.ErrFailedPrecondition) {
			t.Fatalf("not unique: %v", err)
		}
		if r, err := c.EditFile(ctx, agent.EditParams{Path: "e.py", Old: "z = 2", New: "z = 5"}); err != nil || r.Replacements != 1 {
			t.Fatalf("unique edit: %+v %v", r, err)
		}
		if r, err := c.EditFile(ctx, agent.EditParams{Path: "e.py", Old: "= 1", New: "= 3", All: true}); err != nil || r.Replacements != 2 {
			t.Fatalf("edit all: %+v %v", r, err)
		}
		b, _ := os.ReadFile(filepath.Join(home, "e.py"))
		if string(b) != "x = 3\ny = 3\nz = 5\n" {
			t.Fatalf("content %q", b)
		}
		if _, err := c.EditFile(ctx, agent.EditParams{Path: "nofile.py", Old: "a", New: "b"}); !errors.Is(err, errdefs.ErrNotFound) {
			t.Fatalf("edit missing file: %v", err)
		}
		if _, err := c.EditFile(ctx, agent.EditParams{Path: "e.py", Old: "", New: "b"}); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Fatalf("empty old: %v", err)
		}
	})

	t.Run("mkdir list remove move", func(t *testing.T) {
		if _, err := c.Mkdir(ctx, "d1/d2/d3"); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Mkdir(ctx, "d1/d2"); !errors.Is(err, errdefs.ErrAlreadyExists) {
			t.Fatalf("mkdir existing: %v", err)
		}
		if _, err := c.WriteFile(ctx, agent.WriteParams{Path: "d1/f1", Data: []byte("1")}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.WriteFile(ctx, agent.WriteParams{Path: "d1/d2/f2", Data: []byte("2")}); err != nil {
			t.Fatal(err)
		}
		names := func(ents []agent.FileInfo) []string {
			var out []string
			for _, e := range ents {
				rel, _ := filepath.Rel(filepath.Join(home, "d1"), e.Path)
				out = append(out, rel+":"+e.Type)
			}
			sort.Strings(out)
			return out
		}
		ents, err := c.List(ctx, agent.ListParams{Path: "d1"})
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]string{"d2:dir", "f1:file"}, names(ents)); diff != "" {
			t.Fatalf("list depth 1 (-want +got):\n%s", diff)
		}
		ents, err = c.List(ctx, agent.ListParams{Path: "d1", Depth: 2})
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]string{"d2/d3:dir", "d2/f2:file", "d2:dir", "f1:file"}, names(ents)); diff != "" {
			t.Fatalf("list depth 2 (-want +got):\n%s", diff)
		}
		if _, err := c.List(ctx, agent.ListParams{Path: "nodir"}); !errors.Is(err, errdefs.ErrNotFound) {
			t.Fatalf("list missing: %v", err)
		}
		if err := c.Remove(ctx, agent.RemoveParams{Path: "d1/d2"}); !errors.Is(err, errdefs.ErrFailedPrecondition) {
			t.Fatalf("remove non-empty dir: %v", err)
		}
		fi, err := c.Move(ctx, agent.MoveParams{From: "d1/f1", To: "moved/deep/f1"})
		if err != nil || fi.Path != filepath.Join(home, "moved/deep/f1") {
			t.Fatalf("move %+v %v", fi, err)
		}
		if _, err := c.Move(ctx, agent.MoveParams{From: "d1/f1", To: "x"}); !errors.Is(err, errdefs.ErrNotFound) {
			t.Fatalf("move missing: %v", err)
		}
		if err := c.Remove(ctx, agent.RemoveParams{Path: "d1", Recursive: true}); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(filepath.Join(home, "d1")); !os.IsNotExist(err) {
			t.Fatalf("d1 still there: %v", err)
		}
		if err := c.Remove(ctx, agent.RemoveParams{Path: "d1"}); !errors.Is(err, errdefs.ErrNotFound) {
			t.Fatalf("remove missing: %v", err)
		}
	})

	t.Run("glob and grep", func(t *testing.T) {
		files := map[string]string{
			"proj/main.py":          "import os\ndef main():\n    print('TODO: fix')\n",
			"proj/pkg/util.py":      "# todo later\nX = 1\n",
			"proj/pkg/deep/more.py": "nothing here\n",
			"proj/README.md":        "TODO docs\n",
			"proj/bin.dat":          "TODO\x00binary",
		}
		for p, data := range files {
			if _, err := c.WriteFile(ctx, agent.WriteParams{Path: p, Data: []byte(data)}); err != nil {
				t.Fatal(err)
			}
		}
		abs := func(ps ...string) []string {
			out := []string{}
			for _, p := range ps {
				out = append(out, filepath.Join(home, p))
			}
			return out
		}
		for _, tc := range []struct {
			pattern, root string
			want          []string
		}{
			{"**/*.py", "proj", abs("proj/main.py", "proj/pkg/deep/more.py", "proj/pkg/util.py")},
			{"*.py", "proj", abs("proj/main.py")},
			{"proj/pkg/*.py", "", abs("proj/pkg/util.py")},
			{"proj/**/more.py", "", abs("proj/pkg/deep/more.py")},
			{filepath.Join(home, "proj", "*.md"), "", abs("proj/README.md")},
			{"**/nomatch", "proj", []string{}},
		} {
			r, err := c.Glob(ctx, agent.GlobParams{Pattern: tc.pattern, Root: tc.root})
			if err != nil {
				t.Fatalf("glob %s: %v", tc.pattern, err)
			}
			if diff := cmp.Diff(tc.want, r.Paths); diff != "" {
				t.Errorf("glob %s under %q (-want +got):\n%s", tc.pattern, tc.root, diff)
			}
		}
		r, err := c.Glob(ctx, agent.GlobParams{Pattern: "**/*.py", Root: "proj", Limit: 2})
		if err != nil || len(r.Paths) != 2 || !r.Truncated {
			t.Fatalf("glob limit: %+v %v", r, err)
		}

		g, err := c.Grep(ctx, agent.GrepParams{Pattern: "TODO", Path: "proj"})
		if err != nil {
			t.Fatal(err)
		}
		want := []agent.GrepMatch{
			{Path: filepath.Join(home, "proj/README.md"), Line: 1, Text: "TODO docs"},
			{Path: filepath.Join(home, "proj/main.py"), Line: 3, Text: "    print('TODO: fix')"},
		}
		if diff := cmp.Diff(want, g.Matches); diff != "" {
			t.Errorf("grep (-want +got):\n%s", diff)
		}
		g, err = c.Grep(ctx, agent.GrepParams{Pattern: `todo\b`, Path: "proj", Glob: "*.py", IgnoreCase: true})
		if err != nil {
			t.Fatal(err)
		}
		if len(g.Matches) != 2 || g.Matches[0].Path != filepath.Join(home, "proj/main.py") || g.Matches[1].Line != 1 {
			t.Errorf("grep ignorecase+glob: %+v", g.Matches)
		}
		g, err = c.Grep(ctx, agent.GrepParams{Pattern: "o", Path: "proj", Limit: 2})
		if err != nil || len(g.Matches) != 2 || !g.Truncated {
			t.Errorf("grep limit: %+v %v", g, err)
		}
		if _, err := c.Grep(ctx, agent.GrepParams{Pattern: "(", Path: "proj"}); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("bad regexp: %v", err)
		}
	})
}

func TestChunkedTransfer(t *testing.T) {
	c, a := agenttest.StartClient(t)
	ctx := context.Background()
	data := make([]byte, 5<<20+123)
	if _, err := rand.Read(data); err != nil {
		t.Fatal(err)
	}
	// Upload in chunks.
	for off := 0; off < len(data); off += agent.ChunkSize {
		end := min(off+agent.ChunkSize, len(data))
		p := agent.WriteParams{Path: "big/blob.bin", Data: data[off:end]}
		if off > 0 {
			p.Append = true
		}
		if _, err := c.WriteFile(ctx, p); err != nil {
			t.Fatalf("chunk at %d: %v", off, err)
		}
	}
	onDisk, err := os.ReadFile(filepath.Join(a.Home, "big/blob.bin"))
	if err != nil || !bytes.Equal(onDisk, data) {
		t.Fatalf("uploaded file differs (err %v, len %d)", err, len(onDisk))
	}
	// Download in chunks.
	var got []byte
	for {
		r, err := c.ReadFile(ctx, agent.ReadParams{Path: "big/blob.bin", Offset: int64(len(got))})
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Data) > agent.ChunkSize {
			t.Fatalf("chunk of %d bytes", len(r.Data))
		}
		got = append(got, r.Data...)
		if r.EOF {
			break
		}
	}
	if !bytes.Equal(got, data) {
		t.Fatalf("downloaded %d bytes, differ", len(got))
	}
}
