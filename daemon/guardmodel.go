package daemon

import (
	"context"
	"log/slog"
	"runtime"
	"sync"

	"go.opentelemetry.io/otel/metric"

	"github.com/sandlot/sandlot/api"
	"github.com/sandlot/sandlot/guard"
	"github.com/sandlot/sandlot/guard/ner"
	"github.com/sandlot/sandlot/internal/logkey"
	"github.com/sandlot/sandlot/telemetry"
)

// entityModel is loaded once per process (0.7 s, 40 MB): its weights are
// only read, so every daemon and guard in the process shares them.
var entityModel = sync.OnceValues(func() (guard.Recognizer, error) {
	m, err := ner.Load()
	if err != nil {
		return nil, err // not a typed nil in the interface
	}
	return m, nil
})

// withEntityModel puts the entity model into cfg, or the reason it is
// missing: the guard then scans with its patterns and entity rules alone,
// and says so in the log and in /readyz (guardHealth).
func withEntityModel(cfg *guard.Config, log *slog.Logger, m guard.Recognizer, err error) {
	if err != nil {
		log.Warn("the guard's entity model did not load: it scans with its patterns and entity rules alone",
			slog.String(logkey.Err, err.Error()))
		cfg.ModelError = err
		return
	}
	info := m.Info()
	log.Info("guard entity model loaded", slog.String("model", info.Name),
		slog.Int64("bytes", info.Bytes), slog.Duration("load", info.LoadTime))
	cfg.Model = m
}

// guardMeters reports the entity model's memory beside the daemon's heap,
// and the windows its time budget left to the rules:
// sandlot.guard.model.bytes, sandlot.guard.model.skipped and
// sandlot.daemon.heap.bytes.
func guardMeters(g *guard.Guard) {
	m := telemetry.Meter()
	_, _ = m.Int64ObservableGauge(telemetry.MetricName("sandlot.guard.model.bytes"),
		metric.WithDescription("Heap taken by the egress guard's entity model (0: not loaded)."),
		metric.WithInt64Callback(func(_ context.Context, o metric.Int64Observer) error {
			info, _ := g.ModelStatus()
			o.Observe(info.Bytes)
			return nil
		}))
	_, _ = m.Int64ObservableCounter(telemetry.MetricName("sandlot.guard.model.skipped"),
		metric.WithDescription("Windows the guard's entity rules judged without the model, its time budget for that second spent."),
		metric.WithInt64Callback(func(_ context.Context, o metric.Int64Observer) error {
			o.Observe(g.ModelSkipped())
			return nil
		}))
	_, _ = m.Int64ObservableGauge(telemetry.MetricName("sandlot.daemon.heap.bytes"),
		metric.WithDescription("The daemon's heap in use, the guard's entity model included."),
		metric.WithInt64Callback(func(_ context.Context, o metric.Int64Observer) error {
			o.Observe(heapBytes())
			return nil
		}))
}

func heapBytes() int64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// guardHealth adds the guard's state to /readyz.
func guardHealth(g *guard.Guard, r *api.Readiness) {
	info, err := g.ModelStatus()
	h := &api.GuardHealth{EntityModel: info.Name, State: "loaded", ModelBytes: info.Bytes, DaemonHeapBytes: heapBytes()}
	if err != nil {
		h.State, h.Error = "unavailable", err.Error()
		if info.Name != "" {
			h.State = "loaded" // it runs; some windows failed and the rules judged them
		}
	}
	r.Guard = h
}
