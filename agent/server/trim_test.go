package server

import (
	"context"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/agent/internal/rawio"
)

// fakeTrim is an idle trim whose allocations the test sets and whose
// trims it counts on freed.
func fakeTrim(min uint64) (*idleTrim, *atomic.Uint64, chan struct{}) {
	var allocs atomic.Uint64
	freed := make(chan struct{}, 10)
	tr := newIdleTrim(time.Millisecond, min)
	tr.alloc = allocs.Load
	tr.mark = 0
	tr.free = func() { freed <- struct{}{} }
	return tr, &allocs, freed
}

// TestIdleTrim: a call's end arms the trim; it runs once the agent is
// idle, not while a call is in flight, and only when enough was
// allocated since the last one. Before, nothing gave an idle agent's
// garbage back (its heap stayed at what its last calls left, up to the
// runtime's 4 MB minimum goal).
func TestIdleTrim(t *testing.T) {
	tr, allocs, freed := fakeTrim(100)
	allocs.Store(100)

	tr.begin()
	tr.begin()
	tr.end() // one call still in flight: nothing armed
	if tr.armed.Load() {
		t.Fatal("the trim was armed with a call in flight")
	}
	tr.end()
	waitFreed(t, freed)

	// A call that begins before the timer fires holds the trim off.
	allocs.Store(300)
	tr.begin()
	tr.fire()
	noTrim(t, freed, "with a call in flight")
	tr.end()
	waitFreed(t, freed)

	// Too little allocated since the last trim: none. (The agent has
	// been idle for t.after since the trim above.)
	allocs.Store(350)
	tr.fire()
	noTrim(t, freed, "50 bytes after the last trim, with 100 the minimum")
}

// TestServeArmsIdleTrim: every call the agent serves goes through the
// idle trim, so an agent that answered calls trims once it is idle.
func TestServeArmsIdleTrim(t *testing.T) {
	s := New(Config{Home: t.TempDir()})
	tr, allocs, freed := fakeTrim(1)
	allocs.Store(1)
	s.trim = tr
	host, side := net.Pipe()
	defer host.Close()
	defer side.Close()
	go io.Copy(io.Discard, host) // the replies
	c := &conn{s: s, c: side, rw: rawio.ReadWriter(side), cancel: func() {}, running: map[uint64]context.CancelCauseFunc{}}
	ctx, cancel := c.track(context.Background(), 1)
	c.serve(ctx, cancel, 1, &agent.Request{Method: "no.such.method"})
	waitFreed(t, freed)
}

func waitFreed(t *testing.T, freed <-chan struct{}) {
	t.Helper()
	select {
	case <-freed:
	case <-time.After(30 * time.Second):
		t.Fatal("no trim once idle")
	}
}

func noTrim(t *testing.T, freed <-chan struct{}, when string) {
	t.Helper()
	select {
	case <-freed:
		t.Fatal("trimmed " + when)
	default:
	}
}
