package e2b_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/sandlot/sandlot/api/e2bcompat"
	"github.com/sandlot/sandlot/api/e2bcompat/e2bcompattest"
	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/provider/e2b"
)

// TestUsage: the provider samples a sandbox's usage from E2B's metrics
// (GET /sandboxes/{id}/metrics), here sandlot's own E2B server over the
// real manager: memory used plus the page cache, the page cache, disk,
// and the CPU share since the sample before; an unknown sandbox is
// not_found. It used to answer NotSupported.
func TestUsage(t *testing.T) {
	env := e2bcompattest.NewEnv(t, e2bcompattest.Options{Config: e2bcompat.Config{Tenants: e2bcompattest.Tenants{testKey: "tenant-1"}}})
	p := e2b.New(e2b.Config{APIKey: testKey, APIURL: env.Srv.URL, SandboxURL: env.Srv.URL, ConnectTimeout: 2 * time.Second})
	if !p.Capabilities().Has(contexts.CapUsage) {
		t.Fatalf("capabilities %s: no usage", p.Capabilities())
	}
	ctx := context.Background()
	sb, err := p.Create(ctx, contexts.Spec{TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	env.P.SetUsage(sb.ID(), contexts.ResourceUsage{MemoryBytes: 300 << 20, CacheBytes: 100 << 20, DiskBytes: 4096})
	u, err := p.Usage(ctx, sb.ID())
	if err != nil {
		t.Fatal(err)
	}
	if want := (contexts.ResourceUsage{MemoryBytes: 300 << 20, CacheBytes: 100 << 20, DiskBytes: 4096}); u != want {
		t.Errorf("usage = %+v, want %+v", u, want)
	}
	// The next sample (E2B's server samples at most once a second) has
	// the CPU used since: 550 ms in about 1.1 s of one CPU.
	time.Sleep(1100 * time.Millisecond)
	env.P.SetUsage(sb.ID(), contexts.ResourceUsage{MemoryBytes: 200 << 20, CPUTimeMs: 550})
	if u, err = p.Usage(ctx, sb.ID()); err != nil {
		t.Fatal(err)
	}
	if u.MemoryBytes != 200<<20 || u.CPUPct < 20 || u.CPUPct > 55 {
		t.Errorf("second usage = %+v, want 200 MiB and about 50%% of a CPU", u)
	}
	if _, err := p.Usage(ctx, "no-such-sandbox"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("usage of an unknown sandbox: %v, want not_found", err)
	}
	if _, err := e2b.New(e2b.Config{APIURL: env.Srv.URL}).Usage(ctx, sb.ID()); !errors.Is(err, e2b.ErrNoAPIKey) {
		t.Errorf("usage without a key: %v", err)
	}
}

// TestUsageAnswers: what a service answers the metrics call with is
// checked: no sample yet, or figures that cannot be, are unavailable (the
// cleanup pass asks again), never a record's usage; the newest sample
// wins whatever the order.
func TestUsageAnswers(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		want       contexts.ResourceUsage
		err        error
	}{
		{"newest of several", `[{"timestampUnix":20,"memUsed":5,"memCache":1,"diskUsed":7,"cpuUsedPct":12.5},{"timestampUnix":10,"memUsed":9}]`,
			contexts.ResourceUsage{MemoryBytes: 6, CacheBytes: 1, DiskBytes: 7, CPUPct: 12.5}, nil},
		{"no sample yet", `[]`, contexts.ResourceUsage{}, errdefs.ErrUnavailable},
		{"negative memory", `[{"timestampUnix":1,"memUsed":-5}]`, contexts.ResourceUsage{}, errdefs.ErrUnavailable},
		{"memory past int64", `[{"timestampUnix":1,"memUsed":9223372036854775807,"memCache":1}]`, contexts.ResourceUsage{}, errdefs.ErrUnavailable},
		{"negative CPU", `[{"timestampUnix":1,"cpuUsedPct":-1}]`, contexts.ResourceUsage{}, errdefs.ErrUnavailable},
		{"not JSON", `<html>`, contexts.ResourceUsage{}, errdefs.ErrUnavailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Method != "GET" || r.URL.Path != "/sandboxes/sb-1/metrics" || r.Header.Get("X-API-KEY") != testKey {
					http.Error(w, `{"message":"unexpected"}`, http.StatusBadRequest)
					return
				}
				w.Write([]byte(tc.body))
			}))
			t.Cleanup(srv.Close)
			u, err := e2b.New(e2b.Config{APIKey: testKey, APIURL: srv.URL}).Usage(context.Background(), "sb-1")
			if tc.err != nil {
				if !errors.Is(err, tc.err) {
					t.Fatalf("err = %v, want %v", err, tc.err)
				}
				return
			}
			if err != nil || u != tc.want {
				t.Fatalf("usage = %+v, %v; want %+v", u, err, tc.want)
			}
		})
	}
}
