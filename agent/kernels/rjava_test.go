package kernels

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/internal/testenv"
)

// needs returns a Manager whose kernels run in a fresh home, after
// checking the interpreter lang needs is on the host.
func needs(t *testing.T, lang string) *Manager {
	t.Helper()
	switch lang {
	case agent.R:
		testenv.RequireBinary(t, "Rscript")
	case agent.Java:
		testenv.RequireBinary(t, "jshell") // the JDK, whose java has the jdk.jshell module
	}
	home := t.TempDir()
	m := New(Config{Home: home, Env: []string{"PATH=/usr/bin:/bin", "HOME=" + home, "SL_SANDBOX=box"}})
	t.Cleanup(m.Close)
	return m
}

func runIn(t *testing.T, m *Manager, p agent.RunCodeParams) *agent.RunCodeResult {
	t.Helper()
	if p.TimeoutMs == 0 {
		p.TimeoutMs = 120_000 // a JVM's first cell compiles jshell itself on a loaded host
	}
	r, err := m.Run(context.Background(), p, nil)
	if err != nil {
		t.Fatalf("%s %q: %v", p.Language, p.Code, err)
	}
	return r
}

func texts(r *agent.RunCodeResult) []string {
	var out []string
	for _, rr := range r.Results {
		out = append(out, rr.Text)
	}
	return out
}

