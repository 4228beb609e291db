package audit

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/sandlot/sandlot/internal/testenv"
)

// trail is an Appender that records its batches; while gate is set each
// write waits for it, and while fail is set writes fail.
type trail struct {
	mu      sync.Mutex
	batches [][]Event
	gate    chan struct{}
	fail    bool
}

func (tr *trail) AppendAuditBatch(ctx context.Context, evs []Event) error {
	tr.mu.Lock()
	gate, fail := tr.gate, tr.fail
	tr.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if fail {
		return errors.New("the store is down")
	}
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.batches = append(tr.batches, append([]Event(nil), evs...))
	return nil
}

func (tr *trail) events() []Event {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	var out []Event
	for _, b := range tr.batches {
		out = append(out, b...)
	}
	return out
}

// dropped sums the KindDropped counts of tenant.
func dropped(evs []Event, tenant string) int64 {
	var n int64
	for _, ev := range evs {
		if ev.Kind == KindDropped && ev.TenantID == tenant {
			c, _ := strconv.ParseInt(ev.Detail["count"], 10, 64)
			n += c
		}
	}
	return n
}

// TestWriterFair: tenant A floods a writer whose store is stuck, far past
// its queue, while tenant B adds 20 events; Add never blocks, every one
// of B's events is written in order, and what A lost is counted in the
// trail as A's.
func TestWriterFair(t *testing.T) {
	tr := &trail{gate: make(chan struct{})}
	w := NewWriter(tr, WriterConfig{PerTenant: 100, Total: 1000, Batch: 16})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 100000 {
			w.Add(Event{TenantID: "A", Kind: "network.dns", Detail: map[string]string{"i": strconv.Itoa(i)}})
			if i%5000 == 0 {
				w.Add(Event{TenantID: "B", Kind: "network.dns", Detail: map[string]string{"i": strconv.Itoa(i / 5000)}})
			}
		}
	}()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("Add blocked behind a stuck store")
	}
	close(tr.gate)
	if err := w.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	evs := tr.events()
	var b []string
	written := map[string]int64{}
	for _, ev := range evs {
		if ev.Kind == KindDropped {
			continue
		}
		written[ev.TenantID]++
		if ev.TenantID == "B" {
			b = append(b, ev.Detail["i"])
		}
	}
	if fmt.Sprint(b) != "[0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19]" {
		t.Errorf("tenant B's events written: %v", b)
	}
	if got := written["A"] + dropped(evs, "A"); got != 100000 {
		t.Errorf("tenant A: %d written + %d counted as dropped = %d, want 100000", written["A"], dropped(evs, "A"), got)
	}
	if dropped(evs, "B") != 0 || w.Dropped() != dropped(evs, "A") {
		t.Errorf("dropped: B %d, writer %d, A's count %d", dropped(evs, "B"), w.Dropped(), dropped(evs, "A"))
	}
}

// TestWriterBatches: events reach the store in batches of at most Batch,
// each tenant's in the order added, and a batch serves every waiting
// tenant in turn.
func TestWriterBatches(t *testing.T) {
	tr := &trail{gate: make(chan struct{})}
	w := NewWriter(tr, WriterConfig{Batch: 8})
	for i := range 20 {
		for _, tn := range []string{"A", "B", "C"} {
			w.Add(Event{TenantID: tn, Kind: "k", Detail: map[string]string{"i": strconv.Itoa(i)}})
		}
	}
	close(tr.gate)
	if err := w.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	next := map[string]int{}
	for _, b := range tr.batches {
		if len(b) > 8 {
			t.Fatalf("a batch of %d events, want at most 8", len(b))
		}
		for _, ev := range b {
			if i, _ := strconv.Atoi(ev.Detail["i"]); i != next[ev.TenantID] {
				t.Fatalf("tenant %s: event %d after %d", ev.TenantID, i, next[ev.TenantID]-1)
			}
			next[ev.TenantID]++
		}
	}
	if next["A"] != 20 || next["B"] != 20 || next["C"] != 20 {
		t.Fatalf("written per tenant: %v", next)
	}
	// The batches after the first (which the writer may have taken
	// before B and C had added anything) are shared by all three: no
	// tenant has more than its turn.
	for _, b := range tr.batches[1:] {
		per := map[string]int{}
		for _, ev := range b {
			per[ev.TenantID]++
		}
		for tn, n := range per {
			if n > 3 {
				t.Errorf("tenant %s has %d of a batch of %d shared by 3 tenants", tn, n, len(b))
			}
		}
	}
}

// TestWriterTotal: when every queue together is full, a tenant's new
// event takes the place of the newest event of the longest queue, never
// of a shorter one, and a tenant with the longest queue loses its own.
func TestWriterTotal(t *testing.T) {
	tr := &trail{gate: make(chan struct{})}
	w := NewWriter(tr, WriterConfig{PerTenant: 1000, Total: 10, Batch: 100})
	// The writer takes A's first event into a batch that waits at the
	// gate; then A fills the rest.
	w.Add(Event{TenantID: "A", Kind: "k"})
	waitFor(t, func() bool { w.mu.Lock(); defer w.mu.Unlock(); return w.total == 0 })
	for range 10 {
		w.Add(Event{TenantID: "A", Kind: "k"})
	}
	w.Add(Event{TenantID: "B", Kind: "k"})
	w.Add(Event{TenantID: "A", Kind: "k"})
	close(tr.gate)
	if err := w.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	evs := tr.events()
	n := map[string]int{}
	for _, ev := range evs {
		if ev.Kind != KindDropped {
			n[ev.TenantID]++
		}
	}
	if n["B"] != 1 || n["A"] != 10 || dropped(evs, "A") != 2 {
		t.Errorf("written %v, A dropped %d; want B 1, A 10, 2 dropped", n, dropped(evs, "A"))
	}
}

// TestWriterStoreDown: while the store fails, events are counted as
// dropped per tenant; once it is back the counts are written.
func TestWriterStoreDown(t *testing.T) {
	tr := &trail{fail: true}
	w := NewWriter(tr, WriterConfig{})
	for range 5 {
		w.Add(Event{TenantID: "A", Kind: "k"})
	}
	waitFor(t, func() bool { return w.Dropped() == 5 })
	tr.mu.Lock()
	tr.fail = false
	tr.mu.Unlock()
	w.Add(Event{TenantID: "A", Kind: "k"})
	waitFor(t, func() bool { evs := tr.events(); return len(evs) == 2 && dropped(evs, "A") == 5 })
	if err := w.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	w.Add(Event{TenantID: "A", Kind: "k"}) // after Close: dropped, no panic
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	testenv.WaitFor(t, "the condition", 30*time.Second, cond)
}
