package cli

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sandlot/sandlot/client"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/image/debian/debiantest"
	"github.com/sandlot/sandlot/internal/testenv"
	"github.com/sandlot/sandlot/provider/local"
)

// binDaemon is a `sandlot serve` process.
type binDaemon struct{ *testenv.Serve }

// startServeBinary starts bin's serve with args, which name its
// --data-dir. When the test ends, a daemon still running first ends the
// contexts of its data dir's key (endContexts), then stops, and a sandbox
// of any kind left in its --state-dir fails the test (ContextsEnd): a
// test that stops its daemon itself ends its contexts first, or says why
// it leaves them (a host lost, a restart that takes them back).
func startServeBinary(t *testing.T, bin string, env []string, args ...string) *binDaemon {
	t.Helper()
	// The default template from the tests' shared image store, built once.
	debiantest.Default(t)
	cmd := exec.Command(bin, append([]string{"serve", "--addr", "127.0.0.1:0", "--pool-size", "0", "--shutdown-timeout", "20s",
		"--images-dir", debiantest.StoreDir()}, args...)...)
	cmd.Env = env
	d := &binDaemon{testenv.StartServe(t, cmd, t.TempDir(), 2*time.Minute)}
	d.ContextsEnd = true
	data := testenv.ArgValue(args, "--data-dir")
	t.Cleanup(func() { // before StartServe's stop and check
		if !d.Exited() {
			d.endContexts(t, data)
		}
	})
	return d
}

