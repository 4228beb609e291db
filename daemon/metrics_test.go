package daemon

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sandlot/sandlot/api"
	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/internal/testenv"
	"github.com/sandlot/sandlot/telemetry"
	"github.com/sandlot/sandlot/telemetry/export"
)

// TestMetricsAfterRealCalls serves the daemon as serve builds it (real
// runtime, memory store), makes real calls over HTTP, then scrapes
// /metrics with the metrics token (and is refused without it) and reads
// /v1/metrics/sessions.
func TestMetricsAfterRealCalls(t *testing.T) {
	needRuntime(t)
	dir := t.TempDir()
	logs := &testenv.Buffer{}
	d := start(t, "", Config{DataDir: filepath.Join(dir, "data"), StateDir: filepath.Join(dir, "run"),
		Limits: contexts.Limits{MemoryBytes: 256 << 20}, PoolSize: 1, ShutdownTimeout: 5 * time.Second, Logger: export.NewLogger(logs, "debug")})

	call := func(method, path, body string, key bool) (int, []byte) {
		t.Helper()
		req, _ := http.NewRequest(method, d.url+path, strings.NewReader(body))
		if key {
			req.Header.Set("X-API-KEY", d.key)
			if path == "/metrics" {
				req.Header.Set("Authorization", "Bearer "+d.MetricsToken())
			}
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(api.HeaderRequestID, "obs-test-"+strconv.Itoa(len(body)))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	runCode := func(conv, code string) api.RunCodeResult {
		t.Helper()
		st, b := call("POST", "/v1/tools/run_code", `{"conversationId":"`+conv+`","args":{"language":"python","code":`+strconv.Quote(code)+`}}`, true)
		var res api.RunCodeResult
		if st != http.StatusOK || json.Unmarshal(b, &res) != nil || !res.Success {
			t.Fatalf("run_code %q: %d %s", code, st, b)
		}
		return res
	}

	// Two contexts, three executions; one prints an email address (a
	// guard finding); the second context is deleted.
	if res := runCode("m1", `print("write to alice@exemplar.ie")`); strings.Contains(res.Stdout, "alice@") {
		t.Fatalf("the guard let an email through: %q", res.Stdout)
	}
	runCode("m1", "1+1")
	res := runCode("m2", "1+1")
	if st, b := call("DELETE", "/v1/contexts/"+res.ContextID, "", true); st/100 != 2 {
		t.Fatalf("DELETE context: %d %s", st, b)
	}

	// The termination is in the tenant's audit trail.
	if st, b := call("GET", "/v1/audit?kind=context.terminated", "", true); st != http.StatusOK ||
		!strings.Contains(string(b), res.ContextID) || !strings.Contains(string(b), `"reason":"manual"`) {
		t.Errorf("audit of the termination: %d %s", st, b)
	}

	// Sessions JSON (tenant key required).
	st, b := call("GET", "/v1/metrics/sessions", "", true)
	var sess api.SessionMetrics
	if st != http.StatusOK || json.Unmarshal(b, &sess) != nil {
		t.Fatalf("sessions: %d %s", st, b)
	}
	def := sess.PerTemplate["default"]
	if sess.ActiveSessions != 1 || sess.TotalCreated != 2 || sess.TotalReused != 1 || sess.TotalTerminated != 1 || sess.TotalCleaned != 0 ||
		def.TotalCreated != 2 || def.ActiveSessions != 1 {
		t.Errorf("sessions = %s", b)
	}
	if st, _ := call("GET", "/v1/metrics/sessions", "", false); st != http.StatusUnauthorized {
		t.Errorf("sessions without a key: %d, want 401", st)
	}

	if st, b := call("GET", "/metrics", "", false); st != http.StatusUnauthorized || strings.Contains(string(b), "sandlot_") {
		t.Errorf("/metrics without the metrics token: %d %.200s", st, b)
	}
	// The pools refill in the background; wait for them before scraping:
	// the default template has two on the local provider, python started
	// (/v1's) and none (E2B's base sandbox's), of one sandbox each.
	deadline := time.Now().Add(30 * time.Second)
	var m metrics
	for {
		st, b := call("GET", "/metrics", "", true)
		if st != http.StatusOK {
			t.Fatalf("/metrics: %d %s", st, b)
		}
		m = parseMetrics(t, string(b))
		if m.get("sandlot_pool_size", `template="default"`) == 2 || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	checks := []struct {
		name, labels string
		want         float64
	}{
		{"sandlot_execution_context_created_total", `provider="local",template="default"`, 2},
		{"sandlot_execution_context_reused_total", `template="default"`, 1},
		{"sandlot_executions_total", `language="python",outcome="ok"`, 3},
		{"sandlot_execution_duration_seconds_count", `language="python"`, 3},
		{"sandlot_execution_context_active", ``, 1},
		{"sandlot_pool_size", `template="default"`, 2},
		{"sandlot_guard_findings_total", `type="EMAIL"`, 1},
		{"sandlot_execution_context_terminated_total", `reason="manual"`, 1},
	}
	for _, c := range checks {
		if got := m.get(c.name, c.labels); got != c.want {
			t.Errorf("%s{%s} = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	// The guard's entity model's memory, beside the daemon's heap.
	if mb, hb := m.get("sandlot_guard_model_bytes", ``), m.get("sandlot_daemon_heap_bytes", ``); mb < 1<<20 || hb < mb {
		t.Errorf("guard model bytes %v, daemon heap bytes %v", mb, hb)
	}
	if m.get("sandlot_pool_hits_total", `template="default"`)+m.get("sandlot_pool_misses_total", `template="default"`) != 2 {
		t.Errorf("pool hits + misses != 2 creations")
	}
	if t.Failed() {
		t.Logf("metrics:\n%s", m.dump())
	}

	// The JSON logs carry request ids and never the code, its output or
	// the key (debug level, the most verbose).
	d.stop()
	out := logs.String()
	if !strings.Contains(out, `"request_id":"obs-test-`) {
		t.Errorf("no request ids in the logs:\n%s", out)
	}
	for _, secret := range []string{"alice@exemplar.ie", "write to", d.key} {
		if strings.Contains(out, secret) {
			t.Errorf("the logs contain %q:\n%s", secret, out)
		}
	}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if !json.Valid([]byte(line)) {
			t.Errorf("log line is not JSON: %s", line)
		}
	}
}

// metrics is a scraped Prometheus text exposition: "name{labels}" → value,
// with the labels sorted as the exporter writes them, minus otel_scope_*.
type metrics map[string]float64

func parseMetrics(t *testing.T, body string) metrics {
	t.Helper()
	m := metrics{}
	sc := bufio.NewScanner(strings.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("metric line %q: %v", line, err)
		}
		key := line[:i]
		if j := strings.IndexByte(key, '{'); j >= 0 {
			var keep []string
			for _, l := range strings.Split(strings.TrimSuffix(key[j+1:], "}"), ",") {
				if l != "" && !strings.HasPrefix(l, "otel_scope_") {
					keep = append(keep, l)
				}
			}
			key = key[:j] + "{" + strings.Join(keep, ",") + "}"
		} else {
			key += "{}"
		}
		m[key] = v
	}
	return m
}

func (m metrics) get(name, labels string) float64 { return m[name+"{"+labels+"}"] }

func (m metrics) dump() string {
	var b strings.Builder
	for k, v := range m {
		if strings.HasPrefix(k, "sandlot_") {
			b.WriteString(k + " " + strconv.FormatFloat(v, 'g', -1, 64) + "\n")
		}
	}
	return b.String()
}

// TestTelemetryPrefix: Config.MetricPrefix (--telemetry-prefix) renames every sandlot metric in
// the scrape.
func TestTelemetryPrefix(t *testing.T) {
	needRuntime(t)
	t.Cleanup(func() { telemetry.SetNaming(telemetry.Naming{}) })
	dir := t.TempDir()
	d := start(t, "", Config{DataDir: filepath.Join(dir, "data"), StateDir: filepath.Join(dir, "run"),
		Limits: contexts.Limits{MemoryBytes: 256 << 20}, ShutdownTimeout: 5 * time.Second,
		MetricPrefix: "acme", Logger: export.NewLogger(&testenv.Buffer{}, "info")})
	req, _ := http.NewRequest("POST", d.url+"/v1/tools/run_code", strings.NewReader(`{"conversationId":"p","args":{"language":"python","code":"1+1"}}`))
	req.Header.Set("X-API-KEY", d.key)
	req.Header.Set("Content-Type", "application/json")
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 200 {
		t.Fatalf("run_code: %v %v", resp, err)
	}
	req, _ = http.NewRequest("GET", d.url+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+d.MetricsToken())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if !strings.Contains(string(b), "acme_executions_total") || strings.Contains(string(b), "sandlot_executions_total") {
		t.Fatalf("scrape without acme_executions_total, or with sandlot_ names:\n%.2000s", b)
	}
}

// TestSpecTelemetryNames: Config.TelemetryNames spec (--telemetry-names
// spec) gives the scrape 001 §8.2's metrics under their names as the
// Prometheus exposition writes them (dots as underscores, a counter's
// _total once, no unit suffix: the name carries it), after real calls;
// sandlot's names for them are gone.
func TestSpecTelemetryNames(t *testing.T) {
	needRuntime(t)
	t.Cleanup(func() { telemetry.SetNaming(telemetry.Naming{}) })
	dir := t.TempDir()
	d := start(t, "", Config{DataDir: filepath.Join(dir, "data"), StateDir: filepath.Join(dir, "run"),
		Limits: contexts.Limits{MemoryBytes: 256 << 20}, ShutdownTimeout: 5 * time.Second,
		TelemetryNames: telemetry.NamesSpec, Logger: export.NewLogger(&testenv.Buffer{}, "info")})
	do := func(method, path, body string) []byte {
		t.Helper()
		req, _ := http.NewRequest(method, d.url+path, strings.NewReader(body))
		req.Header.Set("X-API-KEY", d.key)
		if path == "/metrics" {
			req.Header.Set("Authorization", "Bearer "+d.MetricsToken())
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode/100 != 2 {
			t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, b)
		}
		return b
	}
	var res api.RunCodeResult
	json.Unmarshal(do("POST", "/v1/tools/run_code", `{"conversationId":"spec","args":{"language":"python","code":"1+1"}}`), &res)
	do("POST", "/v1/tools/run_code", `{"conversationId":"spec","args":{"language":"python","code":"raise ValueError('x')"}}`)
	do("POST", "/v1/tools/run_code", `{"conversationId":"spec2","args":{"language":"python","code":"1"}}`)
	do("DELETE", "/v1/contexts/"+res.ContextID, "")
	scrape := string(do("GET", "/metrics", ""))
	for _, want := range []string{
		`execution_context_created_total{provider="local",template="default"} 2`,
		`execution_context_terminated_total{reason="manual"} 1`,
		`execution_context_executions_total{language="python",outcome="ok"} 2`,
		`execution_context_executions_total{language="python",outcome="error"} 1`,
		`execution_context_execution_errors_total{language="python",outcome="error"} 1`,
		`execution_context_execution_duration_ms_count{language="python"} 3`,
		`execution_context_execution_duration_ms_bucket{language="python",le="600000"} 3`,
		"execution_context_active_count 1",
	} {
		if !strings.Contains(scrape, want) {
			t.Errorf("scrape lacks %q", want)
		}
	}
	for _, gone := range []string{"sandlot_executions_total", "sandlot_execution_duration", "sandlot_execution_context_created_total", "_ms_milliseconds"} {
		if strings.Contains(scrape, gone) {
			t.Errorf("scrape has %q", gone)
		}
	}
	if t.Failed() {
		t.Logf("scrape:\n%s", scrape)
	}
}
