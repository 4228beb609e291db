package dist

import (
	"bytes"
	"context"
	"debug/elf"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// root is sandlot's module root, two levels up from this package.
func root(t *testing.T) string {
	t.Helper()
	r, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(r, "go.mod")); err != nil || !bytes.HasPrefix(b, []byte("module github.com/sandlot/sandlot\n")) {
		t.Fatalf("%s is not sandlot's module root: %v", r, err)
	}
	return r
}

// copyTree copies the files git would commit (tracked, and new ones not
// ignored) from src to a new directory elsewhere: the same source at
// another path.
func copyTree(t *testing.T, src string) string {
	t.Helper()
	out, err := exec.Command("git", "-C", src, "ls-files", "-z", "--cached", "--others", "--exclude-standard").Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	dst := filepath.Join(t.TempDir(), "elsewhere", "sandlot")
	for _, name := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		fi, err := os.Lstat(filepath.Join(src, name))
		if err != nil || !(fi.Mode().IsRegular() || fi.Mode()&os.ModeSymlink != 0) {
			continue // deleted in the tree, or a submodule
		}
		p := filepath.Join(dst, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if fi.Mode()&os.ModeSymlink != 0 {
			target, _ := os.Readlink(filepath.Join(src, name))
			if err := os.Symlink(target, p); err != nil {
				t.Fatal(err)
			}
			continue
		}
		b, err := os.ReadFile(filepath.Join(src, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, fi.Mode().Perm()); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

// TestReproducible builds the release twice and compares every byte: once
// from this tree with the machine's build cache, once from a copy of the
// source at another path with an empty build cache (every package
// compiled again). The binaries, their SBOMs and SHA256SUMS must be the
// same. One architecture, this machine's, keeps it to one cold build (the
// other differs only in GOARCH); make dist builds both. Then the build is
// checked for what a release promises: static binaries that report the
// linked version and commit, and checksums sha256sum accepts.
func TestReproducible(t *testing.T) {
	src := root(t)
	arch := runtime.GOARCH
	cfg := Config{
		Src: src, Out: filepath.Join(t.TempDir(), "a"), Arches: []string{arch},
		Version: "v0.1.0-3-gabc1234", Commit: "abc1234abc1234abc1234abc1234abc1234abc12",
		Epoch: time.Unix(1795938546, 0),
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	start := time.Now()
	if err := Build(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	t.Logf("first build (warm cache): %s", time.Since(start).Round(time.Second))

	other := cfg
	other.Src = copyTree(t, src)
	other.Out = filepath.Join(t.TempDir(), "b")
	other.Env = []string{"GOCACHE=" + t.TempDir()}
	start = time.Now()
	if err := Build(ctx, other); err != nil {
		t.Fatal(err)
	}
	t.Logf("second build (another path, empty cache): %s", time.Since(start).Round(time.Second))

	a, _ := os.ReadDir(cfg.Out)
	b, _ := os.ReadDir(other.Out)
	if len(a) != len(b) || len(a) != 7 {
		t.Fatalf("the builds made %d and %d files, want 7 (3 binaries, 3 SBOMs, SHA256SUMS)", len(a), len(b))
	}
	for i := range a {
		x, _ := os.ReadFile(filepath.Join(cfg.Out, a[i].Name()))
		y, err := os.ReadFile(filepath.Join(other.Out, a[i].Name()))
		if err != nil || a[i].Name() != b[i].Name() || !bytes.Equal(x, y) {
			t.Errorf("%s differs between the builds (%d and %d bytes)", a[i].Name(), len(x), len(y))
		}
	}

	for name := range Binaries {
		p := filepath.Join(cfg.Out, FileName(name, arch))
		f, err := elf.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, prog := range f.Progs {
			if prog.Type == elf.PT_INTERP || prog.Type == elf.PT_DYNAMIC {
				t.Errorf("%s is not static: it has a %v program header", name, prog.Type)
			}
		}
		f.Close()
		if _, err := os.Stat(p + ".spdx.json"); err != nil {
			t.Errorf("no SBOM for %s: %v", name, err)
		}
	}
	out, err := exec.Command(filepath.Join(cfg.Out, FileName("sandlot", arch)), "version", "-o", "json").Output()
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		Version, Commit string
		SchemaVersion   int
	}
	if err := json.Unmarshal(out, &v); err != nil || v.Version != cfg.Version || v.Commit != cfg.Commit || v.SchemaVersion <= 0 {
		t.Errorf("the release binary reports %s (%v), want version %s commit %s", out, err, cfg.Version, cfg.Commit)
	}
	check := exec.Command("sha256sum", "--check", "--strict", SumsFile)
	check.Dir = cfg.Out
	if b, err := check.CombinedOutput(); err != nil {
		t.Errorf("sha256sum --check: %v\n%s", err, b)
	}
}

func TestWriteSums(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "b"), []byte("b"), 0o644)
	os.WriteFile(filepath.Join(dir, "a"), []byte("a"), 0o644)
	os.Mkdir(filepath.Join(dir, "sub"), 0o755)
	os.WriteFile(filepath.Join(dir, SumsFile), []byte("stale\n"), 0o644)
	if err := WriteSums(dir); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(filepath.Join(dir, SumsFile))
	want := "ca978112ca1bbdcafac231b39a23dc4da786eff8147c4e72b9807785afee48bb  a\n" +
		"3e23e8160039594a33894f6564e1b1348bbd7a0088d42c4acb73eeaed59c009d  b\n"
	if string(got) != want {
		t.Errorf("SHA256SUMS:\n%s\nwant\n%s", got, want)
	}
}

// TestBuildRefusesBadVersion: what would not survive -ldflags' parsing (a
// space, a quote) or is no commit is refused before any build.
func TestBuildRefusesBadVersion(t *testing.T) {
	for _, tc := range []struct{ version, commit string }{
		{"v1.0.0 -X main.x=y", "abc1234"},
		{"v1.0.0'", "abc1234"},
		{"", "abc1234"},
		{"v1.0.0", ""},
		{"v1.0.0", "HEAD"},
	} {
		err := Build(context.Background(), Config{Src: t.TempDir(), Out: t.TempDir(), Version: tc.version, Commit: tc.commit, Epoch: time.Unix(1, 0), Go: "/nonexistent/go"})
		if err == nil || !strings.Contains(err.Error(), "is not one git describe") {
			t.Errorf("Build(%q, %q) = %v", tc.version, tc.commit, err)
		}
	}
}
