package contexts

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/sandlot/sandlot/telemetry"
)

// The manager's metrics. With telemetry.NamesSpec, the six the
// specification names (001 §8.2) carry its names and units instead of
// sandlot's (specMetrics). Each event is recorded once, by one method here:
// the counter behind Stats (per template, served as /v1/metrics/sessions)
// and the OpenTelemetry instrument exported at /metrics move together,
// and the gauges read Stats when they are collected, so the two views
// cannot disagree. Instruments come from Config.Meter, the global meter of
// telemetry by default: a no-op until telemetry/export installs the SDK.

// instruments are the manager's OpenTelemetry instruments.
type instruments struct {
	meter        metric.Meter
	created      metric.Int64Counter
	reused       metric.Int64Counter
	terminated   metric.Int64Counter
	cleaned      metric.Int64Counter
	executions   metric.Int64Counter
	execErrors   metric.Int64Counter
	execDuration metric.Float64Histogram
	durationMs   bool   // execDuration is in milliseconds (the specification's), else seconds
	active       string // the active contexts gauge's name
	healthFail   metric.Int64Counter
}

// durationBounds are the execution duration histogram's buckets, in
// seconds: 0.5 ms to 10 minutes (the longest execution).
var durationBounds = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 600}

// specMetrics are the names 001 §8.2 gives the manager's metrics, which
// telemetry.NamesSpec puts in place of sandlot's (no prefix; the duration
// in milliseconds).
var specMetrics = struct{ created, terminated, executions, duration, errors, active string }{
	created:    "execution_context.created.total",
	terminated: "execution_context.terminated.total",
	executions: "execution_context.executions.total",
	duration:   "execution_context.execution.duration_ms",
	errors:     "execution_context.execution.errors.total",
	active:     "execution_context.active.count",
}

func newInstruments(m metric.Meter) *instruments {
	in := &instruments{
		meter:      m,
		created:    telemetry.Counter(m, "sandlot.execution_context.created", "Execution contexts created."),
		reused:     telemetry.Counter(m, "sandlot.execution_context.reused", "GetOrCreate calls served by an existing context."),
		terminated: telemetry.Counter(m, "sandlot.execution_context.terminated", "Execution contexts terminated, by reason."),
		cleaned:    telemetry.Counter(m, "sandlot.execution_context.cleaned", "Contexts terminated by the cleanup loop."),
		executions: telemetry.Counter(m, "sandlot.executions", "Code executions, by language and outcome."),
		execErrors: telemetry.Counter(m, "sandlot.execution.errors", "Executions that failed: user error, timeout or system fault."),
		execDuration: telemetry.Histogram(m, "sandlot.execution.duration", "Execution wall time.", "s",
			durationBounds...),
		active:     telemetry.MetricName("sandlot.execution_context.active"),
		healthFail: telemetry.Counter(m, "sandlot.health_check.failures", "Reuse health checks that failed and led to a recreate."),
	}
	if telemetry.CurrentNames() == telemetry.NamesSpec {
		ms := make([]float64, len(durationBounds))
		for i, b := range durationBounds {
			ms[i] = b * 1000
		}
		in.created = telemetry.Counter(m, specMetrics.created, "Execution contexts created.")
		in.terminated = telemetry.Counter(m, specMetrics.terminated, "Execution contexts terminated, by reason.")
		in.executions = telemetry.Counter(m, specMetrics.executions, "Code executions, by language and outcome.")
		in.execErrors = telemetry.Counter(m, specMetrics.errors, "Executions that failed: user error, timeout or system fault.")
		in.execDuration = telemetry.Histogram(m, specMetrics.duration, "Execution wall time.", "ms", ms...)
		in.durationMs, in.active = true, specMetrics.active
	}
	return in
}

// Execution outcomes, the outcome label of sandlot.executions.
const (
	OutcomeOK      = "ok"      // ran to completion
	OutcomeError   = "error"   // user code raised or exited nonzero
	OutcomeTimeout = "timeout" // the run hit its timeout
	OutcomeFault   = "fault"   // the system failed (sandbox lost, creation failed)
)

// countCreated records a context this manager created.
func (m *Manager) countCreated(tenantID, template, provider string) {
	m.count(tenantID, template, func(s *TemplateStats) { s.TotalCreated++ })
	m.inst.created.Add(context.Background(), 1, metric.WithAttributes(
		attribute.String("template", template), attribute.String("provider", provider)))
}

// countReused records a GetOrCreate answered by an existing context.
func (m *Manager) countReused(tenantID, template string) {
	m.count(tenantID, template, func(s *TemplateStats) { s.TotalReused++ })
	m.inst.reused.Add(context.Background(), 1, reusedAttrsOf(template))
}

// reusedAttrs are a reuse's metric attributes, made once per template
// (past maxAttrSets templates, per call): every warm call counts a reuse.
var reusedAttrs attrSets[string, metric.MeasurementOption]

func reusedAttrsOf(template string) metric.MeasurementOption {
	return reusedAttrs.get(template, func(template string) metric.MeasurementOption {
		return metric.WithAttributeSet(attribute.NewSet(attribute.String("template", template)))
	})
}

