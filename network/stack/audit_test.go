package stack

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/sandlot/sandlot/network/audit"
)

// TestAuditQueue: events reach the writer in order with their context; a
// writer that blocks never blocks the connections: past Size waiting
// events new ones are dropped and counted; Close drains what is queued.
func TestAuditQueue(t *testing.T) {
	var mu sync.Mutex
	var got []string
	gate := make(chan struct{})
	q := NewAuditQueue(4, func(ctx context.Context, ev audit.Event, contextID string) error {
		<-gate
		mu.Lock()
		got = append(got, ev.Host+"@"+contextID)
		mu.Unlock()
		return errors.New("a failed write is logged, not fatal")
	}, nil)
	f := q.Func()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for _, h := range []string{"a", "b", "c", "d", "e", "f", "g", "h"} {
			f(audit.Event{Host: h}, "ctx1")
		}
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("enqueueing blocked on a stuck writer")
	}
	// One event may be with the writer, 4 wait; the rest are dropped.
	if d := q.Dropped(); d < 3 || d > 4 {
		t.Errorf("dropped %d, want 3 or 4", d)
	}
	close(gate)
	if err := q.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got)+int(q.Dropped()) != 8 || got[0] != "a@ctx1" {
		t.Errorf("written %v with %d dropped", got, q.Dropped())
	}
}
