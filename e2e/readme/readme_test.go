// Package readme runs README.md's shell blocks, as a new user pastes
// them, against a real `sandlot serve` on 127.0.0.1:7423, the address the
// README names (in a network namespace of the test's own, so no other
// daemon is in the way). A block the test cannot run is marked in the
// README with an HTML comment right before it, `<!-- readme-test: skip:
// why -->`; the list is kept short. Every other block runs, in order, in
// one bash with -euo pipefail from a directory laid out as the
// repository's (bin/sandlot, .sandlot the daemon's data dir), so a
// command that fails fails the test, and each `# → TEXT` comment is
// output the blocks must print.
package readme

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandlot/sandlot/image/debian/debiantest"
	"github.com/sandlot/sandlot/internal/testenv"
	"github.com/sandlot/sandlot/network/nettest"
)

func TestMain(m *testing.M) { nettest.Main(m) }

// block is one fenced sh block of the README.
type block struct {
	line int    // of the opening fence
	skip string // why it is not run ("": it is)
	text string
}

// blocks parses the README's ```sh blocks and their skip markers.
func blocks(t *testing.T, path string) []block {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []block
	var cur *block
	skip := ""
	n := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		n++
		line := sc.Text()
		switch {
		case cur != nil && strings.TrimSpace(line) == "```":
			out = append(out, *cur)
			cur = nil
		case cur != nil:
			cur.text += line + "\n"
		case strings.TrimSpace(line) == "```sh":
			cur = &block{line: n, skip: skip}
			skip = ""
		case strings.HasPrefix(line, "<!-- readme-test: skip:"):
			skip = strings.TrimSuffix(strings.TrimSpace(strings.TrimPrefix(line, "<!-- readme-test: skip:")), "-->")
		case strings.TrimSpace(line) != "":
			skip = "" // a marker stands right before its block
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// expectations are the `# → TEXT` comments of a block: output it prints.
func expectations(text string) []string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if _, want, ok := strings.Cut(l, "# → "); ok {
			out = append(out, strings.TrimSpace(want))
		}
	}
	return out
}

// TestREADME runs the README's shell blocks against a real daemon.
func TestREADME(t *testing.T) {
	nettest.Require(t) // 127.0.0.1:7423 is this namespace's
	testenv.RequireOCIRuntime(t)
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	bs := blocks(t, filepath.Join(root, "README.md"))
	var run []block
	var skipped []string
	for _, b := range bs {
		if b.skip != "" {
			skipped = append(skipped, fmt.Sprintf("line %d (%s)", b.line, strings.TrimSpace(b.skip)))
			continue
		}
		run = append(run, b)
	}
	// The list of blocks a reader cannot trust to run stays short.
	if len(run) < 4 || len(skipped) > 3 {
		t.Fatalf("%d blocks run, %d skipped (%s): the README's examples are meant to be run", len(run), len(skipped), strings.Join(skipped, "; "))
	}
	t.Logf("skipped: %s", strings.Join(skipped, "; "))
	testenv.RequireBinary(t, "node")
	modules := filepath.Join(root, "e2e", "e2b", "node_modules")
	testenv.RequireFile(t, filepath.Join(modules, "@e2b", "code-interpreter", "package.json"))
	testenv.RequireBinary(t, "curl")
	debiantest.Default(t) // the default template, built once per machine

	// The directory the reader is in: bin/sandlot, and .sandlot, the data
	// dir `make run` gives serve.
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(testenv.SandlotBinary(t), filepath.Join(dir, "bin", "sandlot")); err != nil {
		t.Fatal(err)
	}
	state, err := os.MkdirTemp("", "sl-readme-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(state) })
	cmd := exec.Command(filepath.Join(dir, "bin", "sandlot"), "serve", "--data-dir", filepath.Join(dir, ".sandlot"),
		"--state-dir", state, "--images-dir", debiantest.StoreDir(), "--pool-size", "0")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "SANDLOT_AGENT_BIN="+testenv.AgentBinary(t))
	srv := testenv.StartServe(t, cmd, t.TempDir(), 2*time.Minute)
	defer func() {
		// The README's sandboxes end with the daemon's contexts.
		if !srv.Exited() {
			srv.Stop(t, time.Minute)
		}
	}()
	if srv.URL != "http://127.0.0.1:7423" {
		t.Fatalf("serve listens on %s, not where the README says", srv.URL)
	}

	var script strings.Builder
	script.WriteString("set -euo pipefail\n")
	var want []string
	for i, b := range run {
		fmt.Fprintf(&script, "echo '### README block %d of %d (README.md line %d)' >&2\n%s\n", i+1, len(run), b.line, b.text)
		want = append(want, expectations(b.text)...)
	}
	sh := exec.Command(testenv.RequireBinary(t, "bash"), "-c", script.String())
	sh.Dir = dir
	sh.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "LANG=C.UTF-8", "NODE_PATH=" + modules,
		"SANDLOT_AGENT_BIN=" + testenv.AgentBinary(t)}
	out, err := sh.CombinedOutput()
	if err != nil {
		t.Fatalf("the README's blocks failed: %v\n%s\n--- daemon log (tail):\n%s", err, out, tail(srv.Log(), 4000))
	}
	for _, w := range want {
		if !strings.Contains(string(out), w) {
			t.Errorf("the README says the blocks print %q; they did not:\n%s", w, out)
		}
	}
	t.Logf("README output:\n%s", out)
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
