package mcp

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"sync"
	"testing"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/contexts/contextstest"
	"github.com/sandlot/sandlot/guard"
	"github.com/sandlot/sandlot/store/memory"
	"github.com/sandlot/sandlot/tools"
)

// kernelDriver is a minimal persistent python kernel: one JSON request per
// line, globals kept between requests.
const kernelDriver = `
import sys, json, io, contextlib, traceback
g = {"__name__": "__main__"}
for line in sys.stdin:
    req = json.loads(line)
    out, err = io.StringIO(), io.StringIO()
    error = None
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            exec(compile(req["code"], "<cell>", "exec"), g)
        except Exception as e:
            error = {"name": type(e).__name__, "value": str(e), "traceback": traceback.format_exc()}
    sys.stdout.write(json.dumps({"success": error is None, "stdout": out.getvalue(), "stderr": err.getvalue(), "error": error}) + "\n")
    sys.stdout.flush()
`

// pythons runs one persistent python3 process per fake sandbox, standing
// in for the agent's python kernel.
type pythons struct {
	mu      sync.Mutex
	kernels map[string]*kernel // by sandbox id
}

type kernel struct {
	mu  sync.Mutex // one cell at a time
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Reader
}

func (p *pythons) get(id string) (*kernel, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if k, ok := p.kernels[id]; ok {
		return k, nil
	}
	cmd := exec.Command("/usr/bin/python3", "-u", "-c", kernelDriver)
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	k := &kernel{cmd: cmd, in: in, out: bufio.NewReader(out)}
	p.kernels[id] = k
	return k, nil
}

func (p *pythons) run(ctx context.Context, sb *contextstest.Sandbox, rp agent.RunCodeParams, out contexts.OutputFunc) (*agent.RunCodeResult, error) {
	if rp.Language != agent.Python {
		return contextstest.Echo(ctx, sb, rp, out)
	}
	k, err := p.get(sb.ID())
	if err != nil {
		return nil, err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	line, _ := json.Marshal(map[string]string{"code": rp.Code})
	if _, err := k.in.Write(append(line, '\n')); err != nil {
		return nil, err
	}
	resp, err := k.out.ReadBytes('\n')
	if err != nil {
		return nil, err
	}
	var res agent.RunCodeResult
	if err := json.Unmarshal(resp, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

func (p *pythons) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, k := range p.kernels {
		k.in.Close()
		k.cmd.Wait()
	}
}

// stack is the real manager (memory store, real guard) over a fake
// provider whose python kernels are real python3 processes.
type stack struct {
	manager *contexts.Manager
	reg     *tools.Registry
	guard   *guard.Guard
	calls   chan tools.CallEvent
}

func newStack(t *testing.T) *stack {
	t.Helper()
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("python3 missing in CI: %v", err)
		}
		t.Skip("no /usr/bin/python3")
	}
	g, err := guard.New(guard.Config{})
	if err != nil {
		t.Fatal(err)
	}
	py := &pythons{kernels: map[string]*kernel{}}
	prov := contextstest.NewProvider()
	prov.Run = py.run
	m := contexts.NewManager(memory.New(), prov, contexts.Config{Guard: g, PoolSize: -1})
	ctx := context.Background()
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		m.Close(ctx)
		py.close()
	})
	s := &stack{manager: m, guard: g, calls: make(chan tools.CallEvent, 100)}
	s.reg = tools.New(m, tools.Config{OnCall: func(_ context.Context, ev tools.CallEvent) { s.calls <- ev }})
	return s
}

// lastCall returns the most recent call event.
func (s *stack) lastCall(t *testing.T) tools.CallEvent {
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
