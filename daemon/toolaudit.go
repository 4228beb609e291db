package daemon

import (
	"context"
	"strconv"

	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/store/audit"
	"github.com/sandlot/sandlot/tools"
)

// toolAudit is the tool registry's OnCall: each call ends as a tool.call
// event of the audit trail, through the trail's writer (batched, fair
// across tenants, dropped and counted past its bounds, so a busy tenant
// neither slows its calls nor crowds out another's events). The web
// console reads a context's calls from it.
func toolAudit(trail *audit.Writer) func(ctx context.Context, ev tools.CallEvent) {
	return func(_ context.Context, ev tools.CallEvent) {
		code := ""
		if ev.Err != nil {
			code = string(errdefs.CodeOf(ev.Err))
		}
		trail.Add(audit.Event{TenantID: ev.Identity.TenantID, Kind: audit.KindToolCall, Detail: map[string]string{
			"tool": ev.Tool, "conversation": ev.Identity.ConversationID, "path": ev.Identity.PathID,
			"user": ev.Identity.UserID, "forced": strconv.FormatBool(ev.Forced),
			"durationMs": strconv.FormatInt(ev.Duration.Milliseconds(), 10), "code": code,
		}})
	}
}
