package contexts_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/contexts/contextstest"
	"github.com/sandlot/sandlot/store"
	"github.com/sandlot/sandlot/store/memory"
)

// latencies records per-operation times and reports percentiles.
type latencies []time.Duration

func (l latencies) report(b *testing.B, floor time.Duration) {
	if len(l) == 0 {
		return
	}
	slices.Sort(l)
	p50, p99 := l[len(l)/2], l[len(l)*99/100]
	b.ReportMetric(float64(p50.Nanoseconds()), "p50-ns")
	b.ReportMetric(float64(p99.Nanoseconds()), "p99-ns")
	if floor > 0 {
		b.ReportMetric(float64(p50)/float64(floor), "p50/floor")
	}
}

// benchStore is the store benchmarks run on: memory, or SQLite (the
// default backend) when SANDLOT_BENCH_STORE=sqlite.
func benchStore(b *testing.B) contexts.Store {
	if os.Getenv("SANDLOT_BENCH_STORE") != "sqlite" {
		return memory.New()
	}
	s, err := store.Open(context.Background(), "sqlite://"+filepath.Join(b.TempDir(), "bench.db"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

func benchManager(b *testing.B, p contexts.Provider, cfg contexts.Config) *contexts.Manager {
	cfg.MaxPerTenant, cfg.MaxPerConversation = -1, -1
	cfg.CleanupInterval = time.Hour
	m := contexts.NewManager(benchStore(b), p, cfg)
	if err := m.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { m.Close(context.Background()) })
	return m
}

// benchGetOrCreatePool measures GetOrCreate of new identities served from
// a full warm pool; the terminate and the refill are not timed.
func benchGetOrCreatePool(b *testing.B, p contexts.Provider, poolSize int) {
	ctx := context.Background()
	m := benchManager(b, p, contexts.Config{PoolSize: poolSize})
	full := func() {
		deadline := time.Now().Add(time.Minute)
		for m.Stats().PoolSize < int64(poolSize) {
			if time.Now().After(deadline) {
				b.Fatal("pool does not refill")
			}
			time.Sleep(time.Millisecond)
		}
	}
	full()
	var lat latencies
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		id := ident("t1", fmt.Sprintf("c%d", i), "main")
		start := time.Now()
		rec, err := m.GetOrCreate(ctx, id, contexts.CreateOptions{})
		lat = append(lat, time.Since(start))
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if err := m.Terminate(ctx, "t1", rec.ID, ""); err != nil {
			b.Fatal(err)
		}
		full()
		b.StartTimer()
	}
	st := m.Stats()
	b.ReportMetric(float64(st.PoolHits)/float64(st.PoolHits+st.PoolMisses), "hit-ratio")
	lat.report(b, 0)
}

func benchGetOrCreateReused(b *testing.B, p contexts.Provider) {
	ctx := context.Background()
	m := benchManager(b, p, contexts.Config{PoolSize: -1})
	id := ident("t1", "c1", "main")
	if _, err := m.GetOrCreate(ctx, id, contexts.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	var lat latencies
	for b.Loop() {
		start := time.Now()
		if _, err := m.GetOrCreate(ctx, id, contexts.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(start))
	}
	lat.report(b, 0)
}

// benchExecute measures Execute through the manager against a floor: the
// same call made on the sandbox directly.
func benchExecute(b *testing.B, p contexts.Provider, language, code string) {
	ctx := context.Background()
	m := benchManager(b, p, contexts.Config{PoolSize: -1, MaxExecutionsPerContext: -1})
	id := ident("t1", "c1", "main")
	req := contexts.ExecuteRequest{Language: language, Code: code}
	res, err := m.Execute(ctx, id, req, nil)
	if err != nil {
		b.Fatal(err)
	}
	sb, err := p.Attach(ctx, res.SandboxID)
	if err != nil {
		b.Fatal(err)
	}
	defer sb.Close()
	direct := func() time.Duration {
		start := time.Now()
		if _, err := sb.RunCode(ctx, agent.RunCodeParams{Language: language, Code: code}, nil); err != nil {
			b.Fatal(err)
		}
		return time.Since(start)
	}
	for range 200 {
		direct()
	}
	// The floor is the same call straight on the sandbox's agent, timed
	// alternately with Execute so both see the same machine load.
	var floor, lat latencies
	for b.Loop() {
		start := time.Now()
		if _, err := m.Execute(ctx, id, req, nil); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(start))
		floor = append(floor, direct())
	}
	slices.Sort(floor)
	b.ReportMetric(float64(floor[len(floor)/2].Nanoseconds()), "floor-p50-ns")
	lat.report(b, floor[len(floor)/2])
}

func BenchmarkFakeGetOrCreateWarmPool(b *testing.B) {
	benchGetOrCreatePool(b, contextstest.NewProvider(), 4)
}

func BenchmarkFakeGetOrCreateReused(b *testing.B) {
	benchGetOrCreateReused(b, contextstest.NewProvider())
}

func BenchmarkFakeExecute(b *testing.B) {
	benchExecute(b, contextstest.NewProvider(), "python", "x = 1")
}

// pinged hides its sandboxes' connection (Done, ProbesInBand): the
// manager pings them before every reuse, as it did every sandbox before
// the health check rode on the request.
type pinged struct{ contexts.Provider }

func (p pinged) Create(ctx context.Context, spec contexts.Spec) (contexts.Sandbox, error) {
	sb, err := p.Provider.Create(ctx, spec)
	if err != nil {
		return nil, err
	}
	return struct{ contexts.Sandbox }{sb}, nil
}

func (p pinged) Attach(ctx context.Context, id string) (contexts.Sandbox, error) {
	sb, err := p.Provider.Attach(ctx, id)
	if err != nil {
		return nil, err
	}
	return struct{ contexts.Sandbox }{sb}, nil
}

// benchExecuteHealthCheck times, interleaved so all three see the same
// load, a warm Execute whose health check rides on the request
// (agent.WithProbe), one that pings before the call, the call made
// straight on the sandbox (the floor of both), and a ping alone (the
// daemon to agent hop, without the kernel).
func benchExecuteHealthCheck(b *testing.B, p contexts.Provider, language, code string) {
	ctx := context.Background()
	cfg := contexts.Config{PoolSize: -1, MaxExecutionsPerContext: -1}
	probe, ping := benchManager(b, p, cfg), benchManager(b, pinged{p}, cfg)
	id := ident("t1", "c1", "main")
	req := contexts.ExecuteRequest{Language: language, Code: code}
	res, err := probe.Execute(ctx, id, req, nil)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := ping.Execute(ctx, ident("t1", "c2", "main"), req, nil); err != nil {
		b.Fatal(err)
	}
	sb, err := p.Attach(ctx, res.SandboxID)
	if err != nil {
		b.Fatal(err)
	}
	defer sb.Close()
	timed := func(l *latencies, fn func() error) {
		start := time.Now()
		if err := fn(); err != nil {
			b.Fatal(err)
		}
		*l = append(*l, time.Since(start))
	}
	var inBand, pinging, floor, hop latencies
	for b.Loop() {
		timed(&inBand, func() error { _, err := probe.Execute(ctx, id, req, nil); return err })
		timed(&pinging, func() error { _, err := ping.Execute(ctx, ident("t1", "c2", "main"), req, nil); return err })
		timed(&floor, func() error {
			_, err := sb.RunCode(ctx, agent.RunCodeParams{Language: language, Code: code}, nil)
			return err
		})
		timed(&hop, func() error { return sb.Ping(ctx) })
	}
	p50 := func(l latencies) float64 { slices.Sort(l); return float64(l[len(l)/2]) }
	b.ReportMetric(p50(floor), "direct-p50-ns")
	b.ReportMetric(p50(hop), "agent-ping-p50-ns") // the daemon to agent hop alone
	b.ReportMetric(p50(inBand), "probe-p50-ns")
	b.ReportMetric(p50(pinging), "ping-p50-ns")
	b.ReportMetric(p50(inBand)/p50(floor), "probe/direct")
	b.ReportMetric(p50(pinging)/p50(floor), "ping/direct")
}
