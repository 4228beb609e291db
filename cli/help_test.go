package cli

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// -h prints the flags and exits 0 without running the command: serve and
// mcp must not start a daemon when asked for help.
func TestHelpDoesNotRun(t *testing.T) {
	for _, name := range []string{"serve", "mcp", "exec", "tenant", "tenant create"} {
		t.Run(name, func(t *testing.T) {
			var out, errw bytes.Buffer
			err := Run(context.Background(), append(strings.Fields(name), "-h"), strings.NewReader(""), &out, &errw)
			if err != nil {
				t.Fatalf("%s -h: %v", name, err)
			}
			if !strings.Contains(errw.String()+out.String(), "-") {
				t.Errorf("%s -h printed no usage", name)
			}
			if strings.Contains(out.String(), "listening") {
				t.Errorf("%s -h started the daemon: %s", name, out.String())
			}
		})
	}
}

// TestHelpEverywhere: --help on every command and every verb prints its
// usage to stdout, nothing to stderr, and exits 0.
func TestHelpEverywhere(t *testing.T) {
	var cases [][]string
	for _, n := range commandNames() {
		cases = append(cases, []string{n, "--help"}, []string{n, "-h"})
		for _, v := range commands[n].verbs {
			cases = append(cases, []string{n, v, "--help"})
		}
	}
	cases = append(cases, []string{"--help"}, []string{"help"}, []string{"help", "ctx"}, []string{"exec", "--lang", "bash", "--help"})
	for _, args := range cases {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			var out, errw bytes.Buffer
			if code := Main(context.Background(), args, strings.NewReader(""), &out, &errw); code != 0 {
				t.Fatalf("exit %d; stderr: %s", code, errw.String())
			}
			if out.Len() == 0 || errw.Len() != 0 {
				t.Fatalf("stdout %q, stderr %q", out.String(), errw.String())
			}
		})
	}
}

// TestUsageErrorsGoToStderr: a bad flag still prints the usage on stderr
// and exits 2, so help and mistakes stay apart.
func TestUsageErrorsGoToStderr(t *testing.T) {
	var out, errw bytes.Buffer
	code := Main(context.Background(), []string{"sanitize", "--nope"}, strings.NewReader(""), &out, &errw)
	if code != 2 || out.Len() != 0 || !strings.Contains(errw.String(), "usage: sandlot sanitize") {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out.String(), errw.String())
	}
}

func TestVersion(t *testing.T) {
	old := version
	defer func() { version = old }()
	for _, arg := range []string{"--version", "version"} {
		version = "v1.2.3-4-gabc"
		var out, errw bytes.Buffer
		if code := Main(context.Background(), []string{arg}, nil, &out, &errw); code != 0 || out.String() != "sandlot v1.2.3-4-gabc\n" {
			t.Errorf("%s: exit %d, %q", arg, code, out.String())
		}
	}
	version = ""
	if v := Version(); v == "" {
		t.Error("no version without ldflags")
	}
}

// TestCompletionBash sources the bash script in a real bash and asks it
// for commands, verbs and flags (the flags from the binary's --help).
func TestCompletionBash(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	bin := filepath.Join(t.TempDir(), "sandlot")
	if out, err := exec.Command("go", "build", "-o", bin, "../cmd/sandlot").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	for _, tc := range []struct{ words, want string }{
		{"sandlot ct", "ctx"},
		{"sandlot ctx r", "rm"},
		{"sandlot exec --la", "--lang"},
		{"sandlot serve --context-t", "--context-ttl"},
		{"sandlot completion f", "fish"},
	} {
		t.Run(tc.words, func(t *testing.T) {
			script := `source <("$BIN" completion bash)
COMP_WORDS=($WORDS); COMP_WORDS[0]="$BIN"; COMP_CWORD=$((${#COMP_WORDS[@]}-1)); _sandlot; echo "${COMPREPLY[@]}"`
			cmd := exec.Command(bash, "-c", script)
			cmd.Env = append(os.Environ(), "BIN="+bin, "WORDS="+tc.words)
			out, err := cmd.CombinedOutput()
			if err != nil || strings.TrimSpace(string(out)) != tc.want {
				t.Fatalf("completed %q, want %q (%v)", out, tc.want, err)
			}
		})
	}
	for _, sh := range []string{"zsh", "fish"} {
		var out bytes.Buffer
		if err := Run(context.Background(), []string{"completion", sh}, nil, &out, &out); err != nil || !strings.Contains(out.String(), "ctx") {
			t.Errorf("completion %s: %v %q", sh, err, out.String())
		}
	}
}

// TestErrorLine: a failed command prints "error: MESSAGE" without the
// category words, and a hint when no server answers.
func TestErrorLine(t *testing.T) {
	for _, tc := range []struct {
		args     []string
		code     int
		want     []string
		wantNone []string
	}{
		{[]string{"exec", "--url", "http://127.0.0.1:1", "--api-key", "k", "1"}, 7,
			[]string{"error: ", "is `sandlot serve` running? Set SANDLOT_URL"}, []string{": unavailable"}},
		{[]string{"run", "--timeout", "1h", "1"}, 2, []string{"error: run: --timeout must be between 1s and 600s\n"}, []string{"invalid argument", "hint:"}},
		{[]string{"nope"}, 2, []string{`error: unknown command "nope"`}, []string{"invalid argument"}},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var out, errw bytes.Buffer
			code := Main(context.Background(), tc.args, strings.NewReader(""), &out, &errw)
			if code != tc.code {
				t.Errorf("exit %d, want %d", code, tc.code)
			}
			for _, w := range tc.want {
				if !strings.Contains(errw.String(), w) {
					t.Errorf("stderr %q lacks %q", errw.String(), w)
				}
			}
			for _, w := range tc.wantNone {
				if strings.Contains(errw.String(), w) {
					t.Errorf("stderr %q has %q", errw.String(), w)
				}
			}
		})
	}
}
