package tools

import (
	"context"
	"encoding/json"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/sandlot/sandlot/telemetry"
)

// spanKey carries a tool call's span in its context, for noteSandbox.
type spanKey struct{}

// startSpan starts the span of one tool call, named tool.<name>
// (tool.run_code, tool.read_file, ...), or compliance.tool.<name> with the
// specification's names (telemetry.NamesSpec). The manager's spans nest
// under it.
func startSpan(ctx context.Context, call Call) (context.Context, trace.Span) {
	ctx, span := telemetry.Tracer().Start(ctx, telemetry.ToolSpanName(call.Name))
	if !span.IsRecording() {
		return ctx, span
	}
	attrs := []attribute.KeyValue{
		telemetry.AttrTool.String(call.Name),
		telemetry.AttrToolForced.Bool(call.Forced),
	}
	id := call.Identity
	attrs = telemetry.IdentityAttrs(attrs, id.TenantID, id.UserID, id.ConversationID, id.PathID)
	var a struct {
		Language string `json:"language"`
	}
	if json.Unmarshal(call.Args, &a) == nil && a.Language != "" {
		attrs = append(attrs, telemetry.AttrLanguage.String(a.Language))
	}
	span.SetAttributes(attrs...)
	return context.WithValue(ctx, spanKey{}, span), span
}

// noteSandbox sets sandbox.id on the span of the tool call ctx belongs
// to, once the call knows which sandbox it runs in (the manager's
// contexts are resolved under the tool's span, which starts before).
func noteSandbox(ctx context.Context, sandboxID string) {
	if span, ok := ctx.Value(spanKey{}).(trace.Span); ok && sandboxID != "" && span.IsRecording() {
		span.SetAttributes(telemetry.AttrSandbox.String(sandboxID))
	}
}
