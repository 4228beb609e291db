package server_test

import (
	"runtime/metrics"
	"testing"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/agent/server"
)

// TestRequestsReuseGoroutines: the agent hands the stream to a parked
// spare reader instead of starting a goroutine per request (a fresh
// goroutine regrew its stack by copying on every call).
func TestRequestsReuseGoroutines(t *testing.T) {
	ctx, c := startInProcess(t, t.TempDir(), server.Config{})
	created := func() uint64 {
		s := []metrics.Sample{{Name: "/sched/goroutines-created:goroutines"}}
		metrics.Read(s)
		return s[0].Value.Uint64()
	}
	if _, err := c.Processes(ctx); err != nil {
		t.Fatal(err)
	}
	const n = 200
	before := created()
	for i := 0; i < n; i++ {
		if _, err := c.Processes(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if got := created() - before; got > n/10 {
		t.Errorf("%d sequential calls created %d goroutines; want them to reuse parked readers", n, got)
	}
	// Concurrent calls still work, and the spares they leave are bounded.
	errc := make(chan error, 16)
	for i := 0; i < 16; i++ {
		go func() {
			_, err := c.Exec(ctx, agent.ExecParams{Shell: "sleep 0.1"}, nil)
			errc <- err
		}()
	}
	for i := 0; i < 16; i++ {
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Processes(ctx); err != nil {
		t.Fatal(err)
	}
}
