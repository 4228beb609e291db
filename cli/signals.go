package cli

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"sync"
	"syscall"
)

// SignalContext is the context of one run of the binary: canceled by
// SIGTERM, and by SIGINT (Ctrl-C) unless a command took Ctrl-C for itself
// (takeInterrupts), as `run -i` does so that Ctrl-C interrupts the cell
// and not the session. stop releases the signals.
func SignalContext(parent context.Context) (ctx context.Context, stop context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(parent)
	in := &interrupts{}
	ctx = context.WithValue(ctx, interruptsKey{}, in)
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		for {
			select {
			case s := <-sigs:
				if s == os.Interrupt && in.deliver() {
					continue
				}
				cancel(fmt.Errorf("%v signal received", s))
				return
			case <-ctx.Done():
				return
			}
		}
	}()
	return ctx, func() {
		signal.Stop(sigs)
		cancel(context.Canceled)
	}
}

type interruptsKey struct{}

// interrupts routes SIGINT to the command that took it, if any.
type interrupts struct {
	mu    sync.Mutex
	taker chan struct{}
}

// deliver hands a SIGINT to the taker; false when there is none.
func (in *interrupts) deliver() bool {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.taker == nil {
		return false
	}
	select {
	case in.taker <- struct{}{}:
	default: // one pending interrupt is enough
	}
	return true
}

// takeInterrupts makes SIGINT arrive on the returned channel instead of
// canceling ctx, until release. Without a SignalContext (Run called from
// Go), the channel never fires.
func takeInterrupts(ctx context.Context) (intr <-chan struct{}, release func()) {
	in, _ := ctx.Value(interruptsKey{}).(*interrupts)
	if in == nil {
		return nil, func() {}
	}
	c := make(chan struct{}, 1)
	in.mu.Lock()
	in.taker = c
	in.mu.Unlock()
	return c, func() {
		in.mu.Lock()
		in.taker = nil
		in.mu.Unlock()
	}
}
