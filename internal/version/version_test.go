package version

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sandlot/sandlot/internal/testenv"
)

const rev = "9eb770d1a2b3c4d5e6f708192a3b4c5d6e7f8091"

func settings(kv ...string) []debug.BuildSetting {
	var s []debug.BuildSetting
	for i := 0; i+1 < len(kv); i += 2 {
		s = append(s, debug.BuildSetting{Key: kv[i], Value: kv[i+1]})
	}
	return s
}

// TestResolve walks every source of the version, in the order Get tries
// them.
func TestResolve(t *testing.T) {
	for _, tc := range []struct {
		name                  string
		linkedVer, linkedComm string
		bi                    *debug.BuildInfo
		want                  Info
	}{
		{"linked version and commit win", "v1.2.3", rev,
			&debug.BuildInfo{Main: debug.Module{Version: "v0.0.0-20261129074040-000000000000"}, Settings: settings("vcs.revision", "ffff")},
			Info{"v1.2.3", rev}},
		{"linked version, commit from vcs", "v1.2.3-4-g9eb770d", "",
			&debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: settings("vcs.revision", rev)},
			Info{"v1.2.3-4-g9eb770d", rev}},
		{"go install module@tag: no vcs settings", "", "",
			&debug.BuildInfo{Main: debug.Module{Version: "v1.2.3"}},
			Info{"v1.2.3", ""}},
		{"go install module@commit: the pseudo-version names the commit", "", "",
			&debug.BuildInfo{Main: debug.Module{Version: "v1.2.4-0.20261129074040-9eb770d1a2b3"}},
			Info{"v1.2.4-0.20261129074040-9eb770d1a2b3", "9eb770d1a2b3"}},
		{"go build in a checkout (Go 1.24+)", "", "",
			&debug.BuildInfo{Main: debug.Module{Version: "v0.0.0-20261129074040-9eb770d1a2b3+dirty"}, Settings: settings("vcs.revision", rev, "vcs.modified", "true")},
			Info{"v0.0.0-20261129074040-9eb770d1a2b3+dirty", rev}},
		{"go build, revision only", "", "",
			&debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: settings("vcs.revision", rev, "vcs.modified", "false")},
			Info{"devel-9eb770d1a2b3", rev}},
		{"go build, revision only, modified", "", "",
			&debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: settings("vcs.revision", rev, "vcs.modified", "true")},
			Info{"devel-9eb770d1a2b3-dirty", rev}},
		{"go build -buildvcs=false", "", "", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, Info{"devel", ""}},
		{"no build info", "", "", nil, Info{"devel", ""}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, resolve(tc.linkedVer, tc.linkedComm, tc.bi)); diff != "" {
				t.Errorf("(-want +got)\n%s", diff)
			}
		})
	}
}

// TestBuilds builds testdata/printversion with the Go toolchain the ways
// a binary is made (a release's ldflags, `go build` in a tagged checkout,
// between tags, in a modified tree, without VCS stamping) and checks what
// the binary itself reports: the build info is the toolchain's, not a
// hand-made struct. The module is a fresh git repository holding this
// package alone, so the tags are the test's own.
func TestBuilds(t *testing.T) {
	goBin := testenv.RequireBinary(t, "go")
	git := testenv.RequireBinary(t, "git")
	repo := t.TempDir()
	run := func(dir, name string, env []string, args ...string) string {
		t.Helper()
		cmd := exec.Command(name, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), env...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
		return strings.TrimSpace(string(out))
	}
	write := func(rel, content string) {
		t.Helper()
		p := filepath.Join(repo, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"version.go", "testdata/printversion/main.go"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		write(filepath.Join("internal/version", f), string(b))
	}
	write("go.mod", "module github.com/sandlot/sandlot\n\ngo 1.24\n")
	gitEnv := []string{"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com",
		"GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1"}
	run(repo, git, gitEnv, "init", "-q")
	run(repo, git, gitEnv, "add", ".")
	run(repo, git, gitEnv, "commit", "-qm", "first")
	run(repo, git, gitEnv, "tag", "v0.9.7")
	tagged := run(repo, git, gitEnv, "rev-parse", "HEAD")

	// GOFLAGS is the test's own: a machine's go env may switch VCS
	// stamping off (-buildvcs=false), which is one of the cases here.
	build := func(t *testing.T, flags ...string) string {
		t.Helper()
		bin := filepath.Join(t.TempDir(), "printversion")
		args := append([]string{"build", "-o", bin}, flags...)
		run(repo, goBin, []string{"GOFLAGS=", "GOWORK=off", "GOPROXY=off", "CGO_ENABLED=0"}, append(args, "./internal/version/testdata/printversion")...)
		return run(repo, bin, nil)
	}
	t.Run("release ldflags", func(t *testing.T) {
		got := build(t, "-buildvcs=false", "-ldflags=-X github.com/sandlot/sandlot/internal/version.version=v1.0.0 -X github.com/sandlot/sandlot/internal/version.commit="+tagged)
		if want := "v1.0.0 " + tagged; got != want {
			t.Errorf("got %q, want %q", got, want)
		}
	})
	t.Run("go build at a tag", func(t *testing.T) {
		if got, want := build(t, "-buildvcs=true"), "v0.9.7 "+tagged; got != want {
			t.Errorf("got %q, want %q", got, want)
		}
	})
	t.Run("go build -buildvcs=false", func(t *testing.T) {
		if got, want := build(t, "-buildvcs=false"), "devel"; got != want {
			t.Errorf("got %q, want %q", got, want)
		}
	})
	write("internal/version/extra.go", "package version\n")
	t.Run("go build in a modified tree", func(t *testing.T) {
		if got, want := build(t, "-buildvcs=true"), "v0.9.7+dirty "+tagged; got != want {
			t.Errorf("got %q, want %q", got, want)
		}
	})
	run(repo, git, gitEnv, "add", ".")
	run(repo, git, gitEnv, "commit", "-qm", "second")
	next := run(repo, git, gitEnv, "rev-parse", "HEAD")
	t.Run("go build between tags", func(t *testing.T) {
		got := build(t, "-buildvcs=true")
		v, c, _ := strings.Cut(got, " ")
		if c != next || !strings.HasPrefix(v, "v0.9.8-0.") || !strings.HasSuffix(v, "-"+next[:12]) {
			t.Errorf("got %q, want v0.9.8-0.<time>-%s %s", got, next[:12], next)
		}
	})
}
