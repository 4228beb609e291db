package storetest

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/store"
	"github.com/sandlot/sandlot/tenant"
)

// testNodeColumn: a record keeps the node it was created with, every read
// returns it, and Update (a stale copy from any daemon) never changes it.
func testNodeColumn(t *testing.T, s store.Backend) {
	ctx := context.Background()
	rec := newRec(ident("t", "c", "main"))
	rec.Node = "node-a"
	mustCreate(t, s, rec)
	bare := mustCreate(t, s, newRec(ident("t", "c", "bare")))
	if got := mustGet(t, s, bare.ID); got.Node != "" {
		t.Fatalf("a record created without a node has node %q", got.Node)
	}
	reads := map[string]func() ([]*contexts.Record, error){
		"GetActive": func() ([]*contexts.Record, error) {
			r, err := s.GetActive(ctx, rec.Identity)
			return []*contexts.Record{r}, err
		},
		"ListActive":  func() ([]*contexts.Record, error) { return s.ListActive(ctx) },
		"ListExpired": func() ([]*contexts.Record, error) { return s.ListExpired(ctx, base.Add(time.Hour), 0) },
		"List":        func() ([]*contexts.Record, error) { return s.List(ctx, contexts.Filter{}) },
		"RecordExecution": func() ([]*contexts.Record, error) {
			r, err := s.RecordExecution(ctx, rec.ID, 1, time.Second, base, base.Add(time.Hour))
			return []*contexts.Record{r}, err
		},
	}
	for name, read := range reads {
		recs, err := read()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, r := range recs {
			if r.ID == rec.ID && r.Node != "node-a" {
				t.Fatalf("%s: node %q, want node-a", name, r.Node)
			}
		}
	}
	upd := mustGet(t, s, rec.ID)
	upd.Node = "node-b"
	upd.State = contexts.StateReady
	if err := s.Update(ctx, upd); err != nil {
		t.Fatal(err)
	}
	if got := mustGet(t, s, rec.ID); got.Node != "node-a" || got.State != contexts.StateReady {
		t.Fatalf("after an Update naming another node: node %q state %s; want node-a, ready", got.Node, got.State)
	}
}

func testClaim(t *testing.T, s store.Backend) {
	ctx := context.Background()
	rec := newRec(ident("t", "c", "main"))
	rec.Node = "node-a"
	mustCreate(t, s, rec)
	node := func() string { t.Helper(); return mustGet(t, s, rec.ID).Node }

	if ok, err := s.Claim(ctx, rec.ID, "node-x", "node-b"); ok || err != nil {
		t.Fatalf("Claim from the wrong node = %v, %v; want false, nil", ok, err)
	}
	if ok, err := s.Claim(ctx, rec.ID, "node-a", "node-b"); !ok || err != nil {
		t.Fatalf("Claim = %v, %v", ok, err)
	}
	if n := node(); n != "node-b" {
		t.Fatalf("node after Claim = %q", n)
	}
	if ok, err := s.Claim(ctx, rec.ID, "node-a", "node-c"); ok || err != nil || node() != "node-b" {
		t.Fatalf("second Claim from the old node = %v, %v (node %s); want false, nil, node-b", ok, err, node())
	}
	_, err := s.Claim(ctx, rec.ID, "node-b", "")
	wantErr(t, "Claim to no node", err, errdefs.ErrInvalidArgument)
	_, err = s.Claim(ctx, rec.ID, "node-b", strings.Repeat("n", 200))
	wantErr(t, "Claim to an over-long node", err, errdefs.ErrInvalidArgument)

	// Records written before nodes existed have none: they can be claimed.
	legacy := mustCreate(t, s, newRec(ident("t", "c", "legacy")))
	if ok, err := s.Claim(ctx, legacy.ID, "", "node-a"); !ok || err != nil {
		t.Fatalf("Claim of a record without node = %v, %v", ok, err)
	}

	// Ended records stay with their node.
	if ok, err := s.Terminate(ctx, rec.ID, contexts.ReasonExpired, base, ""); !ok || err != nil {
		t.Fatal(ok, err)
	}
	if ok, err := s.Claim(ctx, rec.ID, "node-b", "node-c"); ok || err != nil || node() != "node-b" {
		t.Fatalf("Claim of an ended record = %v, %v (node %s); want false, nil, node-b", ok, err, node())
	}

	_, err = s.Claim(ctx, "00000000-0000-4000-8000-000000000000", "node-a", "node-b")
	wantErr(t, "Claim of an unknown record", err, errdefs.ErrNotFound)
	_, err = s.Claim(ctx, "not-a-uuid", "node-a", "node-b")
	wantErr(t, "Claim of a malformed id", err, errdefs.ErrNotFound)

	// Tenant scope: another tenant's record is not found; one's own works.
	other := newRec(ident("B", "c", "main"))
	other.Node = "node-a"
	mustCreate(t, s, other)
	_, err = s.Claim(tenant.WithID(ctx, "t"), other.ID, "node-a", "node-b")
	wantErr(t, "Claim of another tenant's record", err, errdefs.ErrNotFound)
	if ok, err := s.Claim(tenant.WithID(ctx, "B"), other.ID, "node-a", "node-b"); !ok || err != nil {
		t.Fatalf("Claim in the record's own scope = %v, %v", ok, err)
	}
}

func testConcurrentClaim(t *testing.T, s store.Backend) {
	const n = 20
	rec := newRec(ident("t", "c", "main"))
	rec.Node = "dead"
	mustCreate(t, s, rec)
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		winner string
		wins   int
		errs   []error
	)
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			to := "node-" + string(rune('a'+i))
			ok, err := s.Claim(mixedCtx(i, "t"), rec.ID, "dead", to)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
			}
			if ok {
				wins++
				winner = to
			}
		})
	}
	close(start)
	wg.Wait()
	if wins != 1 || len(errs) > 0 {
		t.Fatalf("%d concurrent Claims: %d got true, errors %v; want exactly one", n, wins, errs)
	}
	if got := mustGet(t, s, rec.ID).Node; got != winner {
		t.Fatalf("node %q after the race, want the winner %q", got, winner)
	}
}

// testHeartbeat: the lease rows. They are system rows: a tenant-scoped
// ctx reads and writes them like an unscoped one.
func testHeartbeat(t *testing.T, s store.Backend) {
	bg := context.Background()
	for name, ctx := range map[string]context.Context{"unscoped": bg, "tenant-scoped": tenant.WithID(bg, "t")} {
		t.Run(name, func(t *testing.T) {
			node := "node-" + name
			_, err := s.LastHeartbeat(ctx, node)
			wantErr(t, "LastHeartbeat of a node that never sent one", err, errdefs.ErrNotFound)
			for _, at := range []time.Time{base, base.Add(90 * time.Second)} {
				if err := s.Heartbeat(ctx, node, at); err != nil {
					t.Fatal(err)
				}
				got, err := s.LastHeartbeat(ctx, node)
				if err != nil || !got.Equal(ms(at)) || got.Location() != time.UTC {
					t.Fatalf("LastHeartbeat = %v, %v; want %v", got, err, ms(at))
				}
			}
			if got, err := s.LastHeartbeat(bg, node); err != nil || !got.Equal(ms(base.Add(90*time.Second))) {
				t.Fatalf("LastHeartbeat unscoped = %v, %v", got, err)
			}
		})
	}
	wantErr(t, "Heartbeat of no node", s.Heartbeat(bg, "", base), errdefs.ErrInvalidArgument)
	wantErr(t, "Heartbeat of an over-long node", s.Heartbeat(bg, strings.Repeat("n", 200), base), errdefs.ErrInvalidArgument)
}
