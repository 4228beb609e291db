package contexts

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/sandlot/sandlot/telemetry"
)

// Span names of the manager's operations (docs/observability.md).
const (
	spanGetOrCreate = "execution_context.get_or_create"
	spanExecute     = "execution_context.execute_code"
	spanTerminate   = "execution_context.terminate"
	spanCleanup     = "execution_context.cleanup"
)

// startSpan starts a manager span carrying id (as far as it is known).
// The tracer is the global one: a no-op until telemetry/export installs a
// provider, so untraced callers pay almost nothing.
func startSpan(ctx context.Context, name string, id Identity, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	ctx, span := telemetry.Tracer().Start(ctx, telemetry.SpanName(name))
	if !span.IsRecording() {
		return ctx, span
	}
	attrs = telemetry.IdentityAttrs(attrs, id.TenantID, id.UserID, id.ConversationID, id.PathID)
	span.SetAttributes(attrs...)
	return ctx, span
}

// endSpan records err (if any) on span and ends it.
func endSpan(span trace.Span, err error) { telemetry.EndSpan(span, err) }

// sandboxAttr sets sandbox.id on span from e. Precondition: mu not held.
func (m *Manager) sandboxAttr(span trace.Span, e *entry) {
	if e == nil || !span.IsRecording() {
		return
	}
	m.mu.Lock()
	sid := e.rec.SandboxID
	m.mu.Unlock()
	if sid != "" {
		span.SetAttributes(telemetry.AttrSandbox.String(sid))
	}
}

// terminateAttrs sets on a terminate span what the termination knows: the
// context's identity and id, its sandbox and the (guarded) last error.
func terminateAttrs(span trace.Span, rec *Record, sandboxID, lastErr string) {
	if !span.IsRecording() {
		return
	}
	attrs := telemetry.IdentityAttrs([]attribute.KeyValue{attrContext.String(rec.ID)}, rec.TenantID, rec.UserID, rec.ConversationID, rec.PathID)
	if sandboxID != "" {
		attrs = append(attrs, telemetry.AttrSandbox.String(sandboxID))
	}
	if lastErr != "" {
		attrs = append(attrs, attrLastError.String(lastErr))
	}
	span.SetAttributes(attrs...)
}

// terminateSpanKey marks a context whose terminate span is already open
// (Terminate, PathEvent): the terminations under it add none of their own.
type terminateSpanKey struct{}

func withTerminateSpan(ctx context.Context) context.Context {
	return context.WithValue(ctx, terminateSpanKey{}, true)
}

func inTerminateSpan(ctx context.Context) bool { return ctx.Value(terminateSpanKey{}) != nil }

// Manager-specific span attributes.
var (
	attrContext   = attribute.Key("execution_context.id")
	attrReason    = attribute.Key("execution_context.reason")
	attrLastError = attribute.Key("execution_context.last_error")
	attrTimedOut  = attribute.Bool("code.timed_out", true)
)

// currentSpan is the span ctx carries (a no-op one without).
func currentSpan(ctx context.Context) trace.Span { return trace.SpanFromContext(ctx) }
