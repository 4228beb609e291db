package local

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/sandlot/sandlot/contexts"
)

// TestCreationSlots: no more than MaxCreating creations run at once; a
// caller waits for a slot while its context allows, and a released slot
// goes to a waiter.
func TestCreationSlots(t *testing.T) {
	p := &Provider{creating: make(chan struct{}, 2), log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	ctx := context.Background()
	r1, err := p.slot(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	r2, err := p.slot(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if _, err := p.slot(short, nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("third slot with both taken: %v, want deadline exceeded", err)
	}
	got := make(chan error, 1)
	go func() {
		r, err := p.slot(ctx, nil)
		if err == nil {
			r()
		}
		got <- err
	}()
	select {
	case err := <-got:
		t.Fatalf("a waiter got a slot while both were taken (err %v)", err)
	case <-time.After(20 * time.Millisecond):
	}
	r1()
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("waiter: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a released slot did not reach the waiter")
	}
	r2()
	if n := len(p.creating); n != 0 {
		t.Errorf("%d slots still held after every release", n)
	}
}

// TestSlotRaisesBackground: a create that must wait for a creation slot
// held by a warm pool's sandbox at the lowest CPU priority raises that
// one (it stands in the create's way: under load it would starve behind
// the create's own work), and a background create that takes a slot
// while such a create waits starts raised.
func TestSlotRaisesBackground(t *testing.T) {
	p := &Provider{creating: make(chan struct{}, 1), log: slog.New(slog.DiscardHandler)}
	ctx := context.Background()
	held := &contexts.Priority{}
	raised := make(chan struct{}, 1)
	release, err := p.slot(ctx, held)
	if err != nil {
		t.Fatal(err)
	}
	held.Lowered(ctx, func(context.Context) error { raised <- struct{}{}; return nil })
	got := make(chan func(), 1)
	go func() {
		r, err := p.slot(ctx, nil)
		if err != nil {
			t.Error(err)
		}
		got <- r
	}()
	select {
	case <-raised:
	case <-time.After(10 * time.Second):
		t.Fatal("the background creation holding the slot was not raised")
	}
	release()
	(<-got)()
	// A background create that takes a free slot while another create
	// waits for one (a slot may go to either) starts raised.
	p.slotMu.Lock()
	p.slotWaiters++
	p.slotMu.Unlock()
	later := &contexts.Priority{}
	lr, err := p.slot(ctx, later)
	if err != nil {
		t.Fatal(err)
	}
	lr()
	if later.Low() {
		t.Error("a background create took a slot while a create waited, and is still low")
	}
}
