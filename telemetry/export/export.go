// Package export installs sandlot's telemetry exporters: the OpenTelemetry
// SDK tracer and meter providers, the OTLP span exporter, the Prometheus
// exposition behind /metrics, and the JSON slog logger. Only the daemon's
// assembly (cli) imports it; instrumented packages use the telemetry
// package, which is the OpenTelemetry API alone.
//
// Spans are exported over OTLP only when the standard
// OTEL_EXPORTER_OTLP_ENDPOINT (or _TRACES_ENDPOINT) is set; metrics are
// always collected and served in the Prometheus text format, and pushed
// over OTLP too when OTEL_EXPORTER_OTLP_METRICS_ENDPOINT is set, or
// OTEL_EXPORTER_OTLP_ENDPOINT unless OTEL_METRICS_EXPORTER is none.
package export

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/sandlot/sandlot/telemetry"
)

// Config configures Setup. The zero value is usable.
type Config struct {
	// ServiceName is the OTel service.name; "" means "sandlot".
	ServiceName string
	// Version is reported as service.version.
	Version string
	// SpanExporter overrides the OTLP exporter (tests use an in-memory one).
	SpanExporter sdktrace.SpanExporter
	// MetricReader, when set, reads the metrics besides the Prometheus
	// exposition (tests use a manual reader).
	MetricReader sdkmetric.Reader
}

// Telemetry owns the providers installed by Setup.
type Telemetry struct {
	registry *prometheus.Registry
	tp       *sdktrace.TracerProvider
	mp       *sdkmetric.MeterProvider
}

// Setup installs the global tracer and meter providers (so telemetry.Tracer
// and telemetry.Meter record) and returns the handle that serves /metrics
// and shuts them down.
func Setup(ctx context.Context, cfg Config) (*Telemetry, error) {
	name := cfg.ServiceName
	if name == "" {
		name = "sandlot"
	}
	res := resource.NewSchemaless(
		attribute.String("service.name", name),
		attribute.String("service.version", cfg.Version),
	)

	// The Prometheus registry only hosts the OTel exporter and the Go
	// runtime and process collectors; every sandlot metric is an OTel
	// instrument.
	t := &Telemetry{registry: prometheus.NewRegistry()}
	t.registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))

	popts := []otelprom.Option{otelprom.WithRegisterer(t.registry), otelprom.WithoutScopeInfo()}
	if telemetry.CurrentNames() == telemetry.NamesSpec {
		// The specification's names carry their unit (duration_ms):
		// the exposition adds none (execution_context_execution_duration_ms,
		// not ..._ms_milliseconds). No other instrument has a unit then:
		// sandlot's seconds histogram is the specification's one.
		popts = append(popts, otelprom.WithoutUnits())
	}
	exp, err := otelprom.New(popts...)
	if err != nil {
		return nil, fmt.Errorf("prometheus exporter: %w", err)
	}
	mopts := []sdkmetric.Option{sdkmetric.WithReader(exp), sdkmetric.WithResource(res)}
	if cfg.MetricReader != nil {
		mopts = append(mopts, sdkmetric.WithReader(cfg.MetricReader))
	}
	if otlpMetricsConfigured() {
		mexp, err := otlpmetrichttp.New(ctx)
		if err != nil {
			return nil, fmt.Errorf("otlp metric exporter: %w", err)
		}
		// The interval is OTEL_METRIC_EXPORT_INTERVAL's (60 s by default).
		mopts = append(mopts, sdkmetric.WithReader(sdkmetric.NewPeriodicReader(mexp)))
	}
	t.mp = sdkmetric.NewMeterProvider(mopts...)
	otel.SetMeterProvider(t.mp)

	spanExp := cfg.SpanExporter
	if spanExp == nil && otlpConfigured() {
		spanExp, err = otlptracehttp.New(ctx)
		if err != nil {
			return nil, fmt.Errorf("otlp trace exporter: %w", err)
		}
	}
	t.tp = sdktrace.NewTracerProvider(sdktrace.WithResource(res))
	if spanExp != nil {
		// Without an exporter the global tracer stays the no-op one: spans
		// nobody reads would cost every execution a few allocations.
		t.tp.RegisterSpanProcessor(sdktrace.NewBatchSpanProcessor(spanExp))
		otel.SetTracerProvider(t.tp)
	}
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	return t, nil
}

func otlpConfigured() bool {
	return os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

// otlpMetricsConfigured: metrics go over OTLP to their own endpoint, or to
// the shared one unless OTEL_METRICS_EXPORTER=none keeps them off it (a
// collector that takes traces only).
func otlpMetricsConfigured() bool {
	if os.Getenv("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT") != "" {
		return true
	}
	return os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" && os.Getenv("OTEL_METRICS_EXPORTER") != "none"
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

// NewLogger returns the JSON slog logger sandlot writes to w. level is one
// of debug, info, warn, error ("" = info). Every duration it writes is in
// milliseconds (Milliseconds).
func NewLogger(w io.Writer, level string) *slog.Logger {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil || level == "" {
		lv = slog.LevelInfo
	}
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: lv, ReplaceAttr: Milliseconds}))
}

// Milliseconds is the ReplaceAttr of sandlot's log handlers: a duration
// attribute is written as a number of milliseconds (with microseconds as
// its fraction) under its key with "_ms" at the end, so every duration in
// the logs has one unit, whatever its code passed (slog.Duration, a
// time.Duration value). Without it the JSON handler writes nanoseconds
// and the text handler "1.5s". Attributes that already carry
// milliseconds as a number are named "..._ms" by the code that logs them
// (logkey.Duration).
func Milliseconds(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() != slog.KindDuration {
		return a
	}
	if !strings.HasSuffix(a.Key, "_ms") {
		a.Key += "_ms"
	}
	return slog.Float64(a.Key, float64(a.Value.Duration().Microseconds())/1000)
}
