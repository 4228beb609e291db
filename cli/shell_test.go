package cli

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/sandlot/sandlot/client"
	"github.com/sandlot/sandlot/internal/testenv"
)

// TestShellTerminal: `sandlot shell` on a real terminal against a real
// daemon and sandbox: the remote bash gets the local terminal's size and
// follows a resize, keeps its state between lines, takes Ctrl-C as a key
// (raw mode), shows a secret only redacted (the terminal's output passes
// the guard), works in the conversation's context (a file it writes is
// there for run_code afterwards), and its exit status is the command's.
func TestShellTerminal(t *testing.T) {
	testenv.RequireOCIRuntime(t)
	bin := testenv.SandlotBinary(t)
	env := append(os.Environ(), "SANDLOT_AGENT_BIN="+testenv.AgentBinary(t), envNode+"=", envClientConfig+"="+filepath.Join(t.TempDir(), "none.yaml"))
	data := t.TempDir()
	state, err := os.MkdirTemp("", "sls-") // short: socket paths are bounded
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(state) }) // after the daemon's check (startServeBinary)
	srv := startServeBinary(t, bin, env, "--data-dir", data, "--state-dir", state)
	b, err := os.ReadFile(filepath.Join(data, keyFile))
	if err != nil {
		t.Fatal(err)
	}
	key := strings.TrimSpace(string(b))

	s := startOnPTY(t, env, "shell", "--url", srv.URL, "--api-key", key, "--conversation", "term")
	s.expect("$ ")
	s.send("stty size\r")
	s.expect("40 120")
	s.expect("$ ")
	if err := pty.Setsize(s.ptmx, &pty.Winsize{Rows: 50, Cols: 150}); err != nil {
		t.Fatal(err)
	}
	// The resize reaches the remote terminal asynchronously (SIGWINCH
	// here, a line to the daemon, the agent's ioctl): ask until it shows.
	deadline := time.Now().Add(30 * time.Second)
	for {
		s.send("stty size\r")
		s.expect("$ ")
		if strings.Contains(s.out.String(), "50 150") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the remote terminal never became 50x150:\n%s", s.out.String())
		}
		time.Sleep(200 * time.Millisecond)
	}

	s.send("cd /tmp; X=41\r")
	s.expect("$ ")
	s.send("echo $((X+1)) $PWD\r")
	s.expect("42 /tmp")
	s.expect("$ ")

	secret := "sk-proj-" + randomKeyBody()
	s.send("printf '%s%s\\n' " + secret[:12] + " " + secret[12:] + "\r")
	s.expect("[REDACTED:")
	s.expect("$ ")
	if strings.Contains(s.out.String(), secret) {
		t.Fatalf("the terminal showed the secret:\n%s", s.out.String())
	}

	s.send("sleep 100\r")
	time.Sleep(500 * time.Millisecond)
	s.send("\x03") // a key in raw mode: the remote bash's SIGINT
	s.expect("$ ")
	s.send("echo shell-was-here > /home/user/mark.txt; echo after-interrupt\r")
	s.expect("after-interrupt")
	s.expect("$ ")
	s.send("exit 3\r")
	if code := s.exit(); code != 3 {
		t.Fatalf("exit status %d, want 3; terminal:\n%s", code, s.out.String())
	}

	// The shell worked in the conversation's context.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := client.New(srv.URL, client.WithAPIKey(key)).RunCode(ctx, client.RunCodeRequest{
		Target: client.Target{ConversationID: "term"}, Language: "python", Code: "print(open('/home/user/mark.txt').read(), end='')"})
	if err != nil || res.Stdout != "shell-was-here\n" {
		t.Fatalf("run_code after the shell: %+v %v", res, err)
	}

	// Without a terminal: piped lines run and the session ends with the
	// input, its status the shell's; an empty input ends it at once. Before,
	// the end of input reached bash before its line editor and was lost:
	// the command never returned.
	for _, c := range []struct {
		in   string
		want string
		code int
	}{{"echo piped-$((6*7))\nexit 3\n", "piped-42", 3}, {"", "", 0}} {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		cmd := exec.CommandContext(ctx, bin, "shell", "--url", srv.URL, "--api-key", key, "--conversation", "term")
		cmd.Env, cmd.Stdin = env, strings.NewReader(c.in)
		out, err := cmd.Output()
		timedOut := ctx.Err() != nil
		cancel()
		if timedOut {
			t.Fatalf("shell with input %q did not end: %s", c.in, out)
		}
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(out), c.want) || (c.code != 0) != (code != 0) {
			t.Errorf("shell with input %q: exit %d, output %q; want %q and exit %d", c.in, code, out, c.want, c.code)
		}
	}
}
