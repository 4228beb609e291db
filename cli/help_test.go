package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/cobra"

	"github.com/sandlot/sandlot/api"
	"github.com/sandlot/sandlot/internal/testenv"
	"github.com/sandlot/sandlot/store"
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

// commandPaths is every command of the tree, as the words that call it.
func commandPaths() [][]string {
	var paths [][]string
	var walk func(c *cobra.Command, path []string)
	walk = func(c *cobra.Command, path []string) {
		for _, sub := range c.Commands() {
			p := append(slices.Clone(path), sub.Name())
			paths = append(paths, p)
			walk(sub, p)
		}
	}
	root := newRoot(IO{})
	root.InitDefaultHelpCmd()
	walk(root, nil)
	return paths
}

// TestHelpEverywhere: --help on every command and every verb prints its
// usage to stdout, nothing to stderr, and exits 0.
func TestHelpEverywhere(t *testing.T) {
	cases := [][]string{{"--help"}, {"-h"}, {"-help"}, {"help"}, {"help", "ctx"}, {"help", "tenant", "create"}, {"exec", "--lang", "bash", "--help"}}
	paths := commandPaths()
	if len(paths) < 25 {
		t.Fatalf("only %d commands: %v", len(paths), paths)
	}
	for _, p := range paths {
		cases = append(cases, append(slices.Clone(p), "--help"), append(slices.Clone(p), "-h"))
	}
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

// TestUsageErrors: a mistake in the command line exits 2 with one error
// line and where the help is, on stderr; stdout stays empty.
func TestUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"sanitize", "--nope"}, "See 'sandlot sanitize --help'."},
		{[]string{"sanitize", "-nope"}, "See 'sandlot sanitize --help'."},
		{[]string{"nope"}, "See 'sandlot --help'."},
		{[]string{"ctx", "nope"}, "See 'sandlot ctx --help'."},
		{[]string{"ctx", "lss"}, `unknown command "lss" for "sandlot ctx" (did you mean ls?)`},
		{[]string{"tenant", "crate"}, "did you mean create?"},
		{[]string{"ctx", "get"}, "See 'sandlot ctx get --help'."},
		{[]string{"tenant", "create", "a", "b"}, "See 'sandlot tenant create --help'."},
		{[]string{"ps", "x"}, "See 'sandlot ps --help'."},
		{[]string{"serve", "--context-ttl", "soon"}, "See 'sandlot serve --help'."},
		{[]string{"completion", "tcsh"}, "See 'sandlot completion --help'."},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var out, errw bytes.Buffer
			code := Main(context.Background(), tc.args, strings.NewReader(""), &out, &errw)
			if code != 2 || out.Len() != 0 || !strings.HasPrefix(errw.String(), "error: ") || !strings.Contains(errw.String(), tc.want) {
				t.Fatalf("exit %d, stdout %q, stderr %q", code, out.String(), errw.String())
			}
			if strings.Contains(errw.String(), ": invalid argument\n") {
				t.Errorf("category glued to the message: %q", errw.String())
			}
		})
	}
}

// TestMissingVerb: a command made of verbs, called without one, shows its
// verbs on stderr and exits 2.
func TestMissingVerb(t *testing.T) {
	for _, cmd := range []string{"ctx", "files", "template", "tenant"} {
		var out, errw bytes.Buffer
		if code := Main(context.Background(), []string{cmd}, strings.NewReader(""), &out, &errw); code != 2 || out.Len() != 0 || !strings.Contains(errw.String(), "Available Commands") {
			t.Errorf("%s: exit %d, stdout %q, stderr %q", cmd, code, out.String(), errw.String())
		}
	}
}

