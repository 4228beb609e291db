package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand"
	"net/http"
	"os"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sandlot/sandlot/api"
	"github.com/sandlot/sandlot/client"
	"github.com/sandlot/sandlot/internal/testenv"
)

func py(conv, path, code string) client.RunCodeRequest {
	return client.RunCodeRequest{Target: client.Target{ConversationID: conv, PathID: path}, Language: "python", Code: code}
}

func mainText(r *api.RunCodeResult) string {
	for _, x := range r.Results {
		if x.Main {
			return x.Text
		}
	}
	return ""
}

func TestE2E(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: skipped with -short")
	}
	runtimePreconditions(t)
	dir, err := os.MkdirTemp("", "sl-e2e-") // short: sockets live under it
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	top := t // daemons started in subtests must outlive them
	d := startDaemon(t, dir)
	ctx := context.Background()
	// Bad input needs no sandbox: validation comes first.
	t.Run("bad input", func(t *testing.T) {
		big := strings.Repeat("#", 100<<10+10)
		bigBody, _ := json.Marshal(map[string]any{"args": map[string]any{"language": "python", "code": big}})
		hugeBody := `{"args":{"language":"python","code":"` + strings.Repeat("#", 9<<20) + `"}}`
		tests := []struct {
			name, method, path, body string
			want                     int
		}{
			{"malformed JSON", "POST", "/v1/tools/run_code", `{"args":`, 400},
			{"unknown tool", "POST", "/v1/tools/nope", `{}`, 404},
			{"unknown language", "POST", "/v1/tools/run_code", `{"args":{"language":"cobol","code":"1"}}`, 400},
			{"code over 100 KB", "POST", "/v1/tools/run_code", string(bigBody), 400},
			{"timeout too small", "POST", "/v1/tools/run_code", `{"args":{"language":"python","code":"1","timeout":10}}`, 400},
			{"timeout too big", "POST", "/v1/tools/run_code", `{"args":{"language":"python","code":"1","timeout":600001}}`, 400},
			{"unknown context", "GET", "/v1/contexts/00000000-0000-0000-0000-000000000000", "", 404},
			{"delete unknown context", "DELETE", "/v1/contexts/nope", "", 404},
			{"body over the limit", "POST", "/v1/tools/run_code", hugeBody, 413},
			{"path traversal", "GET", "/v1/conversations/e2e/paths/main/files?path=../../etc/passwd", "", 400},
			{"bad event", "POST", "/v1/conversations/e2e/paths/main/events", `{"type":"forked"}`, 400},
		}
		for _, tt := range tests {
			code, body := raw(t, tt.method, d.URL+tt.path, d.key, tt.body)
			var e api.Error
			if code != tt.want || json.Unmarshal([]byte(body), &e) != nil || e.Code == "" {
				t.Errorf("%s: %d %.200s", tt.name, code, body)
			}
		}
		if code, _ := raw(t, "GET", d.URL+"/v1/contexts", "", ""); code != 401 {
			t.Errorf("no key: %d", code)
		}
	})
	if code, body := raw(t, "GET", d.URL+"/readyz", "", ""); code != 200 {
		testenv.Require(t, false, "the server's runtime is not ready: "+body)
	}
	a := d.client(d.key)
	otherKey := d.newTenant(t, "other")
	b := d.client(otherKey)
	// No sandbox may outlive the test, even when a subtest failed or the
	// daemon died: a fresh daemon on the same data dir reattaches them,
	// and terminating their contexts destroys them.
	defer func() {
		if d.Exited() {
			d = startDaemon(top, dir)
		}
		d.cleanup(t, d.key, otherKey)
		d.stop(t)
	}()

	t.Run("state across calls", func(t *testing.T) {
		if _, err := a.RunCode(ctx, py("e2e", "", "x = 41")); err != nil {
			t.Fatal(err)
		}
		r, err := a.RunCode(ctx, py("e2e", "", "x + 1"))
		if err != nil || !r.Success || mainText(r) != "42" {
			t.Fatalf("%+v %v", r, err)
		}
	})
	t.Run("branch isolation", func(t *testing.T) {
		if err := a.PathEvent(ctx, "e2e", "side", api.PathEvent{Type: api.PathBranched, SourcePathID: "main"}); err != nil {
			t.Fatal(err)
		}
		r, err := a.RunCode(ctx, py("e2e", "side", "x"))
		if err != nil || r.Success || r.Error == nil || r.Error.Name != "NameError" {
			t.Fatalf("x leaked into the branch: %+v %v", r, err)
		}
		r, _ = a.RunCode(ctx, py("e2e", "main", "x"))
		if mainText(r) != "41" {
			t.Fatalf("main lost x: %+v", r)
		}
		if err := a.PathEvent(ctx, "e2e", "side", api.PathEvent{Type: api.PathMerged, TargetPathID: "main"}); err != nil {
			t.Fatal(err)
		}
		l, _ := a.ListContexts(ctx, client.ListOptions{ConversationID: "e2e", PathID: "side", Status: []string{"terminated"}})
		if l == nil || len(l.Contexts) != 1 || l.Contexts[0].TerminationReason != "merged" {
			t.Fatalf("merge did not terminate the source: %+v", l)
		}
	})
	t.Run("tenant isolation", func(t *testing.T) {
		l, err := a.ListContexts(ctx, client.ListOptions{ConversationID: "e2e", PathID: "main", Status: []string{"active"}})
		if err != nil || len(l.Contexts) != 1 {
			t.Fatalf("%+v %v", l, err)
		}
		idA := l.Contexts[0].ID
		if _, err := b.GetContext(ctx, idA); !client.IsNotFound(err) {
			t.Errorf("get: %v", err)
		}
		if err := b.DeleteContext(ctx, idA); !client.IsNotFound(err) {
			t.Errorf("delete: %v", err)
		}
		if _, err := b.ListFiles(ctx, client.FileTarget{ContextID: idA}, "", 0); !client.IsNotFound(err) {
			t.Errorf("files: %v", err)
		}
		if _, err := b.Upload(ctx, client.FileTarget{ContextID: idA}, "x.txt", strings.NewReader("B")); !client.IsNotFound(err) {
			t.Errorf("upload: %v", err)
		}
		if _, err := b.Download(ctx, client.FileTarget{ContextID: idA}, "/etc/hostname", io.Discard, nil); err == nil {
			t.Errorf("download from A's context worked")
		}
		// B's path events name B's own (conversation, path), never A's.
		if err := b.PathEvent(ctx, "e2e", "main", api.PathEvent{Type: api.PathDeleted}); err != nil && !client.IsNotFound(err) {
			t.Errorf("event: %v", err)
		}
		if rec, err := a.GetContext(ctx, idA); err != nil || rec.Status != "ready" {
			t.Fatalf("A's context after B's calls: %+v %v", rec, err)
		}
		lb, _ := b.ListContexts(ctx, client.ListOptions{})
		for _, r := range lb.Contexts {
			if r.ID == idA {
				t.Error("B lists A's context")
			}
		}
		r, err := b.RunCode(ctx, py("e2e", "main", "x"))
		if err != nil || r.Success {
			t.Fatalf("B sees A's state: %+v %v", r, err)
		}
		if r, _ := a.RunCode(ctx, py("e2e", "main", "x")); mainText(r) != "41" {
			t.Fatalf("A's state changed: %+v", r)
		}
	})
	t.Run("streaming order", func(t *testing.T) {
		var evs []api.Event
		var at []time.Time
		// Lines of 1 KB: the egress guard holds back a short tail of each
		// stream (a secret may straddle two chunks), so tiny lines only
		// show up at the end.
		r, err := a.RunCodeStream(ctx, py("stream", "", "import time\nfor i in range(5):\n    print(i, '.' * 1000, flush=True)\n    time.sleep(0.1)"),
			func(ev api.Event) error { evs = append(evs, ev); at = append(at, time.Now()); return nil })
		if err != nil || !r.Success {
			t.Fatalf("%+v %v", r, err)
		}
		var got string
		for _, ev := range evs {
			if ev.Type != api.EventStdout {
				t.Fatalf("unexpected event %+v", ev)
			}
			got += ev.Data
		}
		var want string
		for i := 0; i < 5; i++ {
			want += fmt.Sprintf("%d %s\n", i, strings.Repeat(".", 1000))
		}
		if got != want || len(evs) < 3 {
			t.Fatalf("stdout events %.300q (%d events)", got, len(evs))
		}
		if r.Stdout != want {
			t.Errorf("final stdout differs from the streamed one")
		}
		if at[len(at)-1].Sub(at[0]) < 200*time.Millisecond {
			t.Errorf("events were not streamed as they happened: spread %v", at[len(at)-1].Sub(at[0]))
		}
	})
	t.Run("files", func(t *testing.T) {
		data := bytes.Repeat([]byte("sandlot,"), 300000) // 2.4 MB: several chunks
		ft := client.FileTarget{ConversationID: "e2e"}
		if _, err := a.Upload(ctx, ft, "data/in.csv", bytes.NewReader(data)); err != nil {
			t.Fatal(err)
		}
		r, err := a.RunCode(ctx, py("e2e", "", "len(open('/home/user/data/in.csv').read())"))
		if err != nil || mainText(r) != fmt.Sprint(len(data)) {
			t.Fatalf("%+v %v", r, err)
		}
		var buf bytes.Buffer
		if _, err := a.Download(ctx, ft, "/home/user/data/in.csv", &buf, nil); err != nil || !bytes.Equal(buf.Bytes(), data) {
			t.Fatalf("download: %d bytes, %v", buf.Len(), err)
		}
		// Binary survives both ways byte for byte.
		bin := make([]byte, 1<<20+4321)
		rand.New(rand.NewSource(1)).Read(bin)
		if _, err := a.Upload(ctx, ft, "/tmp/blob.bin", bytes.NewReader(bin)); err != nil {
			t.Fatal(err)
		}
		buf.Reset()
		if _, err := a.Download(ctx, ft, "/tmp/blob.bin", &buf, nil); err != nil || !bytes.Equal(buf.Bytes(), bin) {
			t.Fatalf("binary download: %d bytes, %v", buf.Len(), err)
		}
		fl, err := a.ListFiles(ctx, ft, "/tmp", 1)
		if err != nil || !strings.Contains(fmt.Sprint(fl.Entries), "blob.bin") {
			t.Fatalf("list: %+v %v", fl, err)
		}
	})
	t.Run("guard", func(t *testing.T) {
		// The value is made at test time, so no real-looking secret is
		// committed.
		email := fmt.Sprintf("user%d.e2e@exemplar.ie", rand.Int63())
		r, err := a.RunCode(ctx, py("e2e", "", fmt.Sprintf("print(%q)", email)))
		if err != nil || strings.Contains(r.Stdout, email) || !strings.Contains(r.Stdout, "[REDACTED:EMAIL]") {
			t.Fatalf("stdout not redacted: %+v %v", r, err)
		}
		// The default tenant is an admin (--bootstrap-admin): it may switch
		// the guard off for a request; the other tenant may not.
		body := `{"conversationId":"e2e","args":{"language":"python","code":"print('` + email + `')"}}`
		if code, out := raw(t, "POST", d.URL+"/v1/tools/run_code", d.key, body, api.HeaderGuardMode, "off"); code != 200 || !strings.Contains(out, email) {
			t.Errorf("admin override off: %d %.300s", code, out)
		}
		// Report mode: the output passes unchanged and the finding is
		// audited as a report.
		if code, out := raw(t, "POST", d.URL+"/v1/tools/run_code", d.key, body, api.HeaderGuardMode, "report"); code != 200 || !strings.Contains(out, email) {
			t.Errorf("admin override report: %d %.300s", code, out)
		}
		// Findings reach the trail behind the output (the daemon's audit
		// writer): wait for it.
		if !eventually(func() bool {
			al, err := a.Audit(ctx, "guard.finding", 10)
			return err == nil && len(al.Events) > 0 && al.Events[0].Detail["mode"] == "report"
		}) {
			t.Errorf("report-mode finding not audited")
		}
		if code, out := raw(t, "POST", d.URL+"/v1/tools/run_code", otherKey, body, api.HeaderGuardMode, "off"); code != 403 || strings.Contains(out, email) {
			t.Errorf("non-admin override: %d %.300s", code, out)
		}
		// A tenant's own mode: report passes the output unchanged.
		repKey := d.newTenant(t, "reporter", "--guard-mode", "report")
		defer d.cleanup(t, repKey)
		if r, err := d.client(repKey).RunCode(ctx, py("e2e", "", fmt.Sprintf("print(%q)", email))); err != nil || r.Stdout != email+"\n" {
			t.Errorf("report-mode tenant: %+v %v", r, err)
		}
		// A value straddling the 1 MiB chunk boundary of a download.
		head := strings.Repeat(strings.Repeat("z", 99)+"\n", 1<<20/100+1)[:1<<20-8] + " "
		ft := client.FileTarget{ConversationID: "e2e"}
		if _, err := a.Upload(ctx, ft, "straddle.txt", strings.NewReader(head+email+"\n")); err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		if _, err := a.Download(ctx, ft, "straddle.txt", &buf, nil); err != nil || buf.String() != head+"[REDACTED:EMAIL]\n" {
			t.Fatalf("download across chunks: %v, tail %q", err, buf.String()[max(0, buf.Len()-60):])
		}
		// Findings are in the audit trail, without the value: the
		// download's finding is the newest one once it is written.
		var code int
		var out string
		var al api.AuditList
		eventually(func() bool {
			code, out = raw(t, "GET", d.URL+"/v1/audit?kind=guard.finding&limit=50", d.key, "")
			al = api.AuditList{}
			return code == 200 && json.Unmarshal([]byte(out), &al) == nil && len(al.Events) > 0 && al.Events[0].Detail["mode"] == "enforce"
		})
		if code != 200 || len(al.Events) == 0 {
			t.Fatalf("audit: %d %.300s", code, out)
		}
		if strings.Contains(out, email) || strings.Contains(out, strings.Split(email, "@")[0]) {
			t.Fatalf("the audit trail holds the value: %.500s", out)
		}
		ev := al.Events[0]
		if ev.Detail["type"] != "EMAIL" || len(ev.Detail["hmac"]) != 64 || ev.Detail["start"] == "" || ev.Detail["end"] == "" {
			t.Errorf("audit event %+v", ev)
		}
		if code, out := raw(t, "GET", d.URL+"/v1/audit?kind=guard.finding", otherKey, ""); code != 200 || strings.Contains(out, `"EMAIL"`) {
			t.Errorf("the other tenant sees the audit trail: %d %.300s", code, out)
		}
	})
	t.Run("tool schemas", func(t *testing.T) {
		// The real registry's schemas in each format, over the tool-list
		// route: OpenAI {type: function, function: {name, parameters}},
		// Anthropic {name, input_schema}, MCP {name, inputSchema}.
		want := []string{"run_code", "run_analysis", "bash", "read_file", "write_file", "edit_file", "list_files", "glob", "grep"}
		for _, f := range []struct{ format, schema string }{{"openai", "parameters"}, {"anthropic", "input_schema"}, {"mcp", "inputSchema"}, {"", "inputSchema"}} {
			code, out := raw(t, "GET", d.URL+"/v1/tools?format="+f.format, d.key, "")
			var list []map[string]any
			if err := json.Unmarshal([]byte(out), &list); code != 200 || err != nil {
				var wrapped map[string][]map[string]any
				if json.Unmarshal([]byte(out), &wrapped) != nil || len(wrapped["tools"]) == 0 {
					t.Fatalf("format %q: %d %.300s", f.format, code, out)
				}
				list = wrapped["tools"]
			}
			var names []string
			for _, tool := range list {
				if fn, ok := tool["function"].(map[string]any); ok && f.format == "openai" {
					tool = fn
				}
				name, _ := tool["name"].(string)
				names = append(names, name)
				if _, ok := tool[f.schema].(map[string]any); !ok {
					t.Errorf("format %q: %s has no %s: %.200v", f.format, name, f.schema, tool)
				}
			}
			for _, n := range want {
				if !slices.Contains(names, n) {
					t.Errorf("format %q: %s missing from %v", f.format, n, names)
				}
			}
		}
	})
	t.Run("mcp over /mcp", func(t *testing.T) {
		if code, _ := raw(t, "POST", d.URL+"/mcp", "", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, "Content-Type", "application/json"); code != 401 {
			t.Fatalf("/mcp without a key: %d", code)
		}
		tr := &sdk.StreamableClientTransport{Endpoint: d.URL + "/mcp", HTTPClient: &http.Client{Transport: bearer(d.key)}}
		cs, err := sdk.NewClient(&sdk.Implementation{Name: "e2e", Version: "1"}, nil).Connect(ctx, tr, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer cs.Close()
		tl, err := cs.ListTools(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, tool := range tl.Tools {
			names = append(names, tool.Name)
		}
		if !slices.Contains(names, "run_code") || !slices.Contains(names, "run_analysis") || !slices.Contains(names, "read_file") {
			t.Fatalf("tools: %v", names)
		}
		run := func(code string) map[string]any {
			t.Helper()
			res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "run_code", Arguments: map[string]any{"language": "python", "code": code}})
			if err != nil || res.IsError {
				t.Fatalf("run_code %q: %v %+v", code, err, res)
			}
			b, _ := json.Marshal(res.StructuredContent)
			var out map[string]any
			json.Unmarshal(b, &out)
			return out
		}
		run("y = 20")
		if out := run("print(y + 1)"); out["stdout"] != "21\n" {
			t.Fatalf("state across MCP calls: %+v", out)
		}
		email := fmt.Sprintf("mcp%d.e2e@exemplar.ie", rand.Int63())
		if out := run(fmt.Sprintf("print(%q)", email)); strings.Contains(fmt.Sprint(out), email) || !strings.Contains(fmt.Sprint(out["stdout"]), "[REDACTED:EMAIL]") {
			t.Fatalf("secret over MCP: %+v", out)
		}
	})
	t.Run("restart keeps state", func(t *testing.T) {
		before, _ := a.RunCode(ctx, py("e2e", "", "x"))
		// SIGTERM while an execution is in flight: it finishes first.
		inflight := make(chan error, 1)
		go func() {
			r, err := a.RunCode(ctx, py("e2e", "slow", "import time\ntime.sleep(1.5)\n'done'"))
			if err == nil && mainText(r) != "'done'" {
				err = fmt.Errorf("result %+v", r)
			}
			inflight <- err
		}()
		time.Sleep(700 * time.Millisecond)
		d.stop(t)
		if err := <-inflight; err != nil {
			t.Fatalf("in-flight execution across SIGTERM: %v", err)
		}
		d2 := startDaemon(top, dir)
		d = d2
		a2 := d2.client(d2.key)
		r, err := a2.RunCode(ctx, py("e2e", "", "x"))
		if err != nil || mainText(r) != "41" {
			t.Fatalf("state lost across restart: %+v %v", r, err)
		}
		if r.SandboxID != before.SandboxID {
			t.Errorf("sandbox changed across restart: %s -> %s", before.SandboxID, r.SandboxID)
		}
		a = a2
		b = d2.client(otherKey)
	})
	t.Run("load", func(t *testing.T) {
		d.cleanup(t, d.key, otherKey)
		d.stop(t)
		d = startDaemon(top, dir, "--max-contexts-per-tenant", "60", "--max-contexts-per-conversation", "2", "--sandbox-memory", "256")
		loadTest(t, d.client(d.key), 50, 20)
	})
}

