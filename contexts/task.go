package contexts

import (
	"context"
)

// The guard resolves its mode per tenant and per task type (001 §7.1:
// resolveEffectiveMode({tenantId, taskType: 'sandbox-execution'})): the
// kind of work whose output it judges travels in the call's context, and
// the guard reads it there (guard.Config.TaskModes).

// Task types of the output that passes the guard.
const (
	// TaskSandboxExecution is everything that leaves an execution
	// context through the manager: run results, streamed output, files,
	// errors, exec output (every edge's, E2B's included).
	TaskSandboxExecution = "sandbox-execution"
	// TaskTemplateBuild is a template build's output (RUN steps' logs,
	// errors: templates/builds).
	TaskTemplateBuild = "template-build"
	// TaskStoredRecord is text the manager writes into the store (a
	// record's last error). The guard holds it to its enforce mode
	// whatever the tenant's mode: the specifications forbid storing
	// secrets and PII (000 §5.4), while a tenant's mode only says what
	// its callers see.
	TaskStoredRecord = "stored-record"
)

type taskKey struct{}

// WithTaskType returns ctx saying that the output guarded under it is of
// task type task.
func WithTaskType(ctx context.Context, task string) context.Context {
	return context.WithValue(ctx, taskKey{}, task)
}

// TaskTypeOf is the task type ctx carries ("" none).
func TaskTypeOf(ctx context.Context) string {
	t, _ := ctx.Value(taskKey{}).(string)
	return t
}

// taskGuard labels every call to the guard it wraps with a task type,
// unless the call's context names one already. The manager wraps its
// Config.Guard in one for TaskSandboxExecution, so that no path of its
// output (results, streams, the guarded sandbox, errors) goes unlabelled.
type taskGuard struct {
	g    Guard
	task string
}

func (t taskGuard) label(ctx context.Context) context.Context {
	if TaskTypeOf(ctx) != "" {
		return ctx
	}
	return WithTaskType(ctx, t.task)
}

func (t taskGuard) Text(ctx context.Context, tenantID, s string) string {
	return t.g.Text(t.label(ctx), tenantID, s)
}

func (t taskGuard) Stream(ctx context.Context, tenantID string) StreamRedactor {
	return t.g.Stream(t.label(ctx), tenantID)
}

func (t taskGuard) File(ctx context.Context, tenantID string) FileRedactor {
	return t.g.File(t.label(ctx), tenantID)
}

func (t taskGuard) Image(ctx context.Context, tenantID, format string, data []byte) ([]byte, string) {
	return t.g.Image(t.label(ctx), tenantID, format, data)
}
