package contexts_test

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/sandlot/sandlot/contexts"
)

// BenchmarkRealSuspendWake measures suspend to disk on crun sandboxes of
// the default image, a python context with a file written: the time to
// suspend, the time from the call that wakes it to its first result (a
// new sandbox, python started), the memory its sandbox held before
// (cgroup) and what the suspended context holds on the host after (its
// sandbox's: none, it is destroyed; the daemon's heap grown per context
// created and suspended, over b.N contexts). docs/state.md, "Suspend to disk".
func BenchmarkRealSuspendWake(b *testing.B) {
	e := newSuspendEnv(b)
	var suspend, wake time.Duration
	var sandboxMem int64
	ids := make([]contexts.Identity, b.N)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := range b.N {
		ids[i] = ident("t1", fmt.Sprintf("bench-%d", i), "main")
		res := e.exec(ids[i], "open('/home/user/kept.txt', 'w').write('x' * 1000)\nx = 1")
		if u, err := e.p.Usage(e.ctx, res.SandboxID); err == nil {
			sandboxMem += u.MemoryBytes
		}
	}
	b.ResetTimer()
	for i := range b.N {
		rec, err := e.m.Lookup(e.ctx, ids[i])
		if err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		if _, err := e.m.Suspend(e.ctx, "t1", rec.ID, 0); err != nil {
			b.Fatal(err)
		}
		suspend += time.Since(start)
	}
	b.StopTimer()
	runtime.GC()
	runtime.ReadMemStats(&after)
	if n, _ := e.p.List(e.ctx); len(n) != 0 {
		b.Fatalf("%d sandboxes run with every context suspended", len(n))
	}
	for i := range b.N {
		start := time.Now()
		res := e.exec(ids[i], "len(open('/home/user/kept.txt').read())")
		wake += time.Since(start)
		if !res.Woken || mainResult(res) != "1000" {
			b.Fatalf("wake: %+v", res)
		}
	}
	n := float64(b.N)
	b.ReportMetric(float64(suspend.Milliseconds())/n, "suspend-ms/op")
	b.ReportMetric(float64(wake.Milliseconds())/n, "wake-to-result-ms/op")
	b.ReportMetric(float64(sandboxMem)/n/(1<<20), "running-MiB/ctx")
	// The daemon's heap grown by b.N contexts created and suspended: their
	// entries, records (memory store) and what their calls left.
	b.ReportMetric((float64(after.HeapAlloc)-float64(before.HeapAlloc))/n/1024, "suspended-daemon-heap-KiB/ctx")
}

// BenchmarkRealSuspendWakeMemory is BenchmarkRealSuspendWake on runsc,
// where the suspend keeps the memory (a checkpoint, the writable layer
// stowed on disk) and the wake restores it: the suspend, the call that
// wakes the context to its first result (x + 1 in the kernel that kept x,
// goal < 300 ms), and the host memory each suspended context holds, having
// written 1 MiB (its sandbox's processes and host tmpfs mounts, goal
// < 1 MiB). docs/state.md, "Suspend with memory".
func BenchmarkRealSuspendWakeMemory(b *testing.B) {
	e := newSuspendEnvOn(b, "runsc")
	var suspend, wake time.Duration
	var held int64
	ids := make([]contexts.Identity, b.N)
	sandboxes := make([]string, b.N)
	for i := range b.N {
		ids[i] = ident("t1", fmt.Sprintf("bench-%d", i), "main")
		res := e.exec(ids[i], "open('/home/user/blob', 'wb').write(b'b' * (1 << 20))\nx = 41")
		sandboxes[i] = res.SandboxID
	}
	b.ResetTimer()
	for i := range b.N {
		rec, err := e.m.Lookup(e.ctx, ids[i])
		if err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		out, err := e.m.Suspend(e.ctx, "t1", rec.ID, 0)
		if err != nil {
			b.Fatal(err)
		}
		suspend += time.Since(start)
		if !out.KeepsMemory() {
			b.Fatalf("suspend on runsc did not keep the memory: %+v", out)
		}
	}
	b.StopTimer()
	for i := range b.N {
		h, procs := sandboxHostMemory(b, e.dir, sandboxes[i])
		if procs != 0 {
			b.Fatalf("%d processes of suspended sandbox %s run on the host", procs, sandboxes[i])
		}
		held += h
	}
	for i := range b.N {
		start := time.Now()
		res := e.exec(ids[i], "x + 1")
		wake += time.Since(start)
		if !res.Restored || mainResult(res) != "42" {
			b.Fatalf("wake: %+v", res)
		}
	}
	n := float64(b.N)
	b.ReportMetric(float64(suspend.Milliseconds())/n, "suspend-ms/op")
	b.ReportMetric(float64(wake.Milliseconds())/n, "wake-to-result-ms/op")
	b.ReportMetric(float64(held)/n/1024, "suspended-host-KiB/ctx")
}
