package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/sandlot/sandlot/api"
	"github.com/sandlot/sandlot/api/server"
	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/store"
)

// wire assembles the daemon from the store: provider, guard, manager,
// tools, MCP and E2B compat. Parts not built yet answer unavailable, so the
// server still starts, serves health and keys, and says what is missing.
func wire(ctx context.Context, cfg serveConfig, st store.Backend, log *slog.Logger) (*wired, error) {
	w := &wired{
		contexts: unwired{},
		tools:    unwired{},
		ready: map[string]server.Check{
			"store":   storeCheck(st),
			"runtime": func(context.Context) error { return errors.New("no sandbox provider is wired into this build") },
		},
		close: func(context.Context) error { return nil },
	}
	log.Warn("sandbox provider, manager and tools are not wired into this build; tool and context routes answer 503")
	return w, nil
}

// unwired stands in for the manager and the tool registry until they are
// wired: every call is unavailable.
type unwired struct{}

var errUnwired = fmt.Errorf("execution contexts are not available in this build: %w", errdefs.ErrUnavailable)

func (unwired) Get(context.Context, string, string) (*contexts.Record, error) { return nil, errUnwired }
func (unwired) List(context.Context, contexts.Filter) ([]*contexts.Record, error) {
	return nil, errUnwired
}
func (unwired) Terminate(context.Context, string, string, contexts.Reason) error  { return errUnwired }
func (unwired) PathEvent(context.Context, contexts.Identity, api.PathEvent) error { return errUnwired }
func (unwired) Use(context.Context, contexts.Identity, func(context.Context, *contexts.Record, contexts.Sandbox) error) error {
	return errUnwired
}
func (unwired) Stats() api.SessionMetrics { return api.SessionMetrics{} }
func (unwired) Call(context.Context, server.ToolCall, contexts.OutputFunc) (any, error) {
	return nil, errUnwired
}
func (unwired) Export(string) (any, error) { return nil, errUnwired }
