package cli

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"io"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sandlot/sandlot/api"
	"github.com/sandlot/sandlot/image/debian/debiantest"
	"github.com/sandlot/sandlot/internal/testenv"
	"github.com/sandlot/sandlot/provider/local"
)

// TestMCPCommand drives `sandlot mcp` with the SDK client over its stdin
// and stdout: the protocol stays clean (the first-start key notice goes to
// stderr), the tools are listed, and a tool call reaches the manager.
func TestMCPCommand(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	inR, inW := io.Pipe()   // client -> command stdin
	outR, outW := io.Pipe() // command stdout -> client
	var stderr testenv.Buffer
	done := make(chan error, 1)
	go func() {
		dir := t.TempDir()
		// No default image: this test is about the protocol, not sandboxes
		// (TestMCPLocal runs them), and must not start a Debian build.
		err := Run(ctx, []string{"mcp", "--store", "memory:", "--data-dir", filepath.Join(dir, "data"), "--state-dir", filepath.Join(dir, "run"),
			"--default-image", "none"}, inR, outW, &stderr)
		outW.Close()
		done <- err
	}()

	client := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "1"}, nil)
	cs, err := client.Connect(ctx, &sdk.IOTransport{Reader: outR, Writer: inW}, nil)
	if err != nil {
		t.Fatalf("connect: %v (stderr: %s)", err, stderr.String())
	}
	lt, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range lt.Tools {
		names = append(names, tl.Name)
	}
	if got := strings.Join(names, ","); got != "bash,edit_file,fork_sandbox,glob,grep,list_files,read_file,run_analysis,run_code,suspend_sandbox,write_file" {
		t.Errorf("tools = %s", got)
	}
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "run_code", Arguments: map[string]any{"language": "python", "code": "1+1"}})
	if err != nil {
		t.Fatal(err)
	}
	// Whichever provider is wired, the call reaches it: a result, or a
	// tool error naming why sandboxes are unavailable.
	if res.IsError {
		var msg strings.Builder
		for _, c := range res.Content {
			if tc, ok := c.(*sdk.TextContent); ok {
				msg.WriteString(tc.Text)
			}
		}
		// No default image here: the template is not found, or no
		// sandbox can be made. Either way one sentence, without the id of
		// the context the call would have made.
		if m := msg.String(); !(strings.Contains(m, `template "default"`) || strings.Contains(m, "cannot")) || strings.Contains(m, "create sandbox for context") {
			t.Errorf("run_code tool error: %q", m)
		}
	}
	if !strings.Contains(stderr.String(), "API key") {
		t.Errorf("first-start key notice not on stderr: %q", stderr.String())
	}
	cs.Close()
	inW.Close()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("sandlot mcp: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("sandlot mcp did not stop when stdin closed")
	}
}

// TestMCPBinary runs the built sandlot binary as an MCP server over real
// stdio with the SDK's CommandTransport.
func TestMCPBinary(t *testing.T) {
	bin := testenv.Env(t, "SANDLOT_BIN")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dir := t.TempDir()
	cmd := exec.Command(bin, "mcp", "--store", "memory:", "--data-dir", filepath.Join(dir, "data"), "--state-dir", filepath.Join(dir, "run"),
		"--default-image", "none")
	var stderr testenv.Buffer
	cmd.Stderr = &stderr
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx, &sdk.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect: %v (stderr: %s)", err, stderr.String())
	}
	lt, err := cs.ListTools(ctx, nil)
	if err != nil || len(lt.Tools) != 11 {
		t.Fatalf("list tools: %v, %d tools (stderr: %s)", err, len(lt.Tools), stderr.String())
	}
	// The server names the build's version, as --version does.
	v, err := exec.Command(bin, "version", "-o", "json").Output()
	if err != nil {
		t.Fatal(err)
	}
	var built api.Version
	if err := json.Unmarshal(v, &built); err != nil {
		t.Fatal(err)
	}
	if got, want := cs.InitializeResult().ServerInfo.Version, built.Version; got != want || got == "devel" {
		t.Errorf("serverInfo.version %q, want %q (sandlot --version)", got, want)
	}
	if err := cs.Close(); err != nil {
		t.Errorf("close: %v (stderr: %s)", err, stderr.String())
	}
}

