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

// TestPythonSiteDeferred: the kernel (here a venv's python) starts as
// python does without -S (the same sys.path, the .pth files' path lines,
// help and exit), but the
// .pth files' import lines wait for the first import of a module outside
// the standard library, and then run as site runs them (sitedir in
// the caller's frame and as a name; a failing line skips the rest of its
// file, said on stderr as site says it). The pythons multiprocessing
// spawns start with site. A kernel imports neither ast nor _ast until a
// cell of several statements, and then only _ast.
func TestPythonSiteDeferred(t *testing.T) {
	m, sitedir, py := siteKernel(t, map[string]string{
		"extra/.keep":         "",
		"a.pth":               "extra\nimport builtins, sys; builtins.PTH_SITEDIR = sys._getframe(1).f_locals['sitedir']; builtins.PTH_RAN = getattr(builtins, 'PTH_RAN', 0) + 1\nimport builtins; builtins.PTH_BARE = sitedir\n",
		"b.pth":               "import no_such_module_sandlot_test\nimport builtins; builtins.PTH_B = True\n",
		"thirdparty_probe.py": "VALUE = 7\n",
	})
	want, err := pythonIn(py, m.cfg.Home, "import sys; print(sys.path)")
	if err != nil {
		t.Fatal(err)
	}
	// A venv's python runs its site-packages' .pth files twice (site's
	// venv() and then main() both add them): the kernel runs the lines as
	// many times as python does, once they run.
	ran, err := pythonIn(py, m.cfg.Home, "import builtins; print(builtins.PTH_RAN)")
	if err != nil {
		t.Fatal(err)
	}
	ran = strings.TrimSpace(ran)
	r := runIn(t, m, agent.RunCodeParams{Language: agent.Python, Code: `[n in __import__("sys").modules for n in ("ast", "_ast", "site")]`})
	if r.Error != nil || len(texts(r)) != 1 || texts(r)[0] != "[False, False, True]" {
		t.Fatalf("a kernel that ran only expressions: %+v error %+v", texts(r), r.Error)
	}
	r = runIn(t, m, agent.RunCodeParams{Language: agent.Python, Code: "import sys\nsys.path"})
	if r.Error != nil || len(r.Results) != 1 || r.Results[0].Text != strings.TrimSpace(want) {
		t.Fatalf("sys.path: kernel %+v error %+v, python %s", r.Results, r.Error, want)
	}
	r = runIn(t, m, agent.RunCodeParams{Language: agent.Python, Code: `import builtins, json, sys
(getattr(builtins, "PTH_RAN", 0), "ast" in sys.modules, callable(help), callable(exit), any(p.endswith("/extra") for p in sys.path))`})
	if r.Error != nil || len(texts(r)) != 1 || texts(r)[0] != "(0, False, True, True, True)" {
		t.Fatalf("before a third-party import: %+v error %+v stderr %q", texts(r), r.Error, r.Stderr)
	}
	r = runIn(t, m, agent.RunCodeParams{Language: agent.Python, Code: `import thirdparty_probe, builtins
(thirdparty_probe.VALUE, builtins.PTH_RAN, builtins.PTH_SITEDIR == ` + pyString(sitedir) + `, builtins.PTH_BARE == ` + pyString(sitedir) + `, hasattr(builtins, "PTH_B"))`})
	if r.Error != nil || len(texts(r)) != 1 || texts(r)[0] != "(7, "+ran+", True, True, False)" {
		t.Fatalf("the first third-party import: %+v error %+v stderr %q", texts(r), r.Error, r.Stderr)
	}
	if !strings.Contains(r.Stderr, "Error processing line 1 of "+filepath.Join(sitedir, "b.pth")) || !strings.Contains(r.Stderr, "no_such_module_sandlot_test") || !strings.Contains(r.Stderr, "Remainder of file ignored") {
		t.Fatalf("the failing line's report: stderr %q", r.Stderr)
	}
	// multiprocessing's spawned pythons start with site (the kernel's -S
	// is not passed on), so the .pth lines run in them at their start.
	r = runIn(t, m, agent.RunCodeParams{Language: agent.Python, Code: `import multiprocessing
with multiprocessing.get_context("spawn").Pool(1) as pool:
    child = pool.apply(eval, ("(__import__('sys').flags.no_site, getattr(__import__('builtins'), 'PTH_RAN', 0))",))
child`})
	if r.Error != nil || len(texts(r)) != 1 || texts(r)[0] != "(0, "+ran+")" {
		t.Fatalf("a spawned child: %+v error %+v stderr %q", texts(r), r.Error, r.Stderr)
	}
	r = runIn(t, m, agent.RunCodeParams{Language: agent.Python, Code: "import thirdparty_probe, email.mime\nimport builtins\nbuiltins.PTH_RAN"})
	if r.Error != nil || len(texts(r)) != 1 || texts(r)[0] != ran || r.Stderr != "" {
		t.Fatalf("again: %+v error %+v stderr %q, want %s", texts(r), r.Error, r.Stderr, ran)
	}
}

