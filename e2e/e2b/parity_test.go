package e2b

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/provider/e2b"
)

// TestParityWithLocal runs the same calls on a sandbox of the e2b provider
// (pointed at a second sandlot's E2B surface) and on a local sandbox, and
// wants the same answers case by case: a sh one-shot's output, exit codes
// (including a command that is not found and a signal), stdin, env and
// cwd, and a timeout that stops the code (the process is gone afterwards,
// not only the call).
func TestParityWithLocal(t *testing.T) {
	t.Parallel()
	url := server(t, sandboxProvider(t))
	remote := e2b.New(e2b.Config{APIKey: apiKey, APIURL: url, SandboxURL: url, ConnectTimeout: 5 * time.Second})
	local := sandboxProvider(t)
	ctx := context.Background()
	sandboxes := map[string]contexts.Sandbox{}
	for name, p := range map[string]contexts.Provider{"e2b": remote, "local": local} {
		sb, err := p.Create(ctx, contexts.Spec{})
		if err != nil {
			t.Fatalf("%s create: %v", name, err)
		}
		t.Cleanup(func() { sb.Close(); p.Destroy(context.Background(), sb.ID()) })
		sandboxes[name] = sb
	}

	type answer struct {
		stdout, stderr, signal string
		exit                   int
		timedOut               bool
	}
	cases := []struct {
		name string
		p    agent.ExecParams
	}{
		{"sh one-shot", agent.ExecParams{Shell: "echo out; echo err >&2"}},
		{"exit code", agent.ExecParams{Shell: "exit 3"}},
		{"not found", agent.ExecParams{Shell: "no-such-command-here 2>/dev/null"}},
		{"argv", agent.ExecParams{Argv: []string{"printf", "%s|", "a b", "c"}}},
		{"stdin", agent.ExecParams{Shell: "tr a-z A-Z", Stdin: "quiet\n"}},
		{"env", agent.ExecParams{Shell: `echo "$GREETING"`, Env: map[string]string{"GREETING": "hello"}}},
		{"cwd", agent.ExecParams{Shell: "pwd", Cwd: "/tmp"}},
		{"pipeline status", agent.ExecParams{Shell: "false | true; echo $?"}},
		{"timeout", agent.ExecParams{Shell: "echo started; sleep 30; echo never", TimeoutMs: 1000}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := map[string]answer{}
			for name, sb := range sandboxes {
				r, err := sb.Exec(ctx, c.p, nil)
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				got[name] = answer{r.Stdout, r.Stderr, r.Signal, r.ExitCode, r.TimedOut}
			}
			if got["e2b"] != got["local"] {
				t.Fatalf("e2b %+v, local %+v", got["e2b"], got["local"])
			}
		})
	}

	// The timed-out code is stopped in both, not left running.
	for name, sb := range sandboxes {
		r, err := sb.Exec(ctx, agent.ExecParams{Shell: "ps -eo args | grep -c '^sleep 30' || true"}, nil)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if strings.TrimSpace(r.Stdout) != "0" {
			t.Errorf("%s: the timed-out command still runs (%q sleeps)", name, r.Stdout)
		}
	}
}
