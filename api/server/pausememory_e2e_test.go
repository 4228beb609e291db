package server_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sandlot/sandlot/api"
	"github.com/sandlot/sandlot/client"
	"github.com/sandlot/sandlot/internal/testenv"
)

// TestE2BPauseMemoryServe: E2B's pause() with its memory (the SDK's
// default) on runsc, against `sandlot serve --runtime runsc`: the sandbox
// is checkpointed to disk, not frozen, so no process of it is left on the
// host (a frozen one kept its sentry and its memory); it shows as paused
// (info, the paused list), and connect restores it: x = 41 before, x + 1
// answers 42 after. The same for the pause at the timeout of a sandbox
// created with onTimeout: 'pause'. Before, pause froze it and its
// processes stayed. /v1's suspend and the suspend_sandbox tool answer
// memory: true there.
func TestE2BPauseMemoryServe(t *testing.T) {
	runtimePreconditions(t)
	testenv.RequireBinary(t, "runsc")
	dir := t.TempDir()
	d := startDaemon(t, dir, "--runtime", "runsc", "--image-gc-interval", "0")
	defer d.stop(t)
	defer d.cleanup(t, d.key)
	ctx := context.Background()
	e2b := func(method, path, body string) (int, string) {
		t.Helper()
		return raw(t, method, d.URL+path, d.key, body, "Content-Type", "application/json")
	}
	code, body := e2b("POST", "/sandboxes", `{"timeout":300}`)
	var sb struct{ SandboxID string }
	if json.Unmarshal([]byte(body), &sb); code != 201 || sb.SandboxID == "" {
		t.Fatalf("create: %d %s", code, body)
	}
	run := func(src string) string {
		t.Helper()
		req, _ := json.Marshal(map[string]string{"code": src, "language": "python"})
		code, body := raw(t, "POST", d.URL+"/execute", d.key, string(req), "Content-Type", "application/json",
			"E2b-Sandbox-Id", sb.SandboxID, "E2b-Sandbox-Port", "49999")
		if code != 200 {
			t.Fatalf("execute %q: %d %s", src, code, body)
		}
		return body
	}
	if out := run("x = 41\nx + 1"); !strings.Contains(out, `"text":"42"`) {
		t.Fatalf("x + 1 before the pause: %s", out)
	}
	rec, err := d.client(d.key).GetContext(ctx, sb.SandboxID)
	if err != nil || rec.SandboxID == "" {
		t.Fatalf("the sandbox's context: %+v %v", rec, err)
	}
	host := rec.SandboxID
	n, running := hostMemory(t, host)
	if n == 0 {
		t.Fatalf("no host process of the running sandbox %s: the probe sees nothing", host)
	}

	start := time.Now()
	if code, body := e2b("POST", "/sandboxes/"+sb.SandboxID+"/pause", `{}`); code != 204 {
		t.Fatalf("pause: %d %s", code, body)
	}
	paused := time.Since(start)
	n, held := hostMemory(t, host)
	t.Logf("pause %v; host RSS of the sandbox's processes running %d KiB, paused %d KiB (%d processes)", paused, running>>10, held>>10, n)
	if n != 0 {
		t.Fatalf("%d host processes of the paused sandbox %s: its memory is still held", n, host)
	}
	if rec, err := d.client(d.key).GetContext(ctx, sb.SandboxID); err != nil || !rec.Suspended {
		t.Fatalf("the paused sandbox's context: %+v %v, want suspended (checkpointed)", rec, err)
	}
	if code, body := e2b("GET", "/sandboxes/"+sb.SandboxID, ""); code != 200 || !strings.Contains(body, `"state":"paused"`) {
		t.Fatalf("info of the paused sandbox: %d %s", code, body)
	}
	if code, body := e2b("GET", "/v2/sandboxes?state=paused", ""); code != 200 || !strings.Contains(body, sb.SandboxID) {
		t.Fatalf("the paused list: %d %s", code, body)
	}
	if code, body := e2b("POST", "/sandboxes/"+sb.SandboxID+"/pause", `{}`); code != 409 {
		t.Fatalf("a second pause: %d %s, want 409", code, body)
	}

	start = time.Now()
	if code, body := e2b("POST", "/sandboxes/"+sb.SandboxID+"/connect", `{"timeout":300}`); code != 201 {
		t.Fatalf("connect: %d %s", code, body)
	}
	connected := time.Since(start)
	if out := run("x + 1"); !strings.Contains(out, `"text":"42"`) {
		t.Fatalf("x + 1 after pause and connect: %s, want 42 (the kernel restored)", out)
	}
	t.Logf("connect %v; connect to the first result %v", connected, time.Since(start))
	if code, body := e2b("DELETE", "/sandboxes/"+sb.SandboxID, ""); code != 204 {
		t.Fatalf("kill: %d %s", code, body)
	}

	// onTimeout: 'pause' (autoPause) keeps the memory the same way.
	code, body = e2b("POST", "/sandboxes", `{"timeout":300,"autoPause":true}`)
	if json.Unmarshal([]byte(body), &sb); code != 201 || sb.SandboxID == "" {
		t.Fatalf("create with autoPause: %d %s", code, body)
	}
	if out := run("x = 41"); strings.Contains(out, `"error"`) {
		t.Fatalf("x = 41: %s", out)
	}
	rec, err = d.client(d.key).GetContext(ctx, sb.SandboxID)
	if err != nil {
		t.Fatal(err)
	}
	host = rec.SandboxID
	if code, body := e2b("POST", "/sandboxes/"+sb.SandboxID+"/timeout", `{"timeout":1}`); code != 204 {
		t.Fatalf("timeout 1 s: %d %s", code, body)
	}
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		code, body := e2b("GET", "/sandboxes/"+sb.SandboxID, "")
		if code == 200 && strings.Contains(body, `"state":"paused"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not paused at its timeout: %d %s", code, body)
		}
	}
	if n := hostProcesses(t, host); n != 0 {
		t.Fatalf("%d host processes of the sandbox paused at its timeout", n)
	}
	if code, body := e2b("POST", "/sandboxes/"+sb.SandboxID+"/connect", `{"timeout":300}`); code != 201 {
		t.Fatalf("connect after the timeout's pause: %d %s", code, body)
	}
	if out := run("x + 1"); !strings.Contains(out, `"text":"42"`) {
		t.Fatalf("x + 1 after the timeout's pause and connect: %s, want 42", out)
	}

	// /v1's suspend says the memory was kept (and GET says so while it
	// lasts); the next call restores it.
	a := d.client(d.key)
	py := func(src string) *api.RunCodeResult {
		t.Helper()
		r, err := a.RunCode(ctx, client.RunCodeRequest{Target: client.Target{ConversationID: "v1mem"}, Language: "python", Code: src})
		if err != nil {
			t.Fatalf("run_code %q: %v", src, err)
		}
		return r
	}
	src := py("y = 41")
	c, err := a.Suspend(ctx, src.ContextID)
	if err != nil || !c.Suspended || !c.Memory {
		t.Fatalf("/v1 suspend on runsc: %+v %v, want suspended with its memory", c, err)
	}
	if c, err := a.GetContext(ctx, src.ContextID); err != nil || !c.Memory {
		t.Fatalf("/v1 context suspended with its memory: %+v %v", c, err)
	}
	if r := py("y + 1"); len(r.Results) == 0 || r.Results[0].Text != "42" || !r.Restored {
		t.Fatalf("y + 1 after /v1's suspend: %+v, want 42, restored", r)
	}
	if c, err := a.GetContext(ctx, src.ContextID); err != nil || c.Memory || c.Suspended {
		t.Fatalf("/v1 context after its wake: %+v %v, want neither suspended nor memory", c, err)
	}

	// The MCP tool says so too, rather than that the memory was freed.
	tool := client.Target{ConversationID: "toolmem"}
	if r, err := a.RunCode(ctx, client.RunCodeRequest{Target: tool, Language: "python", Code: "z = 41"}); err != nil || !r.Success {
		t.Fatalf("z = 41: %+v %v", r, err)
	}
	var sus struct {
		Memory bool
		Notice string
	}
	if err := a.Tool(ctx, "suspend_sandbox", tool, map[string]any{}, &sus); err != nil || !sus.Memory || !strings.Contains(sus.Notice, "with its memory") {
		t.Fatalf("suspend_sandbox on runsc: %+v %v, want memory kept", sus, err)
	}
	if r, err := a.RunCode(ctx, client.RunCodeRequest{Target: tool, Language: "python", Code: "z + 1"}); err != nil || len(r.Results) == 0 || r.Results[0].Text != "42" {
		t.Fatalf("z + 1 after suspend_sandbox: %+v %v, want 42", r, err)
	}
}

// hostProcesses counts the host processes of sandbox id: those in its
// cgroup or naming it in their arguments (runsc's sentry and gofer).
func hostProcesses(t *testing.T, id string) int {
	n, _ := hostMemory(t, id)
	return n
}

// hostMemory returns the host processes of sandbox id and the sum of
// their resident memory.
func hostMemory(t *testing.T, id string) (int, int64) {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	n, rss := 0, int64(0)
	for _, p := range ents {
		dir := filepath.Join("/proc", p.Name())
		cg, err := os.ReadFile(filepath.Join(dir, "cgroup"))
		if err != nil {
			continue
		}
		args, _ := os.ReadFile(filepath.Join(dir, "cmdline"))
		if !strings.Contains(string(cg), "/"+id+"\n") && !strings.Contains(string(args), id) {
			continue
		}
		n++
		st, _ := os.ReadFile(filepath.Join(dir, "status"))
		for _, l := range strings.Split(string(st), "\n") {
			if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmRSS:" {
				kb, _ := strconv.ParseInt(f[1], 10, 64)
				rss += kb << 10
			}
		}
	}
	return n, rss
}
