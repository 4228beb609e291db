package telemetry

import (
	"context"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// Snapshot is the manager state mirrored by gauges. The caller converts its
// own stats into it, so this package imports nothing of the daemon.
type Snapshot struct {
	Active     int64
	PerPool    map[string]PoolSnapshot // by template
	Cumulative map[string]int64        // reserved
}

// PoolSnapshot is one template's warm pool.
type PoolSnapshot struct {
	Size, Hits, Misses int64
}

// Metrics records sandlot's counters and histograms. A nil *Metrics is
// valid and records nothing, so callers need no checks.
type Metrics struct {
	created      metric.Int64Counter
	terminated   metric.Int64Counter
	executions   metric.Int64Counter
	execErrors   metric.Int64Counter
	execDuration metric.Float64Histogram
	healthFail   metric.Int64Counter
	findings     metric.Int64Counter
	fallbacks    metric.Int64Counter
	quota        metric.Float64Gauge
	reused       metric.Int64Counter
	cleaned      metric.Int64Counter
}

func newMetrics(m metric.Meter, stats func() Snapshot) (*Metrics, error) {
	var (
		x   Metrics
		err error
		all []error
	)
	add := func(e error) {
		if e != nil {
			all = append(all, e)
		}
	}
	x.created, err = m.Int64Counter("sandlot.execution_context.created", metric.WithDescription("Execution contexts created."))
	add(err)
	x.terminated, err = m.Int64Counter("sandlot.execution_context.terminated", metric.WithDescription("Execution contexts terminated, by reason."))
	add(err)
	x.reused, err = m.Int64Counter("sandlot.execution_context.reused", metric.WithDescription("GetOrCreate calls served by an existing context."))
	add(err)
	x.cleaned, err = m.Int64Counter("sandlot.execution_context.cleaned", metric.WithDescription("Contexts terminated by the cleanup loop."))
	add(err)
	x.executions, err = m.Int64Counter("sandlot.executions", metric.WithDescription("Code executions, by language and outcome."))
	add(err)
	x.execErrors, err = m.Int64Counter("sandlot.execution.errors", metric.WithDescription("Executions that failed: user error, timeout or system fault."))
	add(err)
	x.execDuration, err = m.Float64Histogram("sandlot.execution.duration", metric.WithUnit("s"),
		metric.WithDescription("Execution wall time."),
		metric.WithExplicitBucketBoundaries(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 600))
	add(err)
	x.healthFail, err = m.Int64Counter("sandlot.health_check.failures", metric.WithDescription("Reuse health checks that failed and led to a recreate."))
	add(err)
	x.findings, err = m.Int64Counter("sandlot.guard.findings", metric.WithDescription("Egress guard findings, by type."))
	add(err)
	x.fallbacks, err = m.Int64Counter("sandlot.provider.fallbacks", metric.WithDescription("Provider chain fallbacks, by provider and reason."))
	add(err)
	x.quota, err = m.Float64Gauge("sandlot.quota.usage", metric.WithDescription("Share of a plan limit used, by tenant, provider and kind."))
	add(err)

	if stats != nil {
		active, err := m.Int64ObservableGauge("sandlot.execution_context.active", metric.WithDescription("Active execution contexts."))
		add(err)
		poolSize, err := m.Int64ObservableGauge("sandlot.pool.size", metric.WithDescription("Ready sandboxes in the warm pool, by template."))
		add(err)
		hits, err := m.Int64ObservableCounter("sandlot.pool.hits", metric.WithDescription("GetOrCreate served from the warm pool."))
		add(err)
		misses, err := m.Int64ObservableCounter("sandlot.pool.misses", metric.WithDescription("GetOrCreate that found the warm pool empty."))
		add(err)
		if len(all) == 0 {
			_, err = m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
				s := stats()
				o.ObserveInt64(active, s.Active)
				for tpl, p := range s.PerPool {
					attrs := metric.WithAttributes(attribute.String("template", tpl))
					o.ObserveInt64(poolSize, p.Size, attrs)
					o.ObserveInt64(hits, p.Hits, attrs)
					o.ObserveInt64(misses, p.Misses, attrs)
				}
				return nil
			}, active, poolSize, hits, misses)
			add(err)
		}
	}
	if len(all) > 0 {
		return nil, fmt.Errorf("telemetry instruments: %v", all)
	}
	return &x, nil
}

// ContextCreated counts a new context.
func (x *Metrics) ContextCreated(template, provider string) {
	if x == nil {
		return
	}
	x.created.Add(context.Background(), 1, metric.WithAttributes(
		attribute.String("template", template), attribute.String("provider", provider)))
}

// ContextReused counts a GetOrCreate answered by an existing context.
func (x *Metrics) ContextReused(template string) {
	if x == nil {
		return
	}
	x.reused.Add(context.Background(), 1, metric.WithAttributes(attribute.String("template", template)))
}

// ContextTerminated counts a terminated context by reason.
func (x *Metrics) ContextTerminated(reason string) {
	if x == nil {
		return
	}
	x.terminated.Add(context.Background(), 1, metric.WithAttributes(attribute.String("reason", reason)))
	if reason == "expired" {
		x.cleaned.Add(context.Background(), 1)
	}
}

// Execution records one execution. outcome is "ok", "error" (user code
// raised or exited nonzero), "timeout" or "fault" (the system failed).
func (x *Metrics) Execution(language, outcome string, d time.Duration) {
	if x == nil {
		return
	}
	attrs := metric.WithAttributes(attribute.String("language", language), attribute.String("outcome", outcome))
	x.executions.Add(context.Background(), 1, attrs)
	x.execDuration.Record(context.Background(), d.Seconds(), metric.WithAttributes(attribute.String("language", language)))
	if outcome != "ok" {
		x.execErrors.Add(context.Background(), 1, attrs)
	}
}

// HealthCheckFailed counts a failed reuse health check.
func (x *Metrics) HealthCheckFailed() {
	if x == nil {
		return
	}
	x.healthFail.Add(context.Background(), 1)
}

// GuardFinding counts one egress guard finding of a type.
func (x *Metrics) GuardFinding(typ string) {
	if x == nil {
		return
	}
	x.findings.Add(context.Background(), 1, metric.WithAttributes(attribute.String("type", typ)))
}

// ProviderFallback counts a provider chain falling back from one provider.
func (x *Metrics) ProviderFallback(from, reason string) {
	if x == nil {
		return
	}
	x.fallbacks.Add(context.Background(), 1, metric.WithAttributes(
		attribute.String("provider", from), attribute.String("reason", reason)))
}

// QuotaUsage records the used share (0..1+) of a plan limit.
func (x *Metrics) QuotaUsage(tenant, provider, kind string, ratio float64) {
	if x == nil {
		return
	}
	x.quota.Record(context.Background(), ratio, metric.WithAttributes(
		attribute.String("tenant", tenant), attribute.String("provider", provider), attribute.String("kind", kind)))
}
