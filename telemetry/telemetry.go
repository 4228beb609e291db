// Package telemetry sets up sandlot's OpenTelemetry tracing and metrics, the
// Prometheus exporter behind /metrics, and the JSON slog logger.
//
// Instrumented packages use the global OTel API (otel.Tracer) with the
// attribute keys declared here, so they stay free of exporter choices. Setup
// installs the providers: spans are exported over OTLP only when the
// standard OTEL_EXPORTER_OTLP_ENDPOINT (or _TRACES_ENDPOINT) is set; metrics
// are always collected and served in the Prometheus text format.
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// ScopeName is the instrumentation scope of every sandlot span and metric.
const ScopeName = "github.com/sandlot/sandlot"

// Span attribute keys. Keep them constant: dashboards depend on them.
const (
	AttrTenant       = attribute.Key("app.tenant.id")
	AttrConversation = attribute.Key("app.conversation.id")
	AttrPath         = attribute.Key("app.path.id")
	AttrSandbox      = attribute.Key("sandbox.id")
	AttrTool         = attribute.Key("tool.name")
	AttrToolForced   = attribute.Key("tool.forced")
	AttrLanguage     = attribute.Key("code.language")
)

// Tracer returns sandlot's tracer from the global provider (a no-op until
// Setup runs).
func Tracer() trace.Tracer { return otel.Tracer(ScopeName) }

// IdentityAttrs appends the tenant, conversation and path ids that are
// known (not empty) to attrs.
func IdentityAttrs(attrs []attribute.KeyValue, tenant, conversation, path string) []attribute.KeyValue {
	if tenant != "" {
		attrs = append(attrs, AttrTenant.String(tenant))
	}
	if conversation != "" {
		attrs = append(attrs, AttrConversation.String(conversation))
	}
	if path != "" {
		attrs = append(attrs, AttrPath.String(path))
	}
	return attrs
}

// EndSpan records err (if any) on span and ends it.
func EndSpan(span trace.Span, err error) {
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// Config configures Setup. The zero value is usable.
type Config struct {
	// ServiceName is the OTel service.name; "" means "sandlot".
	ServiceName string
	// Version is reported as service.version.
	Version string
	// Stats, when set, feeds the gauges that mirror manager state (active
	// contexts, pool sizes, cumulative pool hits and misses).
	Stats func() Snapshot
	// SpanExporter overrides the OTLP exporter (tests use an in-memory one).
	SpanExporter sdktrace.SpanExporter
}

// Telemetry owns the providers installed by Setup.
type Telemetry struct {
	Metrics  *Metrics
	registry *prometheus.Registry
	tp       *sdktrace.TracerProvider
	mp       *sdkmetric.MeterProvider
}

// Setup installs global tracer and meter providers and returns the handle
// that serves /metrics and shuts them down.
func Setup(ctx context.Context, cfg Config) (*Telemetry, error) {
	name := cfg.ServiceName
	if name == "" {
		name = "sandlot"
	}
	res := resource.NewSchemaless(
		attribute.String("service.name", name),
		attribute.String("service.version", cfg.Version),
	)

	t := &Telemetry{registry: prometheus.NewRegistry()}
	t.registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))

	exp, err := otelprom.New(otelprom.WithRegisterer(t.registry), otelprom.WithoutScopeInfo())
	if err != nil {
		return nil, fmt.Errorf("prometheus exporter: %w", err)
	}
	t.mp = sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp), sdkmetric.WithResource(res))
	otel.SetMeterProvider(t.mp)

	topts := []sdktrace.TracerProviderOption{sdktrace.WithResource(res)}
	spanExp := cfg.SpanExporter
	if spanExp == nil && otlpConfigured() {
		spanExp, err = otlptracehttp.New(ctx)
		if err != nil {
			return nil, fmt.Errorf("otlp trace exporter: %w", err)
		}
	}
	t.tp = sdktrace.NewTracerProvider(topts...)
	if spanExp != nil {
		// Without an exporter the global tracer stays the no-op one: spans
		// nobody reads would cost every execution a few allocations.
		t.tp.RegisterSpanProcessor(sdktrace.NewBatchSpanProcessor(spanExp))
		otel.SetTracerProvider(t.tp)
	}
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))

	t.Metrics, err = newMetrics(t.mp.Meter(ScopeName), cfg.Stats)
	if err != nil {
		return nil, err
	}
	return t, nil
}

func otlpConfigured() bool {
	return os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

// Handler serves the Prometheus text exposition of every sandlot metric.
func (t *Telemetry) Handler() http.Handler {
	return promhttp.HandlerFor(t.registry, promhttp.HandlerOpts{})
}

// ForceFlush exports buffered spans (tests, shutdown).
func (t *Telemetry) ForceFlush(ctx context.Context) error { return t.tp.ForceFlush(ctx) }

// Shutdown flushes and stops the providers.
func (t *Telemetry) Shutdown(ctx context.Context) error {
	return errors.Join(t.tp.Shutdown(ctx), t.mp.Shutdown(ctx))
}

// NewLogger returns the JSON slog logger sandlot uses. level is one of
// debug, info, warn, error ("" = info).
func NewLogger(w io.Writer, level string) *slog.Logger {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil || level == "" {
		lv = slog.LevelInfo
	}
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: lv}))
}
