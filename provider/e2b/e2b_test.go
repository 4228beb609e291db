package e2b_test

import (
	"context"
	"errors"
	"net"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/api/e2bcompat"
	"github.com/sandlot/sandlot/api/e2bcompat/e2bcompattest"
	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/provider/e2b"
)

const testKey = "e2b_1111111111111111111111111111111111111111"

func TestMissingKey(t *testing.T) {
	p := e2b.New(e2b.Config{})
	_, err := p.Create(context.Background(), contexts.Spec{})
	if err == nil || err.Error() != "E2B API key not configured" {
		t.Fatalf("err = %v, want exactly %q", err, "E2B API key not configured")
	}
	if !errors.Is(err, errdefs.ErrUnavailable) {
		t.Fatalf("err %v is not unavailable", err)
	}
}

func TestClosedPort(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	p := e2b.New(e2b.Config{APIKey: testKey, APIURL: "http://" + addr, ConnectTimeout: time.Second})
	start := time.Now()
	_, err = p.Create(context.Background(), contexts.Spec{})
	if !errors.Is(err, errdefs.ErrUnavailable) {
		t.Fatalf("err = %v, want unavailable", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("closed port took %v", d)
	}
	t.Logf("closed port: %v after %v", err, time.Since(start))
}

// A server that accepts TCP connections and never answers: Create must give
// up within ConnectTimeout.
func TestBlackholedServer(t *testing.T) {
	const bound = 400 * time.Millisecond
	p := e2b.New(e2b.Config{APIKey: testKey, APIURL: blackhole(t), ConnectTimeout: bound})
	start := time.Now()
	_, err := p.Create(context.Background(), contexts.Spec{})
	took := time.Since(start)
	if !errors.Is(err, errdefs.ErrUnavailable) {
		t.Fatalf("err = %v, want unavailable", err)
	}
	if took < bound || took > bound+2*time.Second {
		t.Fatalf("blackholed server: gave up after %v, bound %v", took, bound)
	}
	t.Logf("blackholed: %v after %v", err, took)
}

func TestRejectedKey(t *testing.T) {
	srv := sandlotE2B(t)
	p := e2b.New(e2b.Config{APIKey: "e2b_bad", APIURL: srv.URL, SandboxURL: srv.URL})
	_, err := p.Create(context.Background(), contexts.Spec{})
	if !errors.Is(err, errdefs.ErrUnavailable) || !strings.Contains(err.Error(), "401") {
		t.Fatalf("err = %v", err)
	}
}

// sandlotE2B serves sandlot's E2B surface over the real manager (memory
// store, e2bcompattest's fake sandboxes).
func sandlotE2B(t *testing.T) *httptest.Server {
	return e2bcompattest.NewEnv(t, e2bcompattest.Options{Config: e2bcompat.Config{Tenants: e2bcompattest.Tenants{testKey: "tenant-1"}}}).Srv
}

// The provider against sandlot's own E2B handler over real HTTP (the real
// manager on fake sandboxes behind it; the real chain is in the chain
// tests).
func TestProviderAgainstSandlotHandler(t *testing.T) {
	srv := sandlotE2B(t)
	p := e2b.New(e2b.Config{APIKey: testKey, APIURL: srv.URL, SandboxURL: srv.URL, ConnectTimeout: 2 * time.Second, ExtendEvery: time.Millisecond})
	ctx := context.Background()
	sb, err := p.Create(ctx, contexts.Spec{TTL: time.Minute, Env: map[string]string{"GREETING": "hi"}, Labels: map[string]string{"contextId": "c1"}})
	if err != nil {
		t.Fatal(err)
	}
	testSandbox(t, sb)
	// A warm sandbox learns its context's identity after create: the
	// provider sends it with every process, under the call's own env.
	if err := sb.(interface {
		SetEnv(context.Context, map[string]string) error
	}).SetEnv(ctx, map[string]string{"TENANT_ID": "t9", "GREETING": "hello"}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		env  map[string]string
		want string
	}{{nil, "t9-hello\n"}, {map[string]string{"TENANT_ID": "own"}, "own-hello\n"}} {
		if res, err := sb.Exec(ctx, agent.ExecParams{Shell: "echo $TENANT_ID-$GREETING", Env: c.env}, nil); err != nil || res.Stdout != c.want {
			t.Fatalf("exec after SetEnv (env %v): %+v %v, want %q", c.env, res, err, c.want)
		}
	}
	ids, err := p.List(ctx)
	if err != nil || !slices.Contains(ids, sb.ID()) {
		t.Fatalf("list %v %v", ids, err)
	}
	again, err := p.Attach(ctx, sb.ID())
	if err != nil {
		t.Fatal(err)
	}
	if err := again.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	if err := p.Destroy(ctx, sb.ID()); err != nil {
		t.Fatal(err)
	}
	if err := p.Destroy(ctx, sb.ID()); err != nil {
		t.Fatalf("second destroy: %v", err)
	}
	if _, err := p.Attach(ctx, sb.ID()); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("attach after destroy: %v", err)
	}
	if err := sb.Ping(ctx); err == nil {
		t.Fatal("ping of a destroyed sandbox succeeded")
	}
}

