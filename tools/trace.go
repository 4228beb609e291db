package tools

import (
	"context"
	"encoding/json"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/sandlot/sandlot/telemetry"
)

// startSpan starts the span of one tool call, named tool.<name>
// (tool.run_code, tool.read_file, ...). The manager's spans nest under it.
func startSpan(ctx context.Context, call Call) (context.Context, trace.Span) {
	ctx, span := telemetry.Tracer().Start(ctx, telemetry.SpanName("tool."+call.Name))
	if !span.IsRecording() {
		return ctx, span
	}
	attrs := []attribute.KeyValue{
		telemetry.AttrTool.String(call.Name),
		telemetry.AttrToolForced.Bool(call.Forced),
	}
	id := call.Identity
	attrs = telemetry.IdentityAttrs(attrs, id.TenantID, id.ConversationID, id.PathID)
	var a struct {
		Language string `json:"language"`
	}
	if json.Unmarshal(call.Args, &a) == nil && a.Language != "" {
		attrs = append(attrs, telemetry.AttrLanguage.String(a.Language))
	}
	span.SetAttributes(attrs...)
	return ctx, span
}
