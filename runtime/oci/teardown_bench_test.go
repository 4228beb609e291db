package oci

import (
	"context"
	"sort"
	"syscall"
	"testing"
	"time"

	"github.com/sandlot/sandlot/runtime"
)

// BenchmarkDelete measures Delete of a running probe sandbox (its create
// and dial are not timed): wall time, and the CPU it costs this process
// (the daemon's own: syscalls, forks of the runtime) apart from the CPU of
// the runtime binaries it runs (children).
func BenchmarkDelete(b *testing.B) {
	for _, kind := range []string{KindCrun, KindRunc} {
		b.Run(kind, func(b *testing.B) {
			r := newRuntime(b, kind)
			ctx := context.Background()
			var ds []time.Duration
			var self, children time.Duration
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				id := runtime.NewID()
				if err := r.Create(ctx, probeSpec(b, r, id)); err != nil {
					b.Fatal(err)
				}
				dialProbe(b, ctx, r, id).c.Close()
				s0, c0 := rusage(b)
				b.StartTimer()
				start := time.Now()
				if err := r.Delete(ctx, id); err != nil {
					b.Fatal(err)
				}
				ds = append(ds, time.Since(start))
				b.StopTimer()
				s1, c1 := rusage(b)
				self += s1 - s0
				children += c1 - c0
				b.StartTimer()
			}
			sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
			b.ReportMetric(float64(ds[len(ds)/2].Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(self.Microseconds())/1000/float64(b.N), "self-cpu-ms/op")
			b.ReportMetric(float64(children.Microseconds())/1000/float64(b.N), "children-cpu-ms/op")
		})
	}
}

// rusage returns this process's CPU time and that of its reaped children.
func rusage(b *testing.B) (self, children time.Duration) {
	var s, c syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &s); err != nil {
		b.Fatal(err)
	}
	if err := syscall.Getrusage(syscall.RUSAGE_CHILDREN, &c); err != nil {
		b.Fatal(err)
	}
	cpu := func(u syscall.Rusage) time.Duration {
		return time.Duration(u.Utime.Nano() + u.Stime.Nano())
	}
	return cpu(s), cpu(c)
}
