package export

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/sandlot/sandlot/telemetry"
)

// TestMetricsScrape: an instrument made from telemetry.Meter records into
// the Prometheus exposition, whether it was made before Setup installed
// the provider (as package-level instruments are) or after; the Go runtime
// and process collectors are there too.
func TestMetricsScrape(t *testing.T) {
	ctx := context.Background()
	early := telemetry.Counter(telemetry.Meter(), "sandlot.test.early", "made before Setup")
	tel, err := Setup(ctx, Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer tel.Shutdown(ctx)
	late := telemetry.Counter(telemetry.Meter(), "sandlot.test.late", "made after Setup")
	hist := telemetry.Histogram(telemetry.Meter(), "sandlot.test.duration", "a histogram", "s", 0.1, 1)
	gauge := telemetry.Gauge(telemetry.Meter(), "sandlot.test.share", "a gauge")
	early.Add(ctx, 2)
	late.Add(ctx, 1)
	hist.Record(ctx, 0.5)
	gauge.Record(ctx, 0.8)

	rec := httptest.NewRecorder()
	tel.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	text := string(body)
	for _, want := range []string{
		"sandlot_test_early_total 2",
		"sandlot_test_late_total 1",
		"sandlot_test_duration_seconds_count 1",
		"sandlot_test_share 0.8",
		"go_goroutines ",
		"process_cpu_seconds_total ",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("scrape lacks %q", want)
		}
	}
	if strings.Contains(text, "otel_scope") {
		t.Error("scope info is on; series must carry only their own labels")
	}
	if t.Failed() {
		t.Logf("scrape:\n%s", text)
	}
}

func TestSpansExported(t *testing.T) {
	ctx := context.Background()
	exp := tracetest.NewInMemoryExporter()
	tel, err := Setup(ctx, Config{SpanExporter: exp})
	if err != nil {
		t.Fatal(err)
	}
	defer tel.Shutdown(ctx)
	_, span := telemetry.Tracer().Start(ctx, "execution_context.execute_code")
	span.SetAttributes(telemetry.AttrTenant.String("t1"), telemetry.AttrLanguage.String("python"))
	span.End()
	if err := tel.ForceFlush(ctx); err != nil {
		t.Fatal(err)
	}
	spans := exp.GetSpans()
	if len(spans) != 1 || spans[0].Name != "execution_context.execute_code" {
		t.Fatalf("spans = %v", spans)
	}
	var gotTenant bool
	for _, a := range spans[0].Attributes {
		if a.Key == telemetry.AttrTenant && a.Value.AsString() == "t1" {
			gotTenant = true
		}
	}
	if !gotTenant {
		t.Errorf("span lacks %s", telemetry.AttrTenant)
	}
}

// TestLogDurationsInMilliseconds: every duration the daemon's logger
// writes is a number of milliseconds under a key ending in _ms, however
// the code passed it (slog.Duration, a time.Duration value, a key that
// already says _ms); without Milliseconds the JSON handler writes
// nanoseconds, so "probe":62376516 and "duration_ms":0.87 sat in one log.
func TestLogDurationsInMilliseconds(t *testing.T) {
	var buf bytes.Buffer
	log := NewLogger(&buf, "info")
	log.Info("x", slog.Duration("elapsed", 1500*time.Microsecond), "probe", 62*time.Millisecond,
		slog.Duration("duration_ms", 2*time.Second), slog.Int("count", 3), slog.Group("g", slog.Duration("wait", time.Minute)))
	var got map[string]any
	if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"elapsed_ms": 1.5, "probe_ms": 62.0, "duration_ms": 2000.0, "count": 3.0, "g": map[string]any{"wait_ms": 60000.0}}
	for k, v := range want {
		if !reflect.DeepEqual(got[k], v) {
			t.Errorf("%s = %v, want %v (line %s)", k, got[k], v, buf.String())
		}
	}
	for _, k := range []string{"elapsed", "probe", "wait"} {
		if _, ok := got[k]; ok {
			t.Errorf("key %s kept its duration unit: %s", k, buf.String())
		}
	}
}
