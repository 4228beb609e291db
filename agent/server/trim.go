package server

import (
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"time"
)

// idleTrimAfter is how long the agent waits, once no call is in flight,
// before it gives its free heap back to the kernel.
const idleTrimAfter = 250 * time.Millisecond

// idleTrimMin is how much the agent must have allocated since its last
// trim (or its start) for a trim to pay: the first GC leaves 0.5-1 MiB of
// the runtime's own metadata behind, so trimming less garbage than about
// that gains nothing (measured: BENCHMARKS.md, notes, 2026-11-30).
const idleTrimMin = 512 << 10

// idleTrim returns the agent's free memory to the kernel once it goes
// idle. The agent's heap only grows between calls (each allocates a few KB
// of garbage), and with its small live heap the Go runtime runs no GC
// until the heap reaches its 4 MB minimum goal, nor gives back what that
// GC frees: an idle context kept whatever its last calls left, up to ~4
// MB, for as long as it stayed idle. One forced GC and scavenge per idle
// spell (under a millisecond of CPU on a heap this size, after the reply is
// written) leaves the live heap only. Pings are answered inline and do not
// count as calls, so a health check neither delays nor repeats the trim.
type idleTrim struct {
	after time.Duration
	min   uint64
	free  func()        // debug.FreeOSMemory; tests replace it
	alloc func() uint64 // bytes allocated since the start; tests replace it

	mu    sync.Mutex
	busy  int         // calls in flight
	timer *time.Timer // armed when busy drops to zero; nil before the first call
	mark  uint64      // alloc() after the last trim, or at the start
}

func newIdleTrim(after time.Duration, min uint64) *idleTrim {
	t := &idleTrim{after: after, min: min, free: debug.FreeOSMemory, alloc: heapAllocs}
	t.mark = t.alloc()
	return t
}

// heapAllocs is the heap's cumulative allocations in bytes.
func heapAllocs() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
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
// the timer again) or too little was allocated since the last trim.
// The trim runs outside mu: a call that begins meanwhile does not wait.
func (t *idleTrim) fire() {
	t.mu.Lock()
	if t.busy > 0 || t.alloc()-t.mark < t.min {
		t.mu.Unlock()
		return
	}
	t.mu.Unlock()
	t.free()
	a := t.alloc()
	t.mu.Lock()
	t.mark = a
	t.mu.Unlock()
}
