package kernels

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/internal/testenv"
)

// TestCompiledDriverCurrent: driver.pyc.bin was made from this driver
// program (driver_site.py, driver_hooks.py and driver.py).
func TestCompiledDriverCurrent(t *testing.T) {
	code, tag := compiledDriver(driverPyc, pythonSource())
	if code == nil || tag == "" {
		t.Fatal("driver.pyc.bin was made from another driver program: run `go generate ./agent/kernels` (with python 3.11)")
	}
	if c, _ := compiledDriver(driverPyc, pythonSource()+"\n"); c != nil {
		t.Error("a compiled driver was accepted for another source")
	}
	if c, _ := compiledDriver([]byte("garbage"), pythonSource()); c != nil {
		t.Error("a file without a header was accepted")
	}
}

// hostPython holds what TestPythonBoot needs of the host's python, read by
// TestMain before any test runs: once a test starts a kernel, the agent's
// reaper (agent/internal/proc) waits for every child of this process, and
// could reap an exec.Command's python before its own Wait ("waitid: no
// child processes", seen once under load).
var hostPython struct {
	tag    string // /usr/bin/python3's cache tag
	marked []byte // the driver compiled by it, marking itself first
	err    error
}

func TestMain(m *testing.M) {
	hostPython.tag, hostPython.marked, hostPython.err = readHostPython()
	os.Exit(m.Run())
}

func readHostPython() (string, []byte, error) {
	out, err := exec.Command("/usr/bin/python3", "-c", "import sys; print(sys.implementation.cache_tag)").Output()
	if err != nil {
		return "", nil, err
	}
	// Compiled as compile_driver.py does.
	cmd := exec.Command("/usr/bin/python3", "-c", `import marshal, sys
sys.stdout.buffer.write(marshal.dumps(compile(sys.stdin.read(), "<string>", "exec", dont_inherit=True, optimize=0)))`)
	cmd.Stdin = strings.NewReader("import builtins\nbuiltins._sandlot_boot = 'compiled'\n" + pythonSource())
	marked, err := cmd.Output()
	return strings.TrimSpace(string(out)), marked, err
}

// TestPythonBoot: a python of the compiled driver's tag runs the code on
// its stdin (here a driver that marks itself first), one without it
// compiles the source; either way the user's stdin is /dev/null and
// cells and their errors work as before.
func TestPythonBoot(t *testing.T) {
	testenv.RequireBinary(t, "/usr/bin/python3")
	if hostPython.err != nil {
		t.Fatal(hostPython.err)
	}
	tag, marked := hostPython.tag, hostPython.marked
	_, cacheTag := pythonDriver()
	testenv.Require(t, tag == cacheTag, "the host's python ("+tag+") is the compiled driver's ("+cacheTag+")")
	saved := pythonDriver
	defer func() { pythonDriver = saved }()
	for _, tc := range []struct {
		name     string
		compiled []byte
		want     string
	}{
		{"compiled", marked, "'compiled'"},
		{"source", nil, "'source'"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pythonDriver = func() ([]byte, string) { return tc.compiled, tag }
			m := needs(t, agent.Python)
			r := runIn(t, m, agent.RunCodeParams{Language: agent.Python, Code: `import builtins, os, sys
(getattr(builtins, "_sandlot_boot", "source"), os.readlink("/proc/self/fd/0"), sys.stdin.read())`})
			if r.Error != nil || len(r.Results) != 1 || r.Results[0].Text != "("+tc.want+", '/dev/null', '')" {
				t.Fatalf("boot: %+v error %+v", r.Results, r.Error)
			}
			r = runIn(t, m, agent.RunCodeParams{Language: agent.Python, Code: "def f():\n    return 1 / 0\nf()"})
			if r.Error == nil || r.Error.Name != "ZeroDivisionError" || !strings.HasPrefix(r.Error.Traceback, "Traceback (most recent call last):\n  File \"<cell-") || strings.Contains(r.Error.Traceback, "<string>") {
				t.Fatalf("error: %+v", r.Error)
			}
		})
	}
}

// TestPythonBootSmall: the -c program stays a loader. Python decodes,
// tokenizes and parses a -c program at every kernel start, and the 35 KB
// one that carried the driver's source and its extras as literals cost
// each start about 600 page faults; they travel on stdin instead.
func TestPythonBootSmall(t *testing.T) {
	if n := len(pythonBoot); n > 2048 {
		t.Fatalf("the python boot program is %d bytes; keep it a loader (under 2 KB) and put code in pythonStdin", n)
	}
	code, tag := pythonDriver()
	for _, in := range [][]byte{pythonStdin(code, tag), pythonStdin(nil, "")} {
		head, rest, ok := strings.Cut(string(in), "\n")
		if !ok || !strings.HasPrefix(head, "sandlot-boot ") || !strings.HasSuffix(rest, pythonIPython) || !strings.Contains(rest, pythonSource()) {
			t.Fatalf("stdin header %q", head)
		}
	}
}
