package server

import (
	"runtime/debug"
	"sync"
	"time"
)

// idleTrimAfter is how long the agent waits, once no call is in flight,
// before it gives its free heap back to the kernel.
const idleTrimAfter = 250 * time.Millisecond

// idleTrim returns the agent's free memory to the kernel once it goes
// idle. The agent's heap only grows between calls (each allocates a few KB
// of garbage), and with its small live heap the Go runtime runs no GC
// until the heap reaches its 4 MB minimum goal: an idle context kept
// whatever its last calls left, 1-4 MB of garbage, for as long as it
// stayed idle. One forced GC and scavenge per idle period (under a
// millisecond of CPU on a heap this size, after the reply is written)
// leaves the live heap only. Pings are answered inline and do not count
// as calls, so a health check neither delays nor repeats the trim.
type idleTrim struct {
	after time.Duration
	free  func() // debug.FreeOSMemory; tests replace it

	mu    sync.Mutex
	busy  int         // calls in flight
	timer *time.Timer // armed when busy drops to zero; nil before the first call
}

func newIdleTrim(after time.Duration) *idleTrim {
	return &idleTrim{after: after, free: debug.FreeOSMemory}
}

// begin marks a call in flight.
func (t *idleTrim) begin() {
	t.mu.Lock()
	t.busy++
	t.mu.Unlock()
}

// end marks a call done; the last one arms (or pushes back) the trim.
func (t *idleTrim) end() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.busy--; t.busy > 0 {
		return
	}
	if t.timer == nil {
		t.timer = time.AfterFunc(t.after, t.fire)
		return
	}
	t.timer.Reset(t.after)
}

// fire trims unless a call began since the timer was armed (its end arms
// the timer again).
func (t *idleTrim) fire() {
	t.mu.Lock()
	busy := t.busy
	t.mu.Unlock()
	if busy == 0 {
		t.free()
	}
}