// TestMCPLocal runs `sandlot mcp` with the local provider: real sandboxes
// on the OCI runtime, on the default image as serve's are (not the host's
// /usr, as sessions ran before). State persists between calls, a secret
// comes back redacted, and the session's sandboxes end with it.
func TestMCPLocal(t *testing.T) {
	testenv.RequireOCIRuntime(t)
	testenv.Env(t, "SANDLOT_AGENT_BIN") // for the sandlot mcp subprocess
	bin := testenv.Env(t, "SANDLOT_BIN")
	debiantest.Default(t) // the default image, from the tests' shared store
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dir := t.TempDir()
	stateDir := filepath.Join(dir, "run")
	// Whatever happens, no sandbox of this test outlives it.
	t.Cleanup(func() {
		p, err := local.New(local.Config{StateDir: stateDir})
		if err != nil {
			t.Logf("cleanup: %v", err)
			return
		}
		ids, _ := p.List(context.Background())
		for _, id := range ids {
			p.Destroy(context.Background(), id)
		}
	})

	cmd := exec.Command(bin, "mcp", "--store", "memory:", "--data-dir", filepath.Join(dir, "data"), "--state-dir", stateDir, "--log-level", "info",
		"--images-dir", debiantest.StoreDir())
	var stderr testenv.Buffer
	cmd.Stderr = &stderr
	tr := &sdk.CommandTransport{Command: cmd, TerminateDuration: time.Minute}
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx, tr, nil)
	if err != nil {
		t.Fatalf("connect: %v\n%s", err, stderr.String())
	}
	call := func(code string) map[string]any {
		t.Helper()
		res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "run_code", Arguments: map[string]any{"language": "python", "code": code}})
		if err != nil {
			t.Fatalf("run_code: %v\n%s", err, stderr.String())
		}
		m, _ := res.StructuredContent.(map[string]any)
		if res.IsError || m == nil {
			t.Fatalf("run_code %q: isError=%v %+v\n%s", code, res.IsError, res.Content, stderr.String())
		}
		return m
	}
	// The host has an OCI runtime at /usr/bin/crun; the default image has
	// none. A session on the host's /usr would see it.
	if got := call("import os; print(os.path.exists('/usr/bin/crun'), os.path.exists('/etc/debian_version'))"); got["stdout"] != "False True\n" {
		t.Errorf("the session's sandbox is not on the default image: %q", got["stdout"])
	}
	call("x = 41")
	if got := call("print(x + 1)"); got["stdout"] != "42\n" {
		t.Errorf("state: %+v", got)
	}
	key := "sk-proj-" + randomKeyBody()
	if got := call("print(" + strconv.Quote(key[:20]) + " + " + strconv.Quote(key[20:]) + ")"); strings.Contains(got["stdout"].(string), key) ||
		!strings.Contains(got["stdout"].(string), "[REDACTED:") {
		t.Errorf("secret not redacted: %q", got["stdout"])
	}

	p, err := local.New(local.Config{StateDir: stateDir})
	if err != nil {
		t.Fatal(err)
	}
	if ids, err := p.List(ctx); err != nil || len(ids) != 1 {
		t.Errorf("sandboxes during the session: %v %v", ids, err)
	}
	if err := cs.Close(); err != nil {
		t.Errorf("close: %v\n%s", err, stderr.String())
	}
	if ids, err := p.List(ctx); err != nil || len(ids) != 0 {
		t.Errorf("sandboxes left after the session: %v %v\n%s", ids, err, stderr.String())
	}
}

// randomKeyBody is 48 random alphanumerics, so no real-looking secret is
// committed.
func randomKeyBody() string {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, 48)
	rand.Read(b)
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return string(b)
}