// endContexts deletes every active context of the tenant of data's
// bootstrap key, until none is listed (bounded), pausing between rounds.
func (d *binDaemon) endContexts(t *testing.T, data string) {
	t.Helper()
	key, err := os.ReadFile(filepath.Join(data, keyFile))
	if err != nil {
		t.Errorf("end the daemon's contexts: %v", err)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := client.New(d.URL, client.WithAPIKey(strings.TrimSpace(string(key))))
	pause := 20 * time.Millisecond
	for {
		l, err := c.ListContexts(ctx, client.ListOptions{Status: []string{"active"}, Limit: 1000})
		if err != nil {
			t.Errorf("end the daemon's contexts: %v", err)
			return
		}
		if len(l.Contexts) == 0 {
			return
		}
		for _, r := range l.Contexts {
			if err := c.DeleteContext(ctx, r.ID); err != nil && !errors.Is(err, errdefs.ErrNotFound) {
				t.Errorf("end context %s: %v", r.ID, err)
				return
			}
		}
		// One still listed after its delete (ended meanwhile by another
		// path, or not yet shown as ended) is looked at again a little
		// later, not at once.
		select {
		case <-ctx.Done():
			t.Errorf("end the daemon's contexts: %d still active: %v", len(l.Contexts), ctx.Err())
			return
		case <-time.After(pause):
		}
		pause = min(2*pause, time.Second)
	}
}

func (d *binDaemon) stop(t *testing.T) { d.Stop(t, time.Minute) }

// TestServeAndMCPOneDataDir runs the binaries the way the docs suggest: a
// `sandlot serve` and `sandlot mcp` sessions on one data dir (one SQLite
// store), each with its own state dir. Neither's start, nor a restart of
// serve, ends the other's contexts; a call through serve for the MCP
// session's conversation is refused with 503 naming the session's node;
// a new MCP session on the same state dir is the same node and finds its
// conversation's state.
func TestServeAndMCPOneDataDir(t *testing.T) {
	testenv.RequireOCIRuntime(t)
	bin := testenv.SandlotBinary(t)
	env := append(os.Environ(), "SANDLOT_AGENT_BIN="+testenv.AgentBinary(t), envNode+"=")
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	data := t.TempDir()
	var states []string
	for range 2 {
		dir, err := os.MkdirTemp("", "sln-") // short: socket paths are bounded
		if err != nil {
			t.Fatal(err)
		}
		states = append(states, dir)
	}
	t.Cleanup(func() { // after serve's check (startServeBinary)
		// The MCP sessions leave their conversation's context by design (a
		// new session takes it back), and no call ends it: its sandbox goes
		// through the provider.
		if p, err := local.New(local.Config{StateDir: states[1], AgentPath: testenv.AgentBinary(t)}); err == nil {
			ids, _ := p.List(context.Background())
			for _, id := range ids {
				p.Destroy(context.Background(), id)
			}
		}
		testenv.CheckNoSandboxes(t, states[1], "sandlot mcp")
		for _, dir := range states {
			os.RemoveAll(dir)
		}
	})
	serveArgs := []string{"--data-dir", data, "--state-dir", states[0]}

	srv := startServeBinary(t, bin, env, serveArgs...)
	key, err := os.ReadFile(filepath.Join(data, keyFile))
	if err != nil {
		t.Fatal(err)
	}
	api := func(d *binDaemon) *client.Client {
		return client.New(d.URL, client.WithAPIKey(strings.TrimSpace(string(key))))
	}
	run := func(c *client.Client, conv, code string) (string, error) {
		res, err := c.RunCode(ctx, client.RunCodeRequest{Target: client.Target{ConversationID: conv}, Language: "python", Code: code})
		if err != nil {
			return "", err
		}
		if res.Error != nil {
			return res.Error.Name, nil
		}
		return res.Stdout, nil
	}
	mustRun := func(c *client.Client, conv, code, want string) {
		t.Helper()
		if got, err := run(c, conv, code); err != nil || got != want {
			t.Fatalf("serve: %s in %s = %q, %v; want %q\n%s", code, conv, got, err, want, srv.Log())
		}
	}
	mustRun(api(srv), "c1", "x = 41", "")

	session := func() (*sdk.ClientSession, *testenv.Buffer) {
		t.Helper()
		cmd := exec.Command(bin, "mcp", "--data-dir", data, "--state-dir", states[1], "--conversation", "m1", "--log-level", "info",
			"--images-dir", debiantest.StoreDir())
		cmd.Env = env
		var stderr testenv.Buffer
		cmd.Stderr = &stderr
		cs, err := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx,
			&sdk.CommandTransport{Command: cmd, TerminateDuration: time.Minute}, nil)
		if err != nil {
			t.Fatalf("mcp: %v\n%s", err, stderr.String())
		}
		return cs, &stderr
	}
	mcpRun := func(cs *sdk.ClientSession, stderr *testenv.Buffer, code, want string) {
		t.Helper()
		res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "run_code", Arguments: map[string]any{"language": "python", "code": code}})
		if err != nil {
			t.Fatalf("mcp run_code: %v\n%s", err, stderr.String())
		}
		m, _ := res.StructuredContent.(map[string]any)
		got, _ := m["stdout"].(string)
		if e, ok := m["error"].(map[string]any); ok {
			got, _ = e["name"].(string)
		}
		if res.IsError || got != want {
			t.Fatalf("mcp: %s = %q (isError %v, %+v); want %q\n%s", code, got, res.IsError, res.Content, want, stderr.String())
		}
	}
	start := time.Now()
	step := func(what string) { t.Logf("%6.1fs %s", time.Since(start).Seconds(), what) }
	cs, stderr := session()
	step("mcp started")
	mcpRun(cs, stderr, "y = 5", "")
	step("mcp ran")
	// The session's start reconciled the shared store: serve's context is
	// intact, over two calls (the first would run even on a record ended
	// under it).
	mustRun(api(srv), "c1", "print(x + 1)", "42\n")
	mustRun(api(srv), "c1", "print(x)", "41\n")

	// serve restarts beside the live session: its reconcile leaves the
	// session's context alone, and it reattaches its own.
	srv.stop(t)
	step("serve stopped")
	srv = startServeBinary(t, bin, env, serveArgs...)
	step("serve restarted")
	mcpRun(cs, stderr, "print(y)", "5\n")
	mustRun(api(srv), "c1", "print(x)", "41\n")

	// The session's conversation through serve: refused, naming the owner.
	_, err = run(api(srv), "m1", "y = 0")
	if !errors.Is(err, errdefs.ErrUnavailable) || !strings.Contains(err.Error(), "is served by sandlot node") {
		t.Fatalf("serve: a call for the MCP session's conversation: %v; want unavailable naming the node", err)
	}
	mcpRun(cs, stderr, "print(y)", "5\n")

	// A new session on the same state dir is the same node: it finds y.
	if err := cs.Close(); err != nil {
		t.Fatalf("mcp close: %v\n%s", err, stderr.String())
	}
	step("mcp closed")
	cs, stderr = session()
	step("mcp restarted")
	defer cs.Close()
	mcpRun(cs, stderr, "print(y)", "5\n")
	mustRun(api(srv), "c1", "print(x)", "41\n")
}
