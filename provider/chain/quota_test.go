package chain

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/errdefs"
)

// TestAccountPlan: an account plan is checked against the provider's total
// over all tenants; no tenant alone reaches it.
func TestAccountPlan(t *testing.T) {
	var events []string
	q, err := NewQuota(QuotaConfig{AccountPlans: map[string]Plan{"b": {Creations: 4}}, Thresholds: []float64{0.5, 1},
		OnThreshold: func(e QuotaEvent) {
			events = append(events, fmt.Sprintf("%s %s %.1f", e.Tenant, e.Resource, e.Threshold))
		}})
	if err != nil {
		t.Fatal(err)
	}
	c := New([]contexts.Provider{&fakeProvider{name: "b"}}, Config{Quota: q})
	for _, tenant := range []string{"t1", "t2", "t1", "t2"} {
		if _, err := c.Create(context.Background(), contexts.Spec{Labels: map[string]string{"sandlot.tenant": tenant}}); err != nil {
			t.Fatal(err)
		}
	}
	if diff := cmp.Diff([]string{"* creations 0.5", "* creations 1.0"}, events); diff != "" {
		t.Fatalf("events (-want +got):\n%s", diff)
	}
	if u := q.Usage(Account, "b"); u.Creations != 4 {
		t.Fatalf("account usage %+v", u)
	}
	if u := q.Usage("t1", "b"); u.Creations != 2 {
		t.Fatalf("t1 usage %+v", u)
	}
}

// TestQuotaPersisted: with a file, a restarted quota goes on from the
// counts, the running sandboxes and the warnings of the one before. A
// sandbox that ended while the daemon was down (not listed at start) is
// counted until the file was last written; a corrupt file is an error.
func TestQuotaPersisted(t *testing.T) {
	clock := time.Unix(1_000_000, 0)
	now = func() time.Time { return clock }
	t.Cleanup(func() { now = time.Now })
	file := filepath.Join(t.TempDir(), "quota.json")
	var events []string
	cfg := QuotaConfig{AccountPlans: map[string]Plan{"b": {Creations: 10, ComputeMinutes: 200}}, Thresholds: []float64{0.2},
		File: file, OnThreshold: func(e QuotaEvent) { events = append(events, e.Resource) }}
	q, err := NewQuota(cfg)
	if err != nil {
		t.Fatal(err)
	}
	p := &fakeProvider{name: "b"}
	c := New([]contexts.Provider{p}, Config{Quota: q})
	ctx := context.Background()
	var ids []string
	for range 3 {
		sb, err := c.Create(ctx, contexts.Spec{Labels: map[string]string{"sandlot.tenant": "t1"}})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, sb.ID())
	}
	clock = clock.Add(10 * time.Minute)
	if err := c.Destroy(ctx, ids[0]); err != nil { // 10 min, written at +10
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"creations"}, events); diff != "" {
		t.Fatalf("events before the restart (-want +got):\n%s", diff)
	}
	if fi, err := os.Stat(file); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("quota file %v %v, want mode 0600", fi, err)
	}

	// The daemon stops; while it is down ids[1] ends; it restarts at +30.
	p.mu.Lock()
	delete(p.live, ids[1][len("b:"):])
	p.mu.Unlock()
	clock = clock.Add(20 * time.Minute)
	events = nil
	q2, err := NewQuota(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c2 := New([]contexts.Provider{p}, Config{Quota: q2})
	if _, err := c2.List(ctx); err != nil { // the reconcile at start
		t.Fatal(err)
	}
	// ids[0]: 10 min; ids[1]: 10 min (until the file's last write);
	// ids[2]: still running, 30 min so far.
	if u := q2.Usage(Account, "b"); u.Creations != 3 || u.ComputeMinutes != 50 {
		t.Fatalf("usage after the restart %+v, want 3 creations and 50 minutes", u)
	}
	if err := c2.Destroy(ctx, ids[2]); err != nil {
		t.Fatal(err)
	}
	// 50 minutes crosses 0.2 x 200; creations had warned before the restart
	// and do not warn again.
	if diff := cmp.Diff([]string{"compute_minutes"}, events); diff != "" {
		t.Fatalf("events after the restart (-want +got):\n%s", diff)
	}

	if err := os.WriteFile(file, []byte(`{"usage": [`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := NewQuota(cfg); !errors.Is(err, errdefs.ErrFailedPrecondition) {
		t.Fatalf("corrupt file: err = %v, want failed_precondition", err)
	}
}
