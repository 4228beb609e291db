package network

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sandlot/sandlot/network/nettest"
)

// BenchmarkSetupTeardown measures what a network adds to a sandbox's cold
// create (setup-ms) and to its removal (teardown-ms), in mode allowlist
// (mode open differs by one more chain and two sets).
//
// With spares the setup is the claim of a network built ahead (the
// filler rebuilds one in the background, on the same cores).
func BenchmarkSetupTeardown(b *testing.B) {
	for _, spares := range []int{0, 4} {
		b.Run(fmt.Sprintf("spares=%d", spares), func(b *testing.B) { benchSetup(b, spares) })
	}
}

func benchSetup(b *testing.B, spares int) {
	nettest.Require(b)
	m := newManager(b, newDirs(b), func(c *Config) { c.Spares = spares })
	ctx := context.Background()
	var setup, teardown time.Duration
	for i := 0; i < b.N; i++ {
		if spares > 0 {
			waitSpares(m, spares)
		}
		t0 := time.Now()
		n, err := m.Setup(ctx, fmt.Sprintf("bench-%d", i), allowlistP)
		if err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if err := m.Teardown(ctx, n.SandboxID); err != nil {
			b.Fatal(err)
		}
		setup += t1.Sub(t0)
		teardown += time.Since(t1)
	}
	b.ReportMetric(float64(setup.Microseconds())/1000/float64(b.N), "setup-ms/op")
	b.ReportMetric(float64(teardown.Microseconds())/1000/float64(b.N), "teardown-ms/op")
}

// waitSpares waits (outside the timed part) until the filler caught up.
func waitSpares(m *Manager, n int) {
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		m.mu.Lock()
		k := len(m.spares)
		m.mu.Unlock()
		if k >= n {
			return
		}
	}
}
