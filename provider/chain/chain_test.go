package chain

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sandlot/sandlot/api/e2bcompat/e2bcompattest"
	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/provider/e2b"
)

// fakeProvider makes fake sandboxes, or fails with err.
type fakeProvider struct {
	name string
	err  error

	mu        sync.Mutex
	n         int
	live      map[string]bool
	destroyed []string
}

func (f *fakeProvider) Name() string { return f.name }

func (f *fakeProvider) Capabilities() contexts.Capabilities { return 0 }

func (f *fakeProvider) Pause(ctx context.Context, id string) error {
	return contexts.NotSupported(f.name, contexts.CapPause)
}

func (f *fakeProvider) Resume(ctx context.Context, id string) error {
	return contexts.NotSupported(f.name, contexts.CapPause)
}

func (f *fakeProvider) Usage(ctx context.Context, id string) (contexts.ResourceUsage, error) {
	return contexts.ResourceUsage{}, contexts.NotSupported(f.name, contexts.CapUsage)
}

func (f *fakeProvider) Create(ctx context.Context, spec contexts.Spec) (contexts.Sandbox, error) {
	if f.err != nil {
		return nil, f.err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n++
	id := fmt.Sprintf("sb%d", f.n)
	if f.live == nil {
		f.live = map[string]bool{}
	}
	f.live[id] = true
	return e2bcompattest.NewSandbox(id, nil), nil
}

func (f *fakeProvider) Attach(ctx context.Context, id string) (contexts.Sandbox, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.live[id] {
		return nil, fmt.Errorf("%s: %w", id, errdefs.ErrNotFound)
	}
	return e2bcompattest.NewSandbox(id, nil), nil
}

func (f *fakeProvider) List(ctx context.Context) ([]string, error) {
	if f.err != nil {
		return nil, f.err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	var ids []string
	for id := range f.live {
		ids = append(ids, id)
	}
	return ids, nil
}

func (f *fakeProvider) Destroy(ctx context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.live, id)
	f.destroyed = append(f.destroyed, id)
	return nil
}

type fallbacks struct {
	mu  sync.Mutex
	got []string
}

func (f *fallbacks) count(from, to string, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.got = append(f.got, from+"->"+to)
}

func TestFallbackNoKey(t *testing.T) {
	local := &fakeProvider{name: "local"}
	var fb fallbacks
	c := New([]contexts.Provider{e2b.New(e2b.Config{}), local}, Config{OnFallback: fb.count})
	sb, err := c.Create(context.Background(), contexts.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	if sb.ID() != "local:sb1" {
		t.Fatalf("id %q", sb.ID())
	}
	if diff := cmp.Diff([]string{"e2b->local"}, fb.got); diff != "" {
		t.Fatalf("fallbacks (-want +got):\n%s", diff)
	}
}

func TestFallbackUnreachable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() { // accept and never answer
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	local := &fakeProvider{name: "local"}
	var fb fallbacks
	p := e2b.New(e2b.Config{APIKey: "e2b_00", APIURL: "http://" + l.Addr().String(), ConnectTimeout: 300 * time.Millisecond})
	c := New([]contexts.Provider{p, local}, Config{OnFallback: fb.count})
	start := time.Now()
	sb, err := c.Create(context.Background(), contexts.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 3*time.Second || !strings.HasPrefix(sb.ID(), "local:") || len(fb.got) != 1 {
		t.Fatalf("took %v id %s fallbacks %v", took, sb.ID(), fb.got)
	}
}

func TestNoFallbackOnClientError(t *testing.T) {
	first := &fakeProvider{name: "first", err: fmt.Errorf("bad template: %w", errdefs.ErrInvalidArgument)}
	second := &fakeProvider{name: "second"}
	c := New([]contexts.Provider{first, second}, Config{})
	if _, err := c.Create(context.Background(), contexts.Spec{}); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Fatalf("err %v", err)
	}
	if second.n != 0 {
		t.Fatal("fell back on a client error")
	}
	all := New([]contexts.Provider{&fakeProvider{name: "a", err: errdefs.ErrUnavailable}, &fakeProvider{name: "b", err: errdefs.ErrUnavailable}}, Config{})
	if _, err := all.Create(context.Background(), contexts.Spec{}); !errors.Is(err, errdefs.ErrUnavailable) {
		t.Fatalf("all down: %v", err)
	}
}

func TestRouting(t *testing.T) {
	a, b := &fakeProvider{name: "a", err: errdefs.ErrUnavailable}, &fakeProvider{name: "b"}
	c := New([]contexts.Provider{a, b}, Config{})
	ctx := context.Background()
	sb, err := c.Create(ctx, contexts.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	ids, err := c.List(ctx)
	if err != nil || !cmp.Equal(ids, []string{"b:sb1"}) {
		t.Fatalf("list %v %v", ids, err)
	}
	got, err := c.Attach(ctx, sb.ID())
	if err != nil || got.ID() != "b:sb1" {
		t.Fatalf("attach %v %v", got, err)
	}
	if _, err := c.Attach(ctx, "sb1"); err != nil { // no prefix: ask each
		t.Fatalf("attach without prefix: %v", err)
	}
	if err := c.Destroy(ctx, sb.ID()); err != nil || !cmp.Equal(b.destroyed, []string{"sb1"}) {
		t.Fatalf("destroy %v %v", err, b.destroyed)
	}
	if _, err := c.Attach(ctx, sb.ID()); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("attach destroyed: %v", err)
	}
}

func TestQuotaThresholds(t *testing.T) {
	clock := time.Unix(0, 0)
	now = func() time.Time { return clock }
	t.Cleanup(func() { now = time.Now })
	var events []QuotaEvent
	q, err := NewQuota(QuotaConfig{Plans: map[string]Plan{"b": {Creations: 5, ComputeMinutes: 10}}, OnThreshold: func(e QuotaEvent) { events = append(events, e) }})
	if err != nil {
		t.Fatal(err)
	}
	b := &fakeProvider{name: "b"}
	c := New([]contexts.Provider{b}, Config{Quota: q})
	ctx := context.Background()
	var ids []string
	for i := 0; i < 5; i++ {
		sb, err := c.Create(ctx, contexts.Spec{Labels: map[string]string{"sandlot.tenant": "t1"}})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, sb.ID())
	}
	clock = clock.Add(2 * time.Minute) // 5 sandboxes x 2 min = 10 compute minutes
	for _, id := range ids {
		if err := c.Destroy(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	for _, e := range events {
		got = append(got, fmt.Sprintf("%s %s %s %.1f", e.Tenant, e.Provider, e.Resource, e.Threshold))
	}
	want := []string{"t1 b creations 0.8", "t1 b creations 1.0", "t1 b compute_minutes 0.8", "t1 b compute_minutes 1.0"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("events (-want +got):\n%s", diff)
	}
	if u := q.Usage("t1", "b"); u.Creations != 5 || u.ComputeMinutes != 10 {
		t.Fatalf("usage %+v", u)
	}
}

// pausingProvider is a fakeProvider that can pause.
type pausingProvider struct {
	fakeProvider
	paused []string
}

func (p *pausingProvider) Capabilities() contexts.Capabilities { return contexts.CapPause }

func (p *pausingProvider) Pause(ctx context.Context, id string) error {
	p.paused = append(p.paused, "pause "+id)
	return nil
}

func (p *pausingProvider) Resume(ctx context.Context, id string) error {
	p.paused = append(p.paused, "resume "+id)
	return nil
}

// TestPauseRouting: pause and resume go to the sandbox's provider, by the
// id's prefix; a provider that cannot pause is failed_precondition.
func TestPauseRouting(t *testing.T) {
	a, b := &fakeProvider{name: "a"}, &pausingProvider{fakeProvider: fakeProvider{name: "b"}}
	c := New([]contexts.Provider{a, b}, Config{})
	ctx := context.Background()
	if err := c.Pause(ctx, "b:sb1"); err != nil {
		t.Fatal(err)
	}
	if err := c.Resume(ctx, "b:sb1"); err != nil {
		t.Fatal(err)
	}
	if !cmp.Equal(b.paused, []string{"pause sb1", "resume sb1"}) {
		t.Fatalf("provider b saw %v", b.paused)
	}
	if err := c.Pause(ctx, "a:sb1"); !errors.Is(err, errdefs.ErrFailedPrecondition) {
		t.Fatalf("pause on a provider without pause: %v", err)
	}
	if err := c.Pause(ctx, "zz:sb1"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("pause of an unknown provider's id: %v", err)
	}
}
