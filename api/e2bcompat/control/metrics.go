package control

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/sandlot/sandlot/api/e2bcompat/core"
	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/errdefs"
)

// The sandbox's size as reported (detail, metrics): the local provider's
// default limits (contexts.Limits).
const (
	sandboxCPUs     = 1
	sandboxMemBytes = 2 << 30
	sandboxDisk     = 512 << 20
)

// Metrics. E2B samples every sandbox every few seconds; sandlot samples a
// sandbox when its metrics are asked for (the cgroup's memory, page cache
// and CPU time, the tmpfs bytes), at most once a second, and keeps the last
// maxMetricSamples samples per sandbox in memory until it ends. The answer
// is the samples within the query's start and end (unix seconds), oldest
// first; CPU use is the share of the sandbox's cores used since the
// previous sample (the first: since the sandbox started).
const (
	maxMetricSamples = 360
	metricEvery      = time.Second
)

type metricSample struct {
	at    time.Time
	usage contexts.ResourceUsage
	cpu   float64 // percent of the sandbox's cores
}

// metricBody is one SandboxMetric. The Python SDK requires memCache and
// timestampUnix.
type metricBody struct {
	Timestamp     time.Time `json:"timestamp"`
	TimestampUnix int64     `json:"timestampUnix"`
	CPUCount      int       `json:"cpuCount"`
	CPUUsedPct    float64   `json:"cpuUsedPct"`
	MemUsed       int64     `json:"memUsed"`
	MemTotal      int64     `json:"memTotal"`
	MemCache      int64     `json:"memCache"`
	DiskUsed      int64     `json:"diskUsed"`
	DiskTotal     int64     `json:"diskTotal"`
}

// sample takes a sample of rec now (unless the last is recent) and returns
// the kept samples. A sandbox that ended meanwhile keeps none.
func (h *Handler) sample(r *http.Request, tenantID string, rec *contexts.Record) ([]metricSample, error) {
	now := h.edge.Now()
	h.mu.Lock()
	ring := h.metrics[rec.ID]
	fresh := len(ring) > 0 && now.Sub(ring[len(ring)-1].at) < metricEvery
	h.mu.Unlock()
	if fresh {
		return ring, nil
	}
	u, err := h.m.Usage(r.Context(), tenantID, rec.ID)
	if err != nil {
		return nil, err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	ring = h.metrics[rec.ID]
	prevAt, prevCPU := rec.CreatedAt, int64(0)
	if len(ring) > 0 {
		last := ring[len(ring)-1]
		prevAt, prevCPU = last.at, last.usage.CPUTimeMs
	}
	s := metricSample{at: now, usage: u}
	if wall := now.Sub(prevAt).Milliseconds(); wall > 0 && u.CPUTimeMs >= prevCPU {
		s.cpu = min(100, float64(u.CPUTimeMs-prevCPU)/float64(wall)/sandboxCPUs*100)
	}
	// A new slice each time: a ring handed out is never written again.
	ring = append(slices.Clone(ring[max(0, len(ring)+1-maxMetricSamples):]), s)
	if !h.edge.Ended(rec.ID) {
		h.metrics[rec.ID] = ring
	}
	return ring, nil
}

// unixParam reads an optional unix-seconds query parameter.
func unixParam(r *http.Request, name string) (time.Time, bool, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return time.Time{}, false, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return time.Time{}, false, fmt.Errorf("%s must be unix seconds: %w", name, errdefs.ErrInvalidArgument)
	}
	return time.Unix(n, 0), true, nil
}

func (h *Handler) metricsRoute(w http.ResponseWriter, r *http.Request, tenantID string) {
	rec, err := h.edge.Active(r.Context(), tenantID, r.PathValue("id"))
	if err != nil {
		core.WriteAPIError(w, err)
		return
	}
	start, hasStart, err := unixParam(r, "start")
	if err == nil {
		var end time.Time
		var hasEnd bool
		end, hasEnd, err = unixParam(r, "end")
		if err == nil && hasStart && hasEnd && end.Before(start) {
			err = fmt.Errorf("end is before start: %w", errdefs.ErrInvalidArgument)
		}
		if err == nil {
			samples, serr := h.sample(r, tenantID, rec)
			if serr != nil {
				core.WriteAPIError(w, serr)
				return
			}
			out := []metricBody{}
			for _, s := range samples {
				at := s.at.Truncate(time.Second)
				if hasStart && at.Before(start) || hasEnd && at.After(end) {
					continue
				}
				u := s.usage
				out = append(out, metricBody{
					Timestamp: at.UTC(), TimestampUnix: at.Unix(), CPUCount: sandboxCPUs, CPUUsedPct: s.cpu,
					MemUsed: u.MemoryBytes - u.CacheBytes, MemCache: u.CacheBytes, MemTotal: sandboxMemBytes,
					DiskUsed: u.DiskBytes, DiskTotal: sandboxDisk,
				})
			}
			core.WriteJSON(w, http.StatusOK, out)
			return
		}
	}
	core.WriteAPIError(w, err)
}
