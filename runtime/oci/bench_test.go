package oci

import (
	"context"
	"sort"
	"testing"
	"time"

	"github.com/sandlot/sandlot/runtime"
)

// BenchmarkCreateReady measures create+start until the probe's socket
// accepts a connection, then delete (not timed).
func BenchmarkCreateReady(b *testing.B) {
	for _, kind := range testKinds {
		b.Run(kind, func(b *testing.B) {
			r := newRuntime(b, kind)
			ctx := context.Background()
			var ds []time.Duration
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				id := runtime.NewID()
				sp := probeSpec(b, r, id)
				b.StartTimer()
				start := time.Now()
				if err := r.Create(ctx, sp); err != nil {
					b.Fatal(err)
				}
				p := dialProbe(b, ctx, r, id)
				ds = append(ds, time.Since(start))
				b.StopTimer()
				p.c.Close()
				if err := r.Delete(ctx, id); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
			sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
			b.ReportMetric(float64(ds[len(ds)/2].Microseconds())/1000, "p50-ms")
		})
	}
}

// BenchmarkDial measures Dial of a running sandbox's channel (the
// connection only; the handshake is the caller's), per runtime: the netns
// path for crun and runc, openat2 for runsc.
func BenchmarkDial(b *testing.B) {
	for _, kind := range testKinds {
		b.Run(kind, func(b *testing.B) {
			r := newRuntime(b, kind)
			id, _ := startProbe(b, r, runtime.Limits{})
			ctx := context.Background()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				c, err := r.Dial(ctx, id)
				if err != nil {
					b.Fatal(err)
				}
				c.Close()
			}
		})
	}
}
