package kernels

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/internal/testenv"
)

// TestPythonSiteDeferred: the kernel starts as python does without -S
// (the same sys.path, the .pth files' path lines, help and exit), but the
// .pth files' import lines wait for the first import of a module outside
// the standard library, and then run once, as site runs them (sitedir in
// the caller's frame; a failing line skips the rest of its file, said on
// stderr). The pythons multiprocessing spawns start with site. A kernel imports neither ast nor _ast until a cell of several
// statements, and then only _ast.
func TestPythonSiteDeferred(t *testing.T) {
	testenv.RequireBinary(t, "/usr/bin/python3")
	home, userbase := t.TempDir(), t.TempDir()
	env := []string{"PATH=/usr/bin:/bin", "HOME=" + home, "PYTHONUSERBASE=" + userbase}
	out, err := pythonIn(home, env, "import site; print(site.getusersitepackages())")
	if err != nil {
		t.Fatal(err)
	}
	sitedir := strings.TrimSpace(out)
	write := func(name, body string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(filepath.Join(sitedir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(sitedir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("extra/.keep", "")
	write("a.pth", "extra\nimport builtins, sys; builtins.PTH_SITEDIR = sys._getframe(1).f_locals['sitedir']; builtins.PTH_RAN = getattr(builtins, 'PTH_RAN', 0) + 1\n")
	write("b.pth", "import no_such_module_sandlot_test\nimport builtins; builtins.PTH_B = True\n")
	write("thirdparty_probe.py", "VALUE = 7\n")
	want, err := pythonIn(home, env, "import sys; print(sys.path)")
	if err != nil {
		t.Fatal(err)
	}

	m := New(Config{Home: home, Env: env})
	t.Cleanup(m.Close)
	r := runIn(t, m, agent.RunCodeParams{Language: agent.Python, Code: `[n in __import__("sys").modules for n in ("ast", "_ast", "site")]`})
	if r.Error != nil || len(texts(r)) != 1 || texts(r)[0] != "[False, False, True]" {
		t.Fatalf("a kernel that ran only expressions: %+v error %+v", texts(r), r.Error)
	}
	r = runIn(t, m, agent.RunCodeParams{Language: agent.Python, Code: "import sys\nsys.path"})
	if r.Error != nil || len(r.Results) != 1 || r.Results[0].Text != strings.TrimSpace(want) {
		t.Fatalf("sys.path: kernel %+v error %+v, python %s", r.Results, r.Error, want)
	}
	r = runIn(t, m, agent.RunCodeParams{Language: agent.Python, Code: `import builtins, json, sys
(getattr(builtins, "PTH_RAN", 0), "ast" in sys.modules, callable(help), callable(exit), "extra" in sys.path[-1] or any(p.endswith("/extra") for p in sys.path))`})
	if r.Error != nil || len(texts(r)) != 1 || texts(r)[0] != "(0, False, True, True, True)" {
		t.Fatalf("before a third-party import: %+v error %+v stderr %q", texts(r), r.Error, r.Stderr)
	}
	r = runIn(t, m, agent.RunCodeParams{Language: agent.Python, Code: `import thirdparty_probe, builtins
(thirdparty_probe.VALUE, builtins.PTH_RAN, builtins.PTH_SITEDIR == ` + pyString(sitedir) + `, hasattr(builtins, "PTH_B"))`})
	if r.Error != nil || len(texts(r)) != 1 || texts(r)[0] != "(7, 1, True, False)" {
		t.Fatalf("the first third-party import: %+v error %+v stderr %q", texts(r), r.Error, r.Stderr)
	}
	if !strings.Contains(r.Stderr, "b.pth") || !strings.Contains(r.Stderr, "no_such_module_sandlot_test") || !strings.Contains(r.Stderr, "Remainder of file ignored") {
		t.Fatalf("the failing line's report: stderr %q", r.Stderr)
	}
	// multiprocessing's spawned pythons start with site (the kernel's -S
	// is not passed on), so the .pth lines run in them at their start.
	r = runIn(t, m, agent.RunCodeParams{Language: agent.Python, Code: `import multiprocessing
with multiprocessing.get_context("spawn").Pool(1) as pool:
    child = pool.apply(eval, ("(__import__('sys').flags.no_site, getattr(__import__('builtins'), 'PTH_RAN', 0))",))
child`})
	if r.Error != nil || len(texts(r)) != 1 || texts(r)[0] != "(0, 1)" {
		t.Fatalf("a spawned child: %+v error %+v stderr %q", texts(r), r.Error, r.Stderr)
	}
	r = runIn(t, m, agent.RunCodeParams{Language: agent.Python, Code: "import thirdparty_probe, email.mime\nimport builtins\nbuiltins.PTH_RAN"})
	if r.Error != nil || len(texts(r)) != 1 || texts(r)[0] != "1" || r.Stderr != "" {
		t.Fatalf("again: %+v error %+v stderr %q", texts(r), r.Error, r.Stderr)
	}
}

// pythonIn runs /usr/bin/python3 -c code in dir with env, as python
// starts on its own (site and all).
func pythonIn(dir string, env []string, code string) (string, error) {
	cmd := exec.Command("/usr/bin/python3", "-c", code)
	cmd.Dir, cmd.Env = dir, env
	out, err := cmd.Output()
	return string(out), err
}

// pyString is s as a python string literal (s has no quotes or
// backslashes: a temp dir's path).
func pyString(s string) string { return "'" + s + "'" }