// countTerminated records a context this manager terminated and tore down.
// Only idle expiry counts as cleaned (the session spec's total_cleaned).
func (m *Manager) countTerminated(tenantID, template string, reason Reason) {
	m.count(tenantID, template, func(s *TemplateStats) {
		s.TotalTerminated++
		if reason == ReasonExpired {
			s.TotalCleaned++
		}
	})
	m.inst.terminated.Add(context.Background(), 1, metric.WithAttributes(attribute.String("reason", string(reason))))
	if reason == ReasonExpired {
		m.inst.cleaned.Add(context.Background(), 1)
	}
}

// HealthCheckFailed counts a failed health check of rec's context that a
// session manager over these contexts ran itself (the desktop manager's:
// a part of the desktop found stopped and restarted), in
// health_check_failures of rec's tenant and template and in the health
// check failures counter.
func (m *Manager) HealthCheckFailed(rec *Record) {
	m.countHealthFailure(rec.TenantID, rec.Template)
}

// countHealthFailure records a failed health check of a context of
// tenantID's: the reuse check's (the context is recreated), or one a
// session manager over the contexts runs (HealthCheckFailed).
func (m *Manager) countHealthFailure(tenantID, template string) {
	m.count(tenantID, template, func(s *TemplateStats) { s.HealthCheckFailures++ })
	m.inst.healthFail.Add(context.Background(), 1)
}

// countExecution records one Execute call that reached the sandbox (or
// failed for want of one); outcome is one of the Outcome constants.
func (m *Manager) countExecution(language, outcome string, d time.Duration) {
	a := execAttrsOf(language, outcome)
	ctx := context.Background()
	m.inst.executions.Add(ctx, 1, a.both)
	v := d.Seconds()
	if m.inst.durationMs {
		v = float64(d) / float64(time.Millisecond)
	}
	m.inst.execDuration.Record(ctx, v, a.lang)
	if outcome != OutcomeOK {
		m.inst.execErrors.Add(ctx, 1, a.both)
	}
}

// execAttrs are an execution's metric attributes, made once per language
// and outcome: building an attribute set sorts and allocates, a twentieth
// of the daemon's CPU on a warm call.
type execAttrs struct {
	both metric.MeasurementOption // language and outcome
	lang metric.MeasurementOption // language
}

type execAttrsKey struct{ language, outcome string }

var execAttrSets attrSets[execAttrsKey, *execAttrs]

// maxAttrSets bounds each attrSets: the languages and outcomes (the
// catalog's, a few) and the templates a reuse is counted for.
const maxAttrSets = 64

// attrSets keeps metric attribute sets made once per key, up to
// maxAttrSets keys; past them each call builds its own. build takes the
// key, not a closure, so a hit allocates nothing.
type attrSets[K comparable, V any] struct {
	m sync.Map     // K -> V
	n atomic.Int32 // entries in m
}

func (c *attrSets[K, V]) get(k K, build func(K) V) V {
	if v, ok := c.m.Load(k); ok {
		return v.(V)
	}
	v := build(k)
	if c.n.Load() < maxAttrSets {
		if _, loaded := c.m.LoadOrStore(k, v); !loaded {
			c.n.Add(1)
		}
	}
	return v
}

func execAttrsOf(language, outcome string) *execAttrs {
	return execAttrSets.get(execAttrsKey{language, outcome}, func(k execAttrsKey) *execAttrs {
		lang := attribute.String("language", k.language)
		return &execAttrs{
			both: metric.WithAttributeSet(attribute.NewSet(lang, attribute.String("outcome", k.outcome))),
			lang: metric.WithAttributeSet(attribute.NewSet(lang)),
		}
	})
}

// observeStats registers the gauges that read Stats at collection (active
// contexts, pool size, pool hits and misses) and returns their
// unregistration. Start calls it; Close unregisters.
func (m *Manager) observeStats() (func(), error) {
	mt := m.inst.meter
	active, err1 := mt.Int64ObservableGauge(m.inst.active, metric.WithDescription("Active execution contexts."))
	size, err2 := mt.Int64ObservableGauge(telemetry.MetricName("sandlot.pool.size"), metric.WithDescription("Ready sandboxes in the warm pool, by template."))
	hits, err3 := mt.Int64ObservableCounter(telemetry.MetricName("sandlot.pool.hits"), metric.WithDescription("GetOrCreate served from the warm pool."))
	misses, err4 := mt.Int64ObservableCounter(telemetry.MetricName("sandlot.pool.misses"), metric.WithDescription("GetOrCreate that found the warm pool empty."))
	for _, err := range []error{err1, err2, err3, err4} {
		if err != nil {
			return func() {}, err
		}
	}
	reg, err := mt.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		s := m.Stats()
		o.ObserveInt64(active, s.Active)
		for tpl, p := range s.PerTemplate {
			attrs := metric.WithAttributes(attribute.String("template", tpl))
			o.ObserveInt64(size, p.PoolSize, attrs)
			o.ObserveInt64(hits, p.PoolHits, attrs)
			o.ObserveInt64(misses, p.PoolMisses, attrs)
		}
		return nil
	}, active, size, hits, misses)
	if err != nil {
		return func() {}, err
	}
	return func() { _ = reg.Unregister() }, nil
}