// TestPythonSiteDeferredFirstImport: the import that runs the .pth lines
// gets what a plain start would give it, first try: a module served by a
// finder a line put in front of the others (setuptools' shim does), and a
// module a line imports itself, run once with what the line set on it;
// distutils too, which the standard library has (setuptools' shim serves
// its own copy in front of it).
func TestPythonSiteDeferredFirstImport(t *testing.T) {
	front := "import builtins, sys, importlib.abc, importlib.util\n" +
		"class Front(importlib.abc.MetaPathFinder, importlib.abc.Loader):\n" +
		"    def find_spec(self, name, path=None, target=None):\n" +
		"        return importlib.util.spec_from_loader(name, self) if name in ('served_in_front', 'distutils') else None\n" +
		"    def create_module(self, spec):\n        return None\n" +
		"    def exec_module(self, module):\n        module.VALUE = 11\n" +
		"def add():\n    if not any(isinstance(f, Front) for f in sys.meta_path):\n        sys.meta_path.insert(0, Front())\n"
	for _, tc := range []struct{ name, pth, cell, want string }{
		{"finder in front", "import os; __import__('frontfinder').add()\n", "import served_in_front\nserved_in_front.VALUE", "11"},
		{"distutils from a finder in front", "import os; __import__('frontfinder').add()\n", "import distutils\ndistutils.VALUE", "11"},
		{"module of a line", "import selfprobe; selfprobe.MARK = 5\n", "import selfprobe, builtins\n(selfprobe.MARK, builtins.SELF_RUNS, selfprobe.__spec__.origin.endswith('selfprobe.py'))", "(5, 1, True)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, _, _ := siteKernel(t, map[string]string{
				"z.pth":          tc.pth,
				"frontfinder.py": front,
				"selfprobe.py":   "import builtins\nbuiltins.SELF_RUNS = getattr(builtins, 'SELF_RUNS', 0) + 1\n",
			})
			r := runIn(t, m, agent.RunCodeParams{Language: agent.Python, Code: tc.cell})
			if r.Error != nil || len(texts(r)) != 1 || texts(r)[0] != tc.want || r.Stderr != "" {
				t.Fatalf("%+v error %+v stderr %q, want %s", texts(r), r.Error, r.Stderr, tc.want)
			}
		})
	}
}

// siteKernel is a python kernel of a new venv (no system site-packages,
// so none of the host's .pth files) whose site-packages holds files
// (paths relative to it): the kernel, the site dir and the venv's python.
func siteKernel(t *testing.T, files map[string]string) (*Manager, string, string) {
	t.Helper()
	testenv.RequireBinary(t, "/usr/bin/python3")
	home, venv := t.TempDir(), t.TempDir()
	if out, err := exec.Command("/usr/bin/python3", "-m", "venv", "--without-pip", venv).CombinedOutput(); err != nil {
		t.Fatalf("venv: %v: %s", err, out)
	}
	py := filepath.Join(venv, "bin", "python3")
	out, err := pythonIn(py, home, "import site; print(site.getsitepackages()[0])")
	if err != nil {
		t.Fatal(err)
	}
	sitedir := strings.TrimSpace(out)
	for name, body := range files {
		p := filepath.Join(sitedir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	m := New(Config{Home: home, Env: []string{"PATH=/usr/bin:/bin", "HOME=" + home}, Python: py})
	t.Cleanup(m.Close)
	return m, sitedir, py
}

// pythonIn runs python -c code in dir, as python starts on its own (site
// and all).
func pythonIn(python, dir, code string) (string, error) {
	cmd := exec.Command(python, "-c", code)
	cmd.Dir, cmd.Env = dir, []string{"PATH=/usr/bin:/bin", "HOME=" + dir}
	out, err := cmd.Output()
	return string(out), err
}

// pyString is s as a python string literal (s has no quotes or
// backslashes: a temp dir's path).
func pyString(s string) string { return "'" + s + "'" }