// testSandbox exercises the contexts.Sandbox surface the e2b provider
// offers; it holds for the fake and for the real sandlot behind.
func testSandbox(t *testing.T, sb contexts.Sandbox) {
	t.Helper()
	ctx := context.Background()
	var streamed strings.Builder
	res, err := sb.Exec(ctx, agent.ExecParams{Shell: "echo $GREETING-$X; echo oops >&2; exit 4", Env: map[string]string{"X": "y"}, Stream: true}, func(ev agent.OutputEvent) {
		if ev.Stream == agent.Stdout {
			streamed.WriteString(ev.Data)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 4 || res.Stdout != "hi-y\n" || res.Stderr != "oops\n" || streamed.String() != "hi-y\n" || res.PID == 0 {
		t.Fatalf("exec %+v streamed %q", res, streamed.String())
	}
	res, err = sb.Exec(ctx, agent.ExecParams{Argv: []string{"cat"}, Stdin: "from stdin"}, nil)
	if err != nil || res.Stdout != "from stdin" {
		t.Fatalf("exec with stdin %+v %v", res, err)
	}
	res, err = sb.Exec(ctx, agent.ExecParams{Shell: "sleep 5", TimeoutMs: 300}, nil)
	if err != nil || !res.TimedOut {
		t.Fatalf("exec timeout %+v %v", res, err)
	}
	if _, err := sb.WriteFile(ctx, agent.WriteParams{Path: "dir/a.txt", Data: []byte("hello")}); err != nil {
		t.Fatal(err)
	}
	if _, err := sb.WriteFile(ctx, agent.WriteParams{Path: "dir/a.txt", Data: []byte(" world"), Append: true}); err != nil {
		t.Fatal(err)
	}
	rr, err := sb.ReadFile(ctx, agent.ReadParams{Path: "/home/user/dir/a.txt"})
	if err != nil || string(rr.Data) != "hello world" || !rr.EOF {
		t.Fatalf("read %+v %v", rr, err)
	}
	if _, err := sb.ReadFile(ctx, agent.ReadParams{Path: "/nope"}); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("read missing: %v", err)
	}
	if _, err := sb.Stat(ctx, "/nope"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("stat missing: %v", err)
	}
	if fi, err := sb.Mkdir(ctx, "dir/sub"); err != nil || fi.Type != "dir" {
		t.Fatalf("mkdir %+v %v", fi, err)
	}
	if _, err := sb.Mkdir(ctx, "dir/sub"); err != nil {
		t.Fatalf("mkdir existing: %v", err)
	}
	if fi, err := sb.Move(ctx, agent.MoveParams{From: "dir/a.txt", To: "dir/sub/b.txt"}); err != nil || fi.Name != "b.txt" {
		t.Fatalf("move %+v %v", fi, err)
	}
	list, err := sb.List(ctx, agent.ListParams{Path: "/home/user/dir"})
	if err != nil || len(list) != 1 || list[0].Name != "sub" || list[0].Type != "dir" {
		t.Fatalf("list %+v %v", list, err)
	}
	if ed, err := sb.EditFile(ctx, agent.EditParams{Path: "dir/sub/b.txt", Old: "world", New: "there"}); err != nil || ed.Replacements != 1 {
		t.Fatalf("edit %+v %v", ed, err)
	}
	if err := sb.Remove(ctx, agent.RemoveParams{Path: "dir", Recursive: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := sb.Stat(ctx, "dir"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("stat removed: %v", err)
	}
	var outs []string
	rc, err := sb.RunCode(ctx, agent.RunCodeParams{Language: agent.Python, Code: "1+1", Stream: true}, func(ev agent.OutputEvent) { outs = append(outs, ev.Stream) })
	if err != nil || !rc.Success || len(rc.Results) != 1 || !rc.Results[0].Main || rc.Results[0].Text == "" || rc.ExecutionCount == 0 {
		t.Fatalf("run code %+v %v", rc, err)
	}
	if len(outs) == 0 {
		t.Fatal("no streamed output")
	}
	if err := sb.RestartKernel(ctx, agent.KernelParams{Language: agent.Python}); err != nil {
		t.Fatal(err)
	}
}

// Each operation extends the E2B timeout to the TTL from now (throttled by
// ExtendEvery, here 1 ms).
func TestTimeoutExtended(t *testing.T) {
	srv := sandlotE2B(t)
	p := e2b.New(e2b.Config{APIKey: testKey, APIURL: srv.URL, SandboxURL: srv.URL, ExtendEvery: time.Millisecond})
	ctx := context.Background()
	sb, err := p.Create(ctx, contexts.Spec{TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	endAt := func() time.Time { return sandboxEnd(t, srv.URL, sb.ID()) }
	first := endAt()
	if d := time.Until(first); d < 59*time.Minute || d > time.Hour {
		t.Fatalf("timeout at create: ends in %v, want the 1 h TTL", d)
	}
	time.Sleep(20 * time.Millisecond)
	if _, err := sb.Stat(ctx, "/home/user"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for !endAt().After(first) {
		if time.Now().After(deadline) {
			t.Fatal("the operation did not extend the sandbox timeout")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Grep runs grep in the sandbox (here the fake's host process) and parses
// its path:line:text output; --include and -i must reach grep.
func TestGrep(t *testing.T) {
	srv := sandlotE2B(t)
	p := e2b.New(e2b.Config{APIKey: testKey, APIURL: srv.URL, SandboxURL: srv.URL, ConnectTimeout: 2 * time.Second})
	ctx := context.Background()
	sb, err := p.Create(ctx, contexts.Spec{TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for name, text := range map[string]string{"a.go": "x\nNeedle here\n", "b.txt": "needle too\n"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name string
		p    agent.GrepParams
		want []agent.GrepMatch
	}{
		{"case", agent.GrepParams{Pattern: "needle", Path: dir}, []agent.GrepMatch{{Path: filepath.Join(dir, "b.txt"), Line: 1, Text: "needle too"}}},
		{"ignore case, glob", agent.GrepParams{Pattern: "needle", Path: dir, IgnoreCase: true, Glob: "*.go"}, []agent.GrepMatch{{Path: filepath.Join(dir, "a.go"), Line: 2, Text: "Needle here"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := sb.Grep(ctx, tc.p)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, res.Matches); diff != "" {
				t.Fatalf("matches (-want +got):\n%s", diff)
			}
			if res.Truncated {
				t.Fatal("truncated under the limit")
			}
		})
	}
	res, err := sb.Grep(ctx, agent.GrepParams{Pattern: "needle", Path: dir, IgnoreCase: true, Limit: 1})
	if err != nil || len(res.Matches) != 1 || !res.Truncated {
		t.Fatalf("grep with limit 1 of 2 matches: %+v %v", res, err)
	}
}
