package contexts_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/errdefs"
)

// TestRealForkMemoryCallInFlight (runsc): cells run on the source, one
// after another, while it is forked with memory (its agent lets go of its
// channel under them). Each completes or fails with a retryable error on
// the same context, never ends it; afterwards the source still answers
// x == 41 on its sandbox. Before, a cell that met the release ended the
// source as lost.
func TestRealForkMemoryCallInFlight(t *testing.T) {
	const cellStarted = "cell started"
	e := newSuspendEnvOn(t, "runsc")
	a := ident("t1", "forkflight", "main")
	res := e.exec(a, "import time\nx = 41")
	if !res.Success {
		t.Fatalf("setup: %+v", res)
	}
	cid, sid := res.ContextID, res.SandboxID
	var stop atomic.Bool
	type outcome struct {
		res *contexts.ExecuteResult
		err error
	}
	outs := make(chan outcome, 1000)
	done := make(chan struct{})
	// Each cell says it has started (printed, flushed, streamed) before
	// it sleeps: the fork waits for the first one's word, so it comes in
	// that cell's middle or the next one's.
	started := make(chan struct{})
	var once sync.Once
	out := func(ev agent.OutputEvent) {
		if ev.Stream == "stdout" && strings.Contains(ev.Data, cellStarted) {
			once.Do(func() { close(started) })
		}
	}
	go func() {
		defer close(done)
		for !stop.Load() {
			ctx, cancel := context.WithTimeout(e.ctx, 2*time.Minute)
			r, err := e.m.Execute(ctx, a, contexts.ExecuteRequest{Language: "python", Code: "print(" + strconv.Quote(cellStarted) + ", flush=True)\ntime.sleep(2)\nx", Timeout: time.Minute}, out)
			cancel()
			outs <- outcome{r, err}
		}
	}()
	select {
	case <-started:
	case <-time.After(2 * time.Minute):
		stop.Store(true)
		<-done
		t.Fatal("the first cell did not say it had started within 2 minutes")
	}
	ctx, cancel := context.WithTimeout(e.ctx, 3*time.Minute)
	defer cancel()
	start := time.Now()
	fr, err := e.m.Fork(ctx, "t1", cid, "branch")
	t.Logf("fork took %v", time.Since(start))
	stop.Store(true)
	<-done
	close(outs)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for o := range outs {
		n++
		switch {
		case o.err != nil:
			var f *contexts.Failure
			if errors.As(o.err, &f) && f.StateLost || !errors.Is(o.err, errdefs.ErrUnavailable) {
				t.Errorf("a cell during the fork: %v, want a retryable error", o.err)
			}
		case o.res.ContextID != cid || o.res.StateLost:
			t.Errorf("a cell during the fork ran on context %s (state lost %v), want %s", o.res.ContextID, o.res.StateLost, cid)
		}
	}
	t.Logf("%d cells during the fork; fork memory %v", n, fr.Memory)
	if r := e.exec(a, "x == 41"); mainResult(r) != "True" || r.ContextID != cid || r.SandboxID != sid {
		t.Fatalf("the source after the fork: %q on %s/%s (%+v), want True on %s/%s", mainResult(r), r.ContextID, r.SandboxID, r.Error, cid, sid)
	}
}