// TestSingleDashLongFlags: flags written the Go way (-json, -state-dir=X)
// still work; one-letter flags and their clusters stay pflag's.
func TestSingleDashLongFlags(t *testing.T) {
	root := newRoot(IO{})
	for _, tc := range []struct{ in, want []string }{
		{[]string{"tenant", "create", "-json", "-data-dir", "d", "acme"}, []string{"tenant", "create", "--json", "--data-dir", "d", "acme"}},
		{[]string{"-version"}, []string{"--version"}},
		{[]string{"ctx", "ls", "-help"}, []string{"ctx", "ls", "--help"}},
		{[]string{"run", "-i", "-state-dir=/x"}, []string{"run", "-i", "--state-dir=/x"}},
		{[]string{"run", "-iv", "-lang", "bash", "echo", "-json"}, []string{"run", "-iv", "--lang", "bash", "echo", "-json"}},
		{[]string{"exec", "--lang", "-json", "-json", "x"}, []string{"exec", "--lang", "-json", "--json", "x"}},
		{[]string{"tenant", "create", "--", "-json"}, []string{"tenant", "create", "--", "-json"}},
		{[]string{"template", "build", "-t", "x", "-file", "D", "."}, []string{"template", "build", "-t", "x", "--file", "D", "."}},
		{[]string{"sanitize", "-nope"}, []string{"sanitize", "-nope"}},
	} {
		if got := normalizeArgs(root, tc.in); !slices.Equal(got, tc.want) {
			t.Errorf("%q: got %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestVersion(t *testing.T) {
	want := versionLine(buildVersion())
	if !strings.HasPrefix(want, "sandlot ") || !strings.Contains(want, fmt.Sprintf("schema %d)", store.SchemaVersion())) {
		t.Fatalf("version line %q", want)
	}
	for _, arg := range []string{"--version", "-version", "version"} {
		var out, errw bytes.Buffer
		if code := Main(context.Background(), []string{arg}, nil, &out, &errw); code != 0 || out.String() != want {
			t.Errorf("%s: exit %d, %q, want %q", arg, code, out.String(), want)
		}
	}
	var out, errw bytes.Buffer
	if code := Main(context.Background(), []string{"version", "-o", "json"}, nil, &out, &errw); code != 0 {
		t.Fatalf("version -o json: exit %d: %s", code, errw.String())
	}
	var got api.Version
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(buildVersion(), got); diff != "" {
		t.Errorf("version -o json (-want +got)\n%s", diff)
	}
}

// TestCompletionBash sources the bash script in a real bash (with the
// bash-completion package it needs, as users have it) and asks it for
// commands, verbs, flags and shells: the script asks the binary itself
// (__complete), so flags added later complete without a new script.
func TestCompletionBash(t *testing.T) {
	bash := testenv.RequireBinary(t, "bash")
	testenv.RequireFile(t, "/usr/share/bash-completion/bash_completion")
	bin := testenv.SandlotBinary(t)
	for _, tc := range []struct{ line, want string }{
		{"sandlot ct", "ctx"},
		{"sandlot ctx r", "rm"},
		{"sandlot tenant rot", "rotate-key"},
		{"sandlot exec --la", "--lang"},
		{"sandlot serve --context-t", "--context-ttl"},
		{"sandlot run --inter", "--interactive"},
		{"sandlot completion p", "powershell"},
	} {
		t.Run(tc.line, func(t *testing.T) {
			script := `source /usr/share/bash-completion/bash_completion
source <("$BIN" completion bash)
COMP_LINE="$LINE"; COMP_POINT=${#COMP_LINE}; COMP_WORDS=($LINE); COMP_WORDS[0]="$BIN"
COMP_CWORD=$((${#COMP_WORDS[@]}-1)); __start_sandlot; echo "${COMPREPLY[@]}"`
			cmd := exec.Command(bash, "-c", script)
			cmd.Env = append(os.Environ(), "BIN="+bin, "LINE="+tc.line)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr // compopt complains outside a real completion
			out, err := cmd.Output()
			if err != nil || strings.TrimSpace(string(out)) != tc.want {
				t.Fatalf("completed %q, want %q (%v, %s)", out, tc.want, err, stderr.String())
			}
		})
	}
}

// TestCompletionScripts: each shell's script is cobra's, calls back into
// the binary, and the call it makes answers with verbs and flags.
func TestCompletionScripts(t *testing.T) {
	for _, sh := range []string{"bash", "zsh", "fish", "powershell"} {
		var out, errw bytes.Buffer
		if code := Main(context.Background(), []string{"completion", sh}, nil, &out, &errw); code != 0 || !strings.Contains(out.String(), "__complete") {
			t.Errorf("completion %s: exit %d, %q %q", sh, code, out.String()[:min(200, out.Len())], errw.String())
		}
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"__complete", "files", ""}, "put"},
		{[]string{"__complete", "tenant", "create", "--guard"}, "--guard-mode"},
		{[]string{"__complete", "serve", "--pool-si"}, "--pool-sizes"},
	} {
		var out, errw bytes.Buffer
		if code := Main(context.Background(), tc.args, nil, &out, &errw); code != 0 || !strings.Contains(out.String(), tc.want) {
			t.Errorf("%q: exit %d, %q", tc.args, code, out.String())
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

// TestExamplesEverywhere: every command and verb shows an example in its
// help (cobra's help command aside), so a person or a model reading
// --help sees a command line that works.
func TestExamplesEverywhere(t *testing.T) {
	root := newRoot(IO{})
	if root.Example == "" {
		t.Error("sandlot: no example")
	}
	var walk func(c *cobra.Command)
	n := 0
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			if sub.Name() == "help" {
				continue
			}
			n++
			if strings.TrimSpace(sub.Example) == "" {
				t.Errorf("%s: no example", sub.CommandPath())
			}
			walk(sub)
		}
	}
	walk(root)
	if n < 30 {
		t.Fatalf("only %d commands walked", n)
	}
}

// TestOutputEverywhere: every command that prints takes -o json|yaml|wide
// and --json; those that do not print a value (a daemon, a terminal, a
// completion script, a command made of verbs) are listed here.
func TestOutputEverywhere(t *testing.T) {
	noValue := map[string]bool{"sandlot serve": true, "sandlot mcp": true, "sandlot shell": true, "sandlot completion": true}
	root := newRoot(IO{})
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			walk(sub)
			path := sub.CommandPath()
			if sub.Name() == "help" || sub.HasSubCommands() || noValue[path] || noValue[sub.Parent().CommandPath()] {
				continue
			}
			if sub.Flags().Lookup("output") == nil || sub.Flags().ShorthandLookup("o") == nil || sub.Flags().Lookup("json") == nil {
				t.Errorf("%s takes no -o/--output or --json", path)
			}
		}
	}
	walk(root)
	var out, errw bytes.Buffer
	if code := Main(context.Background(), []string{"version", "-o", "xml"}, nil, &out, &errw); code != 2 || !strings.Contains(errw.String(), "json, yaml and wide") {
		t.Errorf("-o xml: exit %d, %q", code, errw.String())
	}
}

// TestStructuredOutput: -o json and -o yaml print the same value, and
// --json is -o json.
func TestStructuredOutput(t *testing.T) {
	v := buildVersion()
	commit := ""
	if v.Commit != "" {
		commit = fmt.Sprintf("  \"commit\": %q,\n", v.Commit)
	}
	asJSON := fmt.Sprintf("{\n  \"version\": %q,\n%s  \"schemaVersion\": %d\n}\n", v.Version, commit, v.SchemaVersion)
	asYAML := "version: " + v.Version + "\n"
	if v.Commit != "" {
		asYAML += "commit: " + v.Commit + "\n"
	}
	asYAML += fmt.Sprintf("schemaVersion: %d\n", v.SchemaVersion)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"version", "-o", "json"}, asJSON},
		{[]string{"version", "--json"}, asJSON},
		{[]string{"version", "-o", "yaml"}, asYAML},
		{[]string{"version", "-oyaml"}, asYAML},
	} {
		var out, errw bytes.Buffer
		if code := Main(context.Background(), tc.args, nil, &out, &errw); code != 0 || out.String() != tc.want {
			t.Errorf("%q: exit %d, %q (stderr %q), want %q", tc.args, code, out.String(), errw.String(), tc.want)
		}
	}
}