// TestRAndJavaCells runs both drivers through the cases E2B's suites and
// users meet: a value as a text result, state across cells, output, the
// working directory, envs of one run only, and an error's name, value and
// traceback.
func TestRAndJavaCells(t *testing.T) {
	type step struct {
		code    string
		env     map[string]string
		texts   []string // the results' texts
		stdout  string
		errName string // "": success
		errText string // in the error's value
	}
	cases := []struct {
		lang  string
		steps []step
	}{
		{agent.R, []step{
			{code: "x <- 41\nf <- function(v) v + 1", texts: nil},
			{code: "f(x)", texts: []string{"[1] 42"}},
			{code: `cat("out\n"); 1; "two"`, texts: []string{"[1] 1", `[1] "two"`}, stdout: "out\n"},
			{code: "invisible(7)", texts: nil},
			{code: `Sys.getenv("SL_RUN")`, env: map[string]string{"SL_RUN": "bar"}, texts: []string{`[1] "bar"`}},
			{code: `Sys.getenv("SL_RUN", unset = "default")`, texts: []string{`[1] "default"`}},
			{code: `Sys.getenv("SL_SANDBOX")`, env: map[string]string{"SL_SANDBOX": "over"}, texts: []string{`[1] "over"`}},
			{code: `Sys.getenv("SL_SANDBOX")`, texts: []string{`[1] "box"`}},
			{code: "basename(getwd())", texts: nil}, // checked below
			{code: "g <- function() stop(\"boom\")\nh <- function() g()\nh()", errName: "ERROR", errText: "boom"},
			{code: "x + 1", texts: []string{"[1] 42"}}, // state survives an error
			{code: "1 +", errName: "ERROR", errText: "unexpected end of input"},
			{code: `"é\tö"`, texts: []string{`[1] "é\tö"`}},
		}},
		{agent.Java, []step{
			{code: "int x = 41;\nint f(int v) { return v + 1; }", texts: nil},
			{code: "f(x)", texts: []string{"42"}},
			{code: `System.out.println("out"); "a\"b\n"`, texts: []string{"a\"b\n"}, stdout: "out\n"},
			{code: `String nothing = null; nothing`, texts: nil},
			{code: `System.getProperty("SL_RUN")`, env: map[string]string{"SL_RUN": "bar"}, texts: []string{"bar"}},
			{code: `System.getProperty("SL_RUN", "default")`, texts: []string{"default"}},
			{code: `System.getProperty("SL_SANDBOX")`, env: map[string]string{"SL_SANDBOX": "over"}, texts: []string{"over"}},
			{code: `System.getProperty("SL_SANDBOX")`, texts: []string{"box"}},
			{code: `List<Integer> xs = new ArrayList<>(List.of(3, 1, 2)); Collections.sort(xs); xs`, texts: []string{"[1, 2, 3]"}},
			{code: `int z = 1 / 0;`, errName: "java.lang.ArithmeticException", errText: "/ by zero"},
			{code: "x + 1", texts: []string{"42"}},
			{code: "int y = ;", errName: "CompilationException", errText: "illegal start of expression"},
			{code: `"é\tö"`, texts: []string{"é\tö"}},
			{code: `System.out.println("é")`, stdout: "é\n"},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.lang, func(t *testing.T) {
			m := needs(t, tc.lang)
			for i, st := range tc.steps {
				r := runIn(t, m, agent.RunCodeParams{Language: tc.lang, Code: st.code, Env: st.env})
				if st.errName != "" {
					if r.Error == nil || r.Error.Name != st.errName || !strings.Contains(r.Error.Value, st.errText) || r.Success {
						t.Fatalf("step %d %q: error %+v, want %s containing %q", i, st.code, r.Error, st.errName, st.errText)
					}
					if r.Error.Traceback == "" {
						t.Errorf("step %d: no traceback", i)
					}
					continue
				}
				if r.Error != nil || !r.Success {
					t.Fatalf("step %d %q: %+v (stderr %q)", i, st.code, r.Error, r.Stderr)
				}
				if strings.Contains(st.code, "getwd") {
					if got := texts(r); len(got) != 1 || got[0] != `[1] "`+filepath.Base(m.cfg.Home)+`"` {
						t.Fatalf("cwd: %q, want the home %s", got, m.cfg.Home)
					}
					continue
				}
				if got := texts(r); strings.Join(got, "|") != strings.Join(st.texts, "|") {
					t.Fatalf("step %d %q: results %q, want %q (stdout %q stderr %q)", i, st.code, got, st.texts, r.Stdout, r.Stderr)
				}
				if r.Stdout != st.stdout {
					t.Fatalf("step %d %q: stdout %q, want %q", i, st.code, r.Stdout, st.stdout)
				}
				if r.ExecutionCount != i+1 {
					t.Errorf("step %d: execution count %d", i, r.ExecutionCount)
				}
			}
		})
	}
}

// TestRAndJavaInterrupt: a run past its timeout is interrupted and the
// kernel keeps its state (R signals an interrupt; the java driver stops
// the snippet).
func TestRAndJavaInterrupt(t *testing.T) {
	for _, tc := range []struct{ lang, set, loop, get, want string }{
		{agent.R, "kept <- 5", "repeat {}", "kept", "[1] 5"},
		{agent.Java, "int kept = 5;", "while (true) {}", "kept", "5"},
	} {
		t.Run(tc.lang, func(t *testing.T) {
			m := needs(t, tc.lang)
			runIn(t, m, agent.RunCodeParams{Language: tc.lang, Code: tc.set})
			r := runIn(t, m, agent.RunCodeParams{Language: tc.lang, Code: tc.loop, TimeoutMs: 1500})
			if !r.TimedOut || r.Error == nil || r.Error.Name != "TimeoutError" {
				t.Fatalf("loop: %+v %+v", r, r.Error)
			}
			if r.KernelRestarted {
				t.Fatalf("the interrupt killed the kernel: %+v", r.Error)
			}
			r = runIn(t, m, agent.RunCodeParams{Language: tc.lang, Code: tc.get})
			if got := texts(r); len(got) != 1 || got[0] != tc.want {
				t.Fatalf("after the interrupt: %q %+v", got, r.Error)
			}
		})
	}
}

// TestMissingInterpreter: a sandbox without R or Java answers
// failed_precondition naming what is missing, not a failed exec.
func TestMissingInterpreter(t *testing.T) {
	dir := t.TempDir()
	m := New(Config{Home: dir, R: filepath.Join(dir, "Rscript"), Java: filepath.Join(dir, "java")})
	defer m.Close()
	for _, lang := range []string{agent.R, agent.Java} {
		_, err := m.Run(context.Background(), agent.RunCodeParams{Language: lang, Code: "1"}, nil)
		var ke *Error
		if !errors.As(err, &ke) || ke.Category != errdefs.CodeFailedPrecondition || !strings.Contains(ke.Msg, "not installed") {
			t.Errorf("%s: %v, want failed_precondition", lang, err)
		}
	}
}

// TestRAndJavaAsTheSandboxUser: the kernels run as the sandbox's user
// while the agent is root (as in a sandbox). The drivers open their pipes
// by name, which the pipes' owner allows: they were root's, and both
// kernels died at start with "Permission denied".
func TestRAndJavaAsTheSandboxUser(t *testing.T) {
	testenv.RequireRoot(t)
	home := t.TempDir()
	if err := os.Chown(home, 1000, 1000); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Dir(home), 0o755); err != nil {
		t.Fatal(err)
	}
	user := func(name string) (*syscall.Credential, []string, string, error) {
		return &syscall.Credential{Uid: 1000, Gid: 1000}, []string{"PATH=/usr/bin:/bin", "HOME=" + home}, home, nil
	}
	for _, tc := range []struct{ lang, code, want string }{
		{agent.R, "40 + 2", "[1] 42"},
		{agent.Java, "40 + 2", "42"},
	} {
		t.Run(tc.lang, func(t *testing.T) {
			needs(t, tc.lang)
			m := New(Config{Home: home, User: user})
			defer m.Close()
			r := runIn(t, m, agent.RunCodeParams{Language: tc.lang, Code: tc.code})
			if got := texts(r); len(got) != 1 || got[0] != tc.want {
				t.Fatalf("as uid 1000: %q %+v (stderr %q)", got, r.Error, r.Stderr)
			}
		})
	}
}
