package server

import (
	"context"
	"io"
	"net"
	"testing"
	"time"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/agent/internal/rawio"
)

// TestIdleTrim: a call's end arms the trim; it runs once the agent is
// idle, not while a call is in flight, and once per idle period. Before,
// nothing gave an idle agent's garbage back (its heap stayed at what its
// last calls left, up to the runtime's 4 MB minimum goal).
func TestIdleTrim(t *testing.T) {
	freed := make(chan struct{}, 10)
	tr := newIdleTrim(time.Millisecond)
	tr.free = func() { freed <- struct{}{} }

	tr.begin()
	tr.begin()
	tr.end() // one call still in flight: nothing armed
	if tr.timer != nil {
		t.Fatal("the trim was armed with a call in flight")
	}
	tr.end()
	waitFreed(t, freed)

	// A call that begins before the timer fires holds the trim off.
	tr.begin()
	tr.fire()
	select {
	case <-freed:
		t.Fatal("trimmed with a call in flight")
	default:
	}
	tr.end()
	waitFreed(t, freed)
}

// TestServeArmsIdleTrim: every call the agent serves goes through the
// idle trim, so an agent that answered calls trims once it is idle.
func TestServeArmsIdleTrim(t *testing.T) {
	s := New(Config{Home: t.TempDir()})
	freed := make(chan struct{}, 10)
	s.trim = newIdleTrim(time.Millisecond)
	s.trim.free = func() { freed <- struct{}{} }
	host, side := net.Pipe()
	defer host.Close()
	defer side.Close()
	go io.Copy(io.Discard, host) // the replies
	c := &conn{s: s, c: side, rw: rawio.ReadWriter(side), cancel: func() {}, running: map[uint64]context.CancelCauseFunc{}}
	c.serve(context.Background(), 1, &agent.Request{Method: "no.such.method"})
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
