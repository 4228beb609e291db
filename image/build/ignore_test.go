package build

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/image/recipe"
)

// TestBuildDockerIgnore: in a Dockerfile's build (the recipe's
// DockerIgnore), COPY does not see what the context's .dockerignore names
// (the file itself included); it takes back what a `!` pattern does (with
// the ignored directory around it, and no ignored directory that holds
// nothing taken back); it refuses a source the file names (but for a
// directory a `!` pattern reaches into: what is taken back is copied);
// a glob skips what it names. Without DockerIgnore (an E2B template's
// recipe), COPY sees everything.
func TestBuildDockerIgnore(t *testing.T) {
	b, _ := newBuilder(t)
	ctx := context.Background()
	ctxDir := writeContext(t, map[string]string{
		".dockerignore":      "# what stays home\n*.log\n.dockerignore\nsecrets\n!secrets/public.pem\ncache\n**/*.tmp\n",
		"app.py":             "print(1)",
		"debug.log":          "log",
		"secrets/key":        "private",
		"secrets/public.pem": "public",
		"cache/blob":         "blob",
		"src/main.py":        "main",
		"src/x.tmp":          "tmp",
		"notes.txt":          "notes",
		"a.tmp":              "tmp",
	})
	build := func(dockerfile string, ignore bool) (map[string]string, error) {
		rec, err := recipe.ParseDockerfile(strings.NewReader(dockerfile), nil)
		if err != nil {
			t.Fatal(err)
		}
		if !rec.DockerIgnore {
			t.Fatal("a Dockerfile's recipe does not honour .dockerignore")
		}
		rec.DockerIgnore = ignore
		res, err := b.Build(ctx, rec, Options{ContextDir: ctxDir})
		if err != nil {
			return nil, err
		}
		m := mounted(t, res.Image)
		got := map[string]string{}
		for _, p := range []string{"app/app.py", "app/debug.log", "app/.dockerignore", "app/secrets", "app/secrets/key",
			"app/secrets/public.pem", "app/cache", "app/src/main.py", "app/src/x.tmp", "app/notes.txt", "glob/notes.txt", "glob/a.tmp", "only/key", "only/public.pem"} {
			got[p] = strings.SplitN(describeFile(t, m, p), " ", 2)[0]
		}
		return got, nil
	}
	got, err := build("FROM base\nCOPY . /app/\nCOPY *.t* /glob/\nCOPY secrets /only/\n", true)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"app/app.py": "file", "app/debug.log": "missing", "app/.dockerignore": "missing",
		"app/secrets": "dir", "app/secrets/key": "missing", "app/secrets/public.pem": "file",
		"app/cache": "missing", "app/src/main.py": "file", "app/src/x.tmp": "missing", "app/notes.txt": "file",
		"glob/notes.txt": "file", "glob/a.tmp": "missing", "only/key": "missing", "only/public.pem": "file",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("with .dockerignore (-want +got):\n%s", diff)
	}

	for _, df := range []string{"FROM base\nCOPY debug.log /x\n", "FROM base\nCOPY secrets/key /x\n", "FROM base\nCOPY *.log /x/\n"} {
		if _, err := build(df, true); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("%q: %v, want invalid argument", df, err)
		}
	}

	got, err = build("FROM base\nCOPY . /app/\nCOPY *.t* /glob/\nCOPY secrets /only/\n", false)
	if err != nil {
		t.Fatal(err)
	}
	for p := range want {
		if got[p] == "missing" && p != "app/secrets" {
			t.Errorf("without DockerIgnore, %s is missing", p)
		}
	}
}
