package guard

import (
	"context"
	"errors"
	"testing"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/tenant"
)

// TestTaskModes: the guard resolves its mode per (tenant, task type)
// (001 §7.1): a task type's mode (Config.TaskModes) raises the tenant's,
// never lowers it, and a request's override cannot go below it either; the
// audit event names the task type.
func TestTaskModes(t *testing.T) {
	const text = "mail alice@exemplar.ie now"
	const redacted = "mail [REDACTED:EMAIL] now"
	var log auditLog
	g := newTestGuard(t, Config{
		Audit:     log.audit,
		TaskModes: map[string]string{contexts.TaskSandboxExecution: ModeEnforce, contexts.TaskTemplateBuild: ModeReport},
		ModeFor:   func(context.Context, string) string { return ModeOff },
	})
	ctx := context.Background()
	exec := contexts.WithTaskType(ctx, contexts.TaskSandboxExecution)
	build := contexts.WithTaskType(ctx, contexts.TaskTemplateBuild)
	for _, c := range []struct {
		name string
		ctx  context.Context
		mode string
		want string
	}{
		{"tenant off, no task type", ctx, ModeOff, text},
		{"tenant off, sandbox execution held to enforce", exec, ModeEnforce, redacted},
		{"tenant off, template build held to report", build, ModeReport, text},
		{"an unknown task type: the tenant's", contexts.WithTaskType(ctx, "other"), ModeOff, text},
		{"an admin's off cannot go below the task's", WithMode(exec, ModeOff), ModeEnforce, redacted},
		{"a stricter tenant is kept", tenant.With(build, &tenant.Tenant{ID: "t1", GuardMode: ModeEnforce}), ModeEnforce, redacted},
	} {
		t.Run(c.name, func(t *testing.T) {
			log.events = nil
			if got := g.ModeOf(c.ctx, "t1"); got != c.mode {
				t.Fatalf("ModeOf = %s, want %s", got, c.mode)
			}
			if got := g.Text(c.ctx, "t1", text); got != c.want {
				t.Fatalf("Text = %q, want %q", got, c.want)
			}
			for _, ev := range log.events {
				if ev.Task != contexts.TaskTypeOf(c.ctx) || ev.Mode != c.mode {
					t.Fatalf("event %+v, want task %q mode %s", ev, contexts.TaskTypeOf(c.ctx), c.mode)
				}
			}
		})
	}
	if _, err := New(Config{TaskModes: map[string]string{contexts.TaskSandboxExecution: "loud"}}); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Fatalf("an unknown task mode: %v", err)
	}
}
