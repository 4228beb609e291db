package cli

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandlot/sandlot/daemon"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/internal/testenv"
)

// lrunNeedAgent makes sure $SANDLOT_AGENT_BIN names a static agent,
// building one when make test has not.
func lrunNeedAgent(t *testing.T) {
	t.Helper()
	testenv.RequireRoot(t)
	testenv.RequireBinary(t, "crun")
	testenv.RequireBinary(t, "runc")
	t.Setenv("SANDLOT_AGENT_BIN", testenv.AgentBinary(t))
}

func TestRunCommand(t *testing.T) {
	lrunNeedAgent(t)
	state := t.TempDir()
	src := filepath.Join(t.TempDir(), "x.js")
	os.WriteFile(src, []byte("const a = 20;\na * 2"), 0o644)
	tests := []struct {
		name    string
		args    []string
		stdin   string
		wantOut string
		wantErr error
	}{
		{"python", []string{"print('hi'); 1+1"}, "", "hi\n2\n", nil},
		{"bash exit", []string{"--lang", "bash", "echo out; exit 3"}, "", "out\n", errdefs.ErrFailedPrecondition},
		{"sh exit", []string{"--lang", "sh", "exit 42"}, "", "", errdefs.ErrFailedPrecondition},
		{"python error", []string{"1/0"}, "", "", errdefs.ErrFailedPrecondition},
		{"file js", []string{"--file", src}, "", "40\n", nil},
		{"typescript", []string{"--lang", "typescript", "const n: number = 21;\nconsole.log('ts'); n * 2"}, "", "ts\n42\n", nil},
		{"runc", []string{"--runtime", "runc", "--lang", "sh", "id -u"}, "", "1000\n", nil},
		{"repl keeps state", []string{"-i"}, "x = 41\nx += 1\nx\n", "42\n", nil},
		{"bad lang", []string{"--lang", "cobol", "x"}, "", "", errdefs.ErrInvalidArgument},
		{"no code", nil, "", "", errdefs.ErrInvalidArgument},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			args := append([]string{"run", "--state-dir", state}, tc.args...)
			err := Run(context.Background(), args, strings.NewReader(tc.stdin), &out, &errb)
			if (tc.wantErr == nil) != (err == nil) || (tc.wantErr != nil && !errors.Is(err, tc.wantErr)) {
				t.Fatalf("err = %v, want %v; stderr: %s", err, tc.wantErr, errb.String())
			}
			// The code's own exit status: bash's, or 1 when it raised.
			wantStatus := map[string]int{"bash exit": 3, "sh exit": 42, "python error": 1}[tc.name]
			if tc.wantErr != nil && wantStatus != 0 && exitStatus(err) != wantStatus {
				t.Errorf("exit status %d, want %d", exitStatus(err), wantStatus)
			}
			if out.String() != tc.wantOut {
				t.Errorf("stdout = %q, want %q; stderr: %s", out.String(), tc.wantOut, errb.String())
			}
		})
	}
	// Every sandbox was ephemeral.
	for _, d := range []string{"sandboxes", "bundles"} {
		if ents, _ := os.ReadDir(filepath.Join(state, d)); len(ents) != 0 {
			t.Errorf("%s left in %s", d, state)
		}
	}
}

// TestKeptSandboxes: a sandbox `run --keep` leaves is listed by ps, used
// again by --sandbox, and destroyed by prune; prune of an unknown id is
// not_found.
func TestKeptSandboxes(t *testing.T) {
	lrunNeedAgent(t)
	state := t.TempDir()
	var out, errb bytes.Buffer
	if err := Run(context.Background(), []string{"run", "--state-dir", state, "--keep", "x = 7"}, strings.NewReader(""), &out, &errb); err != nil {
		t.Fatalf("run --keep: %v; %s", err, errb.String())
	}
	_, id, ok := strings.Cut(errb.String(), "sandbox: ")
	id, _, _ = strings.Cut(id, " ")
	if !ok || id == "" {
		t.Fatalf("no sandbox id in %q", errb.String())
	}
	ps := func() string {
		var out, errb bytes.Buffer
		if err := Run(context.Background(), []string{"ps", "--state-dir", state}, nil, &out, &errb); err != nil {
			t.Fatalf("ps: %v; %s", err, errb.String())
		}
		return out.String()
	}
	if got := ps(); !strings.Contains(got, id) {
		t.Fatalf("ps does not list %s:\n%s", id, got)
	}
	out.Reset()
	if err := Run(context.Background(), []string{"run", "--state-dir", state, "--sandbox", id, "x"}, strings.NewReader(""), &out, &errb); err != nil || out.String() != "7\n" {
		t.Fatalf("run --sandbox: %q %v", out.String(), err)
	}
	// While a daemon holds the state dir, prune refuses and destroys nothing.
	release, err := daemon.LockStateDir(state)
	if err != nil {
		t.Fatal(err)
	}
	err = Run(context.Background(), []string{"prune", "--state-dir", state}, nil, &out, &errb)
	release()
	if !errors.Is(err, errdefs.ErrFailedPrecondition) || !strings.Contains(err.Error(), "in use by another sandlot daemon") {
		t.Fatalf("prune of a state dir a daemon holds: %v", err)
	}
	if got := ps(); !strings.Contains(got, id) {
		t.Fatalf("prune destroyed %s in a state dir a daemon holds:\n%s", id, got)
	}
	if err := Run(context.Background(), []string{"prune", "--state-dir", state, "nope"}, nil, &out, &errb); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("prune of an unknown id: %v", err)
	}
	out.Reset()
	if err := Run(context.Background(), []string{"prune", "--state-dir", state}, nil, &out, &errb); err != nil || !strings.Contains(out.String(), "destroyed "+id) {
		t.Fatalf("prune: %q %v", out.String(), err)
	}
	if got := ps(); strings.Contains(got, id) {
		t.Fatalf("ps still lists %s after prune:\n%s", id, got)
	}
}