// loadTest runs conversations × calls run_code calls, each conversation in
// its own goroutine, each call checking the state it built, and reports
// latency percentiles. Nothing may be lost and no 5xx may come back.
func loadTest(t *testing.T, c *client.Client, conversations, calls int) {
	ctx := context.Background()
	var mu sync.Mutex
	var lat, warm []time.Duration
	var fails []string
	var wg sync.WaitGroup
	start := time.Now()
	for i := 0; i < conversations; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			conv := fmt.Sprintf("load-%d", i)
			for j := 0; j < calls; j++ {
				code := fmt.Sprintf("n = globals().get('n', 0) + 1\nn * 1000 + %d", j)
				t0 := time.Now()
				r, err := c.RunCode(ctx, py(conv, "", code))
				d := time.Since(t0)
				mu.Lock()
				lat = append(lat, d)
				if j > 0 {
					warm = append(warm, d)
				}
				switch {
				case err != nil:
					fails = append(fails, fmt.Sprintf("%s call %d: %v", conv, j, err))
				case mainText(r) != fmt.Sprint((j+1)*1000+j):
					fails = append(fails, fmt.Sprintf("%s call %d: got %q (lost state?)", conv, j, mainText(r)))
				}
				mu.Unlock()
			}
		}(i)
	}
	wg.Wait()
	total := time.Since(start)
	pct := func(l []time.Duration, p float64) time.Duration {
		sort.Slice(l, func(i, j int) bool { return l[i] < l[j] })
		return l[int(float64(len(l)-1)*p)]
	}
	t.Logf("load: %d conversations x %d calls = %d calls in %v (%.0f calls/s, GOMAXPROCS %d); all calls p50 %v p90 %v p99 %v; "+
		"warm calls (not a conversation's first) p50 %v p99 %v",
		conversations, calls, len(lat), total.Round(time.Millisecond), float64(len(lat))/total.Seconds(), runtime.GOMAXPROCS(0),
		pct(lat, 0.5), pct(lat, 0.9), pct(lat, 0.99), pct(warm, 0.5), pct(warm, 0.99))
	if len(fails) > 0 {
		t.Errorf("%d of %d calls failed; first: %s", len(fails), len(lat), strings.Join(fails[:min(5, len(fails))], "; "))
	}
}

