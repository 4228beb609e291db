package server

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/errdefs"
)

// Detached execs (agent.ExecParams.Detach) outlive the host connection
// that started them: when it drops, their output goes to a bounded buffer
// (outSink) and their result is kept, until an exec.attach call on a new
// connection takes them over. The host restarts; the sandbox's commands
// do not notice.

// errCallCancelled is the cause of a call ended by the host's "cancel"
// notification, as opposed to its connection dropping.
var errCallCancelled = errors.New("call cancelled by the host")

// maxFinishedDetached bounds the results of detached processes kept for an
// attach that has not come yet; the oldest go first.
const maxFinishedDetached = 64

// outSink passes one exec's output events to the call attached to it, or
// keeps them while none is.
type outSink struct {
	mu      sync.Mutex
	out     func(agent.OutputEvent) // the attached call's; nil while detached
	gen     int                     // counts attachments
	buf     []agent.OutputEvent
	bytes   int64
	dropped int64
	res     *agent.ExecResult
	done    chan struct{} // closed with res set
}

func newOutSink(out func(agent.OutputEvent)) *outSink {
	return &outSink{out: out, done: make(chan struct{})}
}

// emit delivers ev to the attached call, or keeps it, dropping the oldest
// kept output past agent.DetachedOutput.
func (k *outSink) emit(ev agent.OutputEvent) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.out != nil {
		k.out(ev)
		return
	}
	if ev.Stream == agent.Start {
		return // attach sends its own
	}
	k.buf = append(k.buf, ev)
	k.bytes += int64(len(ev.Data))
	for k.bytes > agent.DetachedOutput && len(k.buf) > 1 {
		k.bytes -= int64(len(k.buf[0].Data))
		k.dropped += int64(len(k.buf[0].Data))
		k.buf[0] = agent.OutputEvent{}
		k.buf = k.buf[1:]
	}
}

// detach stops delivering to the current call.
func (k *outSink) detach() {
	k.mu.Lock()
	k.out = nil
	k.mu.Unlock()
}

// attach delivers what was kept to out, then everything new, and returns
// the attachment's number for release.
func (k *outSink) attach(out func(agent.OutputEvent)) int {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.dropped > 0 {
		out(agent.OutputEvent{Stream: agent.Stderr, Data: fmt.Sprintf("\n[sandlot: %d bytes of output dropped here while no one was attached]\n", k.dropped)})
		k.dropped = 0
	}
	for _, ev := range k.buf {
		out(ev)
	}
	k.buf, k.bytes = nil, 0
	k.gen++
	k.out = out
	return k.gen
}

// release detaches attachment gen, unless a newer one took over.
func (k *outSink) release(gen int) {
	k.mu.Lock()
	if k.gen == gen {
		k.out = nil
	}
	k.mu.Unlock()
}

func (k *outSink) finish(res *agent.ExecResult) {
	k.mu.Lock()
	k.res = res
	k.mu.Unlock()
	close(k.done)
}

// detachedTable holds the sinks of detached processes by pid, and the
// order in which their processes finished.
type detachedTable struct {
	mu       sync.Mutex
	sinks    map[int]*outSink
	finished []int
}

func (t *detachedTable) add(pid int, k *outSink) {
	t.mu.Lock()
	if t.sinks == nil {
		t.sinks = map[int]*outSink{}
	}
	t.sinks[pid] = k
	t.mu.Unlock()
}

func (t *detachedTable) get(pid int) *outSink {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.sinks[pid]
}

// ended records that pid's process finished; past maxFinishedDetached
// results the oldest is forgotten.
func (t *detachedTable) ended(pid int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.finished = append(t.finished, pid)
	for len(t.finished) > maxFinishedDetached {
		delete(t.sinks, t.finished[0])
		t.finished = t.finished[1:]
	}
}

// remove forgets pid's sink once an attach took its result.
func (t *detachedTable) remove(pid int, k *outSink) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.sinks[pid] == k {
		delete(t.sinks, pid)
	}
}

// attach serves exec.attach: pid's kept output, then its live output,
// then its result. The call ending early (cancel, connection dropped)
// detaches it again; the process runs on.
func (s *Server) attach(ctx context.Context, p agent.AttachParams, out func(agent.OutputEvent)) (*agent.ExecResult, error) {
	k := s.detached.get(p.PID)
	if k == nil {
		return nil, errf(errdefs.CodeNotFound, "process %d has no detached output to attach to", p.PID)
	}
	out(agent.OutputEvent{Stream: agent.Start, PID: p.PID})
	gen := k.attach(out)
	select {
	case <-k.done:
		k.release(gen)
		s.detached.remove(p.PID, k)
		k.mu.Lock()
		res := *k.res
		k.mu.Unlock()
		res.Stdout, res.Stderr = "", ""
		return &res, nil
	case <-ctx.Done():
		k.release(gen)
		return nil, errf(errdefs.CodeUnavailable, "attach to process %d: %v", p.PID, ctx.Err())
	}
}
