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
func BenchmarkSetupTeardown(b *testing.B) {
	nettest.Require(b)
	m := newManager(b, newDirs(b))
	ctx := context.Background()
	var setup, teardown time.Duration
	for i := 0; i < b.N; i++ {
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
