// Package telemetry is sandlot's instrumentation: the tracer and meter
// every package records with, the attribute keys its spans carry, and
// constructors of instruments that cannot fail. It imports the
// OpenTelemetry API only, so instrumented packages (contexts, tools, guard,
// the provider chain, the HTTP server) stay free of exporter choices:
// telemetry/export installs the SDK providers, the OTLP span exporter and
// the Prometheus exposition, and until it runs every span and metric is a
// no-op.
//
// There is one metrics stack: each package creates its instruments from
// Meter and records them where the event happens, as it starts its spans
// from Tracer; nothing keeps a second set of counters for /metrics.
package telemetry

import (
	"fmt"
	"regexp"
	"strings"
	"sync/atomic"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/trace"

	"github.com/sandlot/sandlot/errdefs"
)

// ScopeName is the instrumentation scope of every sandlot span and metric.
const ScopeName = "github.com/sandlot/sandlot"

// Span attribute keys. Keep them constant: dashboards depend on them.
const (
	AttrTenant       = attribute.Key("app.tenant.id")
	AttrConversation = attribute.Key("app.conversation.id")
	AttrUser         = attribute.Key("app.user.id")
	AttrPath         = attribute.Key("app.path.id")
	AttrSandbox      = attribute.Key("sandbox.id")
	AttrTool         = attribute.Key("tool.name")
	AttrToolForced   = attribute.Key("tool.forced")
	AttrLanguage     = attribute.Key("code.language")
)

// DefaultPrefix is the first part of every metric name ("sandlot.executions").
const DefaultPrefix = "sandlot"

// Names say which names sandlot's spans and metrics carry (Naming.Names).
type Names string

const (
	// NamesSandlot: sandlot's own names, the default: metrics under the
	// metric prefix (sandlot.executions, sandlot.execution.duration in
	// seconds), tool spans tool.<name>.
	NamesSandlot Names = "sandlot"
	// NamesSpec: the specifications' names wherever they name one (000
	// §8.4, 001 §8.2), exactly: tool spans compliance.tool.<name>, and the
	// six execution_context.* metrics with their units
	// (execution_context.execution.duration_ms in milliseconds); sandlot's
	// own names for what they do not name.
	NamesSpec Names = "spec"
)

// Naming configures the names of sandlot's telemetry (SetNaming).
type Naming struct {
	// MetricPrefix replaces "sandlot" in sandlot's own metric names
	// (acme.executions). "": DefaultPrefix. The specification's names
	// (NamesSpec) take no prefix.
	MetricPrefix string
	// SpanPrefix starts every span name (acme.execution_context.terminate).
	// "": none, and the spans carry the specification's names (or, for
	// the tool spans, sandlot's unless Names is NamesSpec). With NamesSpec
	// a prefix is refused: the specification's names are exact.
	SpanPrefix string
	// Names picks sandlot's names or the specification's. "":
	// NamesSandlot.
	Names Names
}

var current atomic.Pointer[Naming]

func init() { current.Store(&Naming{MetricPrefix: DefaultPrefix, Names: NamesSandlot}) }

var prefixRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_]{0,62}$`)

// SetNaming sets the names of sandlot's metrics and spans. Call it before
// the instruments are made (the daemon does, before wiring the manager):
// instruments keep the name they were made with. A prefix is a letter
// then letters, digits or _; a bad one, unknown names, or a span prefix
// with NamesSpec are invalid_argument.
func SetNaming(n Naming) error {
	if n.MetricPrefix == "" {
		n.MetricPrefix = DefaultPrefix
	}
	if n.Names == "" {
		n.Names = NamesSandlot
	}
	switch {
	case !prefixRE.MatchString(n.MetricPrefix) || n.SpanPrefix != "" && !prefixRE.MatchString(n.SpanPrefix):
		return fmt.Errorf("telemetry prefix %q/%q: want a letter then letters, digits or _: %w", n.MetricPrefix, n.SpanPrefix, errdefs.ErrInvalidArgument)
	case n.Names != NamesSandlot && n.Names != NamesSpec:
		return fmt.Errorf("telemetry names %q: want %s or %s: %w", n.Names, NamesSandlot, NamesSpec, errdefs.ErrInvalidArgument)
	case n.Names == NamesSpec && n.SpanPrefix != "":
		return fmt.Errorf("telemetry names %s give the spans the specification's exact names; a span prefix (%q) would rename them: %w", NamesSpec, n.SpanPrefix, errdefs.ErrInvalidArgument)
	}
	current.Store(&n)
	return nil
}

// CurrentNames reports which names are configured (SetNaming).
func CurrentNames() Names { return current.Load().Names }

// MetricName is name, written with DefaultPrefix ("sandlot.pool.size"),
// under the configured metric prefix.
func MetricName(name string) string {
	if rest, ok := strings.CutPrefix(name, DefaultPrefix+"."); ok {
		return current.Load().MetricPrefix + "." + rest
	}
	return name
}

// SpanName is name under the configured span prefix, if any.
func SpanName(name string) string {
	if p := current.Load().SpanPrefix; p != "" {
		return p + "." + name
	}
	return name
}

// ToolSpanName is the span name of a call of tool: tool.<tool>, or with
// NamesSpec the specification's compliance.tool.<tool>.
func ToolSpanName(tool string) string {
	if CurrentNames() == NamesSpec {
		return "compliance.tool." + tool
	}
	return SpanName("tool." + tool)
}

// Tracer returns sandlot's tracer from the global provider (a no-op until
// export.Setup runs).
func Tracer() trace.Tracer { return otel.Tracer(ScopeName) }

// Meter returns sandlot's meter from the global provider. Instruments made
// from it before export.Setup runs start recording once it has.
func Meter() metric.Meter { return otel.Meter(ScopeName) }

// IdentityAttrs appends the tenant, user, conversation and path ids that are
// known (not empty) to attrs.
func IdentityAttrs(attrs []attribute.KeyValue, tenant, user, conversation, path string) []attribute.KeyValue {
	if tenant != "" {
		attrs = append(attrs, AttrTenant.String(tenant))
	}
	if user != "" {
		attrs = append(attrs, AttrUser.String(user))
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

// The constructors below never fail: the SDK refuses an instrument only
// for an invalid name or unit, a programming error that the packages'
// metric tests catch, and a no-op instrument keeps the caller free of
// error paths that cannot happen at run time.

// Counter returns an Int64Counter of m.
func Counter(m metric.Meter, name, desc string) metric.Int64Counter {
	c, err := m.Int64Counter(MetricName(name), metric.WithDescription(desc))
	if err != nil {
		return noop.Int64Counter{}
	}
	return c
}

// Histogram returns a Float64Histogram of m in unit with bucket bounds.
func Histogram(m metric.Meter, name, desc, unit string, bounds ...float64) metric.Float64Histogram {
	h, err := m.Float64Histogram(MetricName(name), metric.WithDescription(desc), metric.WithUnit(unit),
		metric.WithExplicitBucketBoundaries(bounds...))
	if err != nil {
		return noop.Float64Histogram{}
	}
	return h
}

// Gauge returns a Float64Gauge of m.
func Gauge(m metric.Meter, name, desc string) metric.Float64Gauge {
	g, err := m.Float64Gauge(MetricName(name), metric.WithDescription(desc))
	if err != nil {
		return noop.Float64Gauge{}
	}
	return g
}
