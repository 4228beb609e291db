package server_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/agent/internal/agenttest"
	"github.com/sandlot/sandlot/errdefs"
)

// TestSetEnv: env.set adds variables to the sandbox's environment after it
// started (a warm sandbox learning its context's identity): an exec and a
// kernel started later have them in their process environment, a kernel
// already running (prestarted) sees them in every run, and a run's own
// Env still wins. A bad name is refused.
func TestSetEnv(t *testing.T) {
	a := agenttest.Start(t, "--prestart", "python")
	c := a.Dial(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	run := func(lang, code string, env map[string]string) string {
		t.Helper()
		r, err := c.RunCode(ctx, agent.RunCodeParams{Language: lang, Code: code, Env: env}, nil)
		if err != nil || r.Error != nil {
			t.Fatalf("%s %q: %v %+v", lang, code, err, r)
		}
		return strings.TrimSpace(r.Stdout)
	}
	const py = "import os; print(os.environ.get('TENANT_ID', '-'), os.environ.get('PATH_ID', '-'))"
	if got := run(agent.Python, py, nil); got != "- -" {
		t.Fatalf("before env.set: %q", got)
	}
	if err := c.SetEnv(ctx, map[string]string{"TENANT_ID": "t1", "PATH_ID": "main"}); err != nil {
		t.Fatal(err)
	}
	if got := run(agent.Python, py, nil); got != "t1 main" {
		t.Fatalf("the kernel started before env.set: %q", got)
	}
	if got := run(agent.Python, "import subprocess; print(subprocess.run(['sh', '-c', 'echo $TENANT_ID'], capture_output=True, text=True).stdout)", nil); got != "t1" {
		t.Fatalf("a process the prestarted kernel starts: %q", got)
	}
	if got := run(agent.Python, py, map[string]string{"TENANT_ID": "mine"}); got != "mine main" {
		t.Fatalf("a run's own Env: %q", got)
	}
	if got := run(agent.JavaScript, "console.log(process.env.TENANT_ID)", nil); got != "t1" {
		t.Fatalf("a kernel started after env.set: %q", got)
	}
	r, err := c.Exec(ctx, agent.ExecParams{Shell: "echo $TENANT_ID $PATH_ID"}, nil)
	if err != nil || strings.TrimSpace(r.Stdout) != "t1 main" {
		t.Fatalf("exec after env.set: %v %+v", err, r)
	}
	// A second call adds and overrides.
	if err := c.SetEnv(ctx, map[string]string{"PATH_ID": "b1", "CONVERSATION_ID": "c1"}); err != nil {
		t.Fatal(err)
	}
	r, err = c.Exec(ctx, agent.ExecParams{Shell: "echo $TENANT_ID $CONVERSATION_ID $PATH_ID"}, nil)
	if err != nil || strings.TrimSpace(r.Stdout) != "t1 c1 b1" {
		t.Fatalf("exec after a second env.set: %v %+v", err, r)
	}
	if got := run(agent.Python, py, nil); got != "t1 b1" {
		t.Fatalf("the prestarted kernel after a second env.set: %q", got)
	}
	for _, bad := range []map[string]string{{"A=B": "x"}, {"": "x"}, {"1X": "x"}, {"OK": "nul\x00"}} {
		if err := c.SetEnv(ctx, bad); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Fatalf("env.set %q: %v, want invalid_argument", bad, err)
		}
	}
}
