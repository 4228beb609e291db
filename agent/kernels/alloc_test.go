package kernels

import (
	"context"
	"runtime"
	"testing"

	"github.com/sandlot/sandlot/agent"
)

// TestWarmRunAllocs pins the hot path's garbage: a warm python run must not
// allocate (or put on the stack) a fresh read buffer every time. It
// allocated 64 KiB per run, and a 32 KiB stack array grew every fresh
// handler goroutine's stack by copying.
func TestWarmRunAllocs(t *testing.T) {
	m := New(Config{Home: t.TempDir()})
	defer m.Close()
	ctx := context.Background()
	p := agent.RunCodeParams{Language: agent.Python, Code: "1+1"}
	run := func() {
		r, err := m.Run(ctx, p, nil)
		if err != nil || !r.Success {
			t.Fatalf("run: %+v %v", r, err)
		}
	}
	for i := 0; i < 10; i++ {
		run()
	}
	const n = 50
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for i := 0; i < n; i++ {
		run()
	}
	runtime.ReadMemStats(&after)
	if per := (after.TotalAlloc - before.TotalAlloc) / n; per > 16<<10 {
		t.Errorf("a warm run allocates %d bytes, want under 16 KiB", per)
	}
	// The agent runs each request on a fresh goroutine: a run must not
	// need a big stack (64 KiB and 32 KiB buffers used to live there, so
	// every request grew a new stack by copying). Park g goroutines after
	// one run each and look at the stack memory they hold.
	const g = 20
	release := make(chan struct{})
	ran := make(chan struct{})
	runtime.ReadMemStats(&before)
	for i := 0; i < g; i++ {
		go func() {
			run()
			ran <- struct{}{}
			<-release
		}()
	}
	for i := 0; i < g; i++ {
		<-ran
	}
	runtime.ReadMemStats(&after)
	close(release)
	if per := (int64(after.StackInuse) - int64(before.StackInuse)) / g; per > 32<<10 {
		t.Errorf("a run grows its goroutine's stack to about %d bytes, want under 32 KiB", per)
	}
}
