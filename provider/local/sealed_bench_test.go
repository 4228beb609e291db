package local

import (
	"context"
	"sort"
	"testing"
	"time"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/contexts"
)

// BenchmarkSealedRunCode measures what a sealed session (a restored
// sandbox's, agent/sealed.go) adds to a warm python `1+1` on runsc: one
// sandbox, restored once so its channel is marked, and two connections to
// it, a plain one and the sealed one the restore opened, called in turn so
// both see the same machine load. plain-us and sealed-us are the medians.
func BenchmarkSealedRunCode(b *testing.B) {
	p := newProvider(b, "runsc", contexts.Limits{})
	c := create(b, p, contexts.Spec{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	id := c.ID()
	if err := p.Checkpoint(ctx, id); err != nil {
		b.Fatal(err)
	}
	sb, err := p.Restore(ctx, id)
	if err != nil {
		b.Fatal(err)
	}
	defer sb.Close()
	sealed := sb.(*Sandbox).Client
	key, err := p.rt.Secret(id)
	if err != nil {
		b.Fatal(err)
	}
	conn, err := p.rt.Dial(ctx, id)
	if err != nil {
		b.Fatal(err)
	}
	plain, err := agent.Connect(ctx, conn, agent.ClientConfig{SandboxID: id, Key: key})
	if err != nil {
		b.Fatal(err)
	}
	defer plain.Close()
	call := func(c *agent.Client) time.Duration {
		start := time.Now()
		r, err := c.RunCode(ctx, agentRun("python", "1+1"), nil)
		if err != nil || mainText(r) != "2" {
			b.Fatalf("1+1 = %+v, %v", r, err)
		}
		return time.Since(start)
	}
	for range 20 {
		call(plain)
		call(sealed)
	}
	var ps, ss []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if i%2 == 0 {
			ps = append(ps, call(plain))
			ss = append(ss, call(sealed))
		} else {
			ss = append(ss, call(sealed))
			ps = append(ps, call(plain))
		}
	}
	b.StopTimer()
	med := func(ds []time.Duration) float64 {
		sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
		return float64(ds[len(ds)/2].Nanoseconds()) / 1e3
	}
	b.ReportMetric(med(ps), "plain-us")
	b.ReportMetric(med(ss), "sealed-us")
}
