package local

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"
)

// TestCreationSlots: no more than MaxCreating creations run at once; a
// caller waits for a slot while its context allows, and a released slot
// goes to a waiter.
func TestCreationSlots(t *testing.T) {
	p := &Provider{creating: make(chan struct{}, 2), log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	ctx := context.Background()
	r1, err := p.slot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	r2, err := p.slot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if _, err := p.slot(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("third slot with both taken: %v, want deadline exceeded", err)
	}
	got := make(chan error, 1)
	go func() {
		r, err := p.slot(ctx)
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
