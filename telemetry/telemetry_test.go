package telemetry

import (
	"context"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

func TestMetricsScrape(t *testing.T) {
	ctx := context.Background()
	tel, err := Setup(ctx, Config{Stats: func() Snapshot {
		return Snapshot{Active: 3, PerPool: map[string]PoolSnapshot{"default": {Size: 2, Hits: 5, Misses: 1}}}
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer tel.Shutdown(ctx)
	m := tel.Metrics
	m.ContextCreated("default", "local")
	m.ContextCreated("default", "local")
	m.ContextTerminated("expired")
	m.Execution("python", "ok", 2*time.Millisecond)
	m.Execution("python", "timeout", time.Second)
	m.HealthCheckFailed()
	m.GuardFinding("EMAIL")
	m.ProviderFallback("e2b", "unavailable")
	m.QuotaUsage("t1", "e2b", "creations", 0.8)

	rec := httptest.NewRecorder()
	tel.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	text := string(body)
	for _, want := range []string{
		`sandlot_execution_context_created_total{provider="local",template="default"} 2`,
		`sandlot_execution_context_terminated_total{reason="expired"} 1`,
		`sandlot_execution_context_cleaned_total 1`,
		`sandlot_executions_total{language="python",outcome="ok"} 1`,
		`sandlot_execution_errors_total{language="python",outcome="timeout"} 1`,
		`sandlot_execution_duration_seconds_count{language="python"} 2`,
		`sandlot_health_check_failures_total 1`,
		`sandlot_guard_findings_total{type="EMAIL"} 1`,
		`sandlot_provider_fallbacks_total{provider="e2b",reason="unavailable"} 1`,
		`sandlot_quota_usage{kind="creations",provider="e2b",tenant="t1"} 0.8`,
		`sandlot_execution_context_active 3`,
		`sandlot_pool_size{template="default"} 2`,
		`sandlot_pool_hits_total{template="default"} 5`,
		`sandlot_pool_misses_total{template="default"} 1`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("scrape lacks %q", want)
		}
	}
	if t.Failed() {
		t.Logf("scrape:\n%s", text)
	}
}

func TestNilMetricsIsNoop(t *testing.T) {
	var m *Metrics
	m.ContextCreated("a", "b")
	m.Execution("python", "ok", time.Millisecond)
	m.GuardFinding("EMAIL")
}

func TestSpansExported(t *testing.T) {
	ctx := context.Background()
	exp := tracetest.NewInMemoryExporter()
	tel, err := Setup(ctx, Config{SpanExporter: exp})
	if err != nil {
		t.Fatal(err)
	}
	defer tel.Shutdown(ctx)
	_, span := Tracer().Start(ctx, "execution_context.execute_code")
	span.SetAttributes(AttrTenant.String("t1"), AttrLanguage.String("python"))
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
		if a.Key == AttrTenant && a.Value.AsString() == "t1" {
			gotTenant = true
		}
	}
	if !gotTenant {
		t.Errorf("span lacks %s", AttrTenant)
	}
}