// TestE2EWarmLatency measures the warm run_code python `1+1` round trip
// over HTTP on loopback and reports p50/p90/p99 (reported, not asserted),
// with the default SQLite store and with the memory store, to show what
// the store's per-execution write costs.
func TestE2EWarmLatency(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: skipped with -short")
	}
	runtimePreconditions(t)
	for _, st := range []string{"sqlite", "memory:"} {
		t.Run(strings.TrimSuffix(st, ":"), func(t *testing.T) {
			dir, err := os.MkdirTemp("", "sl-lat-")
			if err != nil {
				t.Fatal(err)
			}
			defer os.RemoveAll(dir)
			args := []string{"--log-level", "warn"}
			if st != "sqlite" {
				args = append(args, "--store", st)
			}
			d := startDaemon(t, dir, args...)
			if code, body := raw(t, "GET", d.URL+"/readyz", "", ""); code != 200 {
				testenv.Require(t, false, "the server's runtime is not ready: "+body)
			}
			defer func() { d.cleanup(t, d.key); d.stop(t) }()
			c := client.New(d.URL, client.WithAPIKey(d.key), client.WithHTTPClient(&http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}))
			ctx := context.Background()
			for i := 0; i < 50; i++ { // create and warm
				if _, err := c.RunCode(ctx, py("lat", "", "1+1")); err != nil {
					t.Fatal(err)
				}
			}
			const n = 1000
			lat := make([]time.Duration, 0, n)
			for i := 0; i < n; i++ {
				t0 := time.Now()
				r, err := c.RunCode(ctx, py("lat", "", "1+1"))
				lat = append(lat, time.Since(t0))
				if err != nil || mainText(r) != "2" {
					t.Fatalf("%+v %v", r, err)
				}
			}
			sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
			t.Logf("warm run_code python 1+1 over HTTP (loopback, keep-alive, store %s), %d calls: p50 %v p90 %v p99 %v",
				st, n, lat[n/2], lat[n*9/10], lat[n*99/100])
		})
	}
}

// BenchmarkE2EWarmRunCode is the warm run_code python `1+1` round trip over
// HTTP on loopback against a serve subprocess (SQLite store).
func BenchmarkE2EWarmRunCode(b *testing.B) {
	runtimePreconditions(b)
	dir, err := os.MkdirTemp("", "sl-bench-")
	if err != nil {
		b.Fatal(err)
	}
	defer os.RemoveAll(dir)
	d := startDaemon(b, dir, "--log-level", "warn")
	defer func() { d.cleanup(b, d.key); d.stop(b) }()
	c := d.client(d.key)
	ctx := context.Background()
	for i := 0; i < 20; i++ {
		if _, err := c.RunCode(ctx, py("bench", "", "1+1")); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := c.RunCode(ctx, py("bench", "", "1+1")); err != nil {
			b.Fatal(err)
		}
	}
}

// eventually polls cond for up to 30 s and reports whether it held: for
// what the daemon does behind a response (its audit trail).
func eventually(cond func() bool) bool {
	return testenv.Until(30*time.Second, cond)
}
