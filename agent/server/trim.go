package server

import (
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"time"
)

// idleTrimAfter is how long the agent waits, once no call is in flight,
// before it gives its free heap back to the kernel.
const idleTrimAfter = 250 * time.Millisecond

// idleTrimMin is how much the agent must have allocated since its last
// trim (or its start) for a trim to pay: the first GC leaves 0.8-1 MiB of
// the runtime's own metadata behind for good (mostly the blocks and spines
// of the span sets of each size class in use), so trimming less garbage
// than about that gains nothing. A higher minimum for the first trim only
// (1 MiB) measured worse: the bench's contexts, left with up to 1 MiB of
// calls' garbage, held more than that metadata costs (BENCHMARKS.md,
// notes, 2026-11-30).
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

	// A call pays two atomic adds, a clock read, a store and a failed
	// compare-and-swap: no lock and no timer reset on the warm path. The
	// timer is armed once per idle spell and, when calls came since, sleeps
	// again for the rest.
	busy  atomic.Int64 // calls in flight
	last  atomic.Int64 // when the last call ended, as time.Since(epoch)
	armed atomic.Bool  // a timer will call fire
	epoch time.Time

	mu   sync.Mutex // guards mark
	mark uint64     // alloc() when the last trim began, or at the start
}

func newIdleTrim(after time.Duration, min uint64) *idleTrim {
	t := &idleTrim{after: after, min: min, free: debug.FreeOSMemory, alloc: heapAllocs, epoch: time.Now()}
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
	t.busy.Add(1)
}

// end marks a call done; the last one in flight arms the trim unless a
// timer is armed already.
func (t *idleTrim) end() {
	t.last.Store(int64(time.Since(t.epoch)))
	if t.busy.Add(-1) == 0 && t.armed.CompareAndSwap(false, true) {
		time.AfterFunc(t.after, t.fire)
	}
}

// fire trims once the agent has been idle for t.after and allocated
// t.min since the last trim. With a call in flight it leaves the arming
// to that call's end; when a call ended less than t.after ago it sleeps
// for the rest. The trim runs outside mu: nothing on a call's path waits
// for it.
func (t *idleTrim) fire() {
	t.armed.Store(false)
	if t.busy.Load() > 0 {
		return
	}
	if wait := t.after - (time.Since(t.epoch) - time.Duration(t.last.Load())); wait > 0 {
		if t.armed.CompareAndSwap(false, true) {
			time.AfterFunc(wait, t.fire)
		}
		return
	}
	t.mu.Lock()
	a := t.alloc()
	enough := a-t.mark >= t.min
	if enough {
		t.mark = a
	}
	t.mu.Unlock()
	if enough {
		t.free()
	}
}
