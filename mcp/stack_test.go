package mcp

import (
	"context"
	"testing"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/guard"
	"github.com/sandlot/sandlot/store/memory"
	"github.com/sandlot/sandlot/tools"
	"github.com/sandlot/sandlot/tools/toolstest"
)

// stack is the real manager (memory store, real guard) over real
// sandlot-agent processes on the host (toolstest.HostProvider).
type stack struct {
	manager *contexts.Manager
	reg     *tools.Registry
	guard   *guard.Guard
	calls   chan tools.CallEvent
}

func newStack(t *testing.T) *stack { return newStackTB(t) }

func newStackTB(t testing.TB) *stack {
	t.Helper()
	toolstest.RequirePython(t)
	g, err := guard.New(guard.Config{})
	if err != nil {
		t.Fatal(err)
	}
	m := contexts.NewManager(memory.New(), toolstest.NewHostProvider(t), contexts.Config{Guard: g, PoolSize: -1})
	ctx := context.Background()
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close(ctx) })
	s := &stack{manager: m, guard: g, calls: make(chan tools.CallEvent, 100)}
	s.reg = tools.New(m, tools.Config{OnCall: func(_ context.Context, ev tools.CallEvent) {
		select {
		case s.calls <- ev:
		default: // benchmarks do not read events
		}
	}})
	return s
}

// lastCall returns the most recent call event.
func (s *stack) lastCall(t testing.TB) tools.CallEvent {
	t.Helper()
	var ev tools.CallEvent
	for {
		select {
		case ev = <-s.calls:
		default:
			if ev.Tool == "" {
				t.Fatal("no tool call recorded")
			}
			return ev
		}
	}
}

var _ tools.Contexts = (*contexts.Manager)(nil)
