package contexts_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/contexts/contextstest"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/store/memory"
)

func TestPathEvents(t *testing.T) {
	e := newEnv(t, contexts.Config{MaxPerConversation: -1})
	c := func(p string) contexts.Identity { return ident("t1", "c1", p) }
	main, b1 := e.getOrCreate(c("main")), e.getOrCreate(c("b1"))

	if err := e.m.PathEvent(e.ctx, c("main"), contexts.PathEvent{Type: contexts.PathEdited}); err != nil {
		t.Fatal(err)
	}
	if again := e.getOrCreate(c("main")); again.ID != main.ID {
		t.Fatal("edited replaced the context")
	}
	// merged, posted on the target and naming the source.
	if err := e.m.PathEvent(e.ctx, c("main"), contexts.PathEvent{Type: contexts.PathMerged, SourcePathID: "b1", TargetPathID: "main"}); err != nil {
		t.Fatal(err)
	}
	if r := e.record(b1.ID); r.Reason != contexts.ReasonMerged || e.running(b1.SandboxID) {
		t.Fatalf("merged source: %+v", r)
	}
	if r := e.record(main.ID); r.State != contexts.StateReady {
		t.Fatalf("merge target: %+v", r)
	}
	// merged, posted on the source itself.
	b2 := e.getOrCreate(c("b2"))
	if err := e.m.PathEvent(e.ctx, c("b2"), contexts.PathEvent{Type: contexts.PathMerged}); err != nil {
		t.Fatal(err)
	}
	if r := e.record(b2.ID); r.Reason != contexts.ReasonMerged {
		t.Fatalf("merged (posted on source): %+v", r)
	}
	for _, tc := range []struct {
		typ    string
		reason contexts.Reason
	}{{contexts.PathDeleted, contexts.ReasonDeleted}, {contexts.PathArchived, contexts.ReasonArchived}} {
		rec := e.getOrCreate(c(tc.typ))
		if err := e.m.PathEvent(e.ctx, c(tc.typ), contexts.PathEvent{Type: tc.typ}); err != nil {
			t.Fatal(err)
		}
		if r := e.record(rec.ID); r.Reason != tc.reason || r.State != contexts.StateTerminated {
			t.Fatalf("%s: %+v", tc.typ, r)
		}
	}
	// Events on paths without a context are no-ops; unknown types are invalid.
	if err := e.m.PathEvent(e.ctx, c("nothing"), contexts.PathEvent{Type: contexts.PathDeleted}); err != nil {
		t.Fatal(err)
	}
	wantCategory(t, e.m.PathEvent(e.ctx, c("main"), contexts.PathEvent{Type: "renamed"}), errdefs.ErrInvalidArgument)
}

func TestTerminate(t *testing.T) {
	e := newEnv(t, contexts.Config{})
	id := ident("t1", "c1", "main")
	rec := e.getOrCreate(id)
	wantCategory(t, e.m.Terminate(e.ctx, "t1", rec.ID, "bogus"), errdefs.ErrInvalidArgument)
	if err := e.m.Terminate(e.ctx, "t1", rec.ID, ""); err != nil {
		t.Fatal(err)
	}
	if r := e.record(rec.ID); r.Reason != contexts.ReasonManual || e.running(rec.SandboxID) {
		t.Fatalf("terminated: %+v", r)
	}
	if err := e.m.Terminate(e.ctx, "t1", rec.ID, ""); err != nil {
		t.Fatalf("second terminate: %v", err)
	}
	if again := e.getOrCreate(id); again.ID == rec.ID {
		t.Fatal("terminated context reused")
	}
}

func TestSetTTL(t *testing.T) {
	e := newEnv(t, contexts.Config{})
	id := ident("t1", "c1", "main")
	rec := e.getOrCreate(id)
	got, err := e.m.SetTTL(e.ctx, "t1", rec.ID, 2*time.Hour)
	if err != nil || !got.ExpiresAt.Equal(e.clock.Now().Add(2*time.Hour)) {
		t.Fatalf("SetTTL = %+v, %v", got, err)
	}
	e.clock.Advance(90 * time.Minute)
	e.exec(id, "1")
	if r := e.record(rec.ID); r.ID != rec.ID || !r.ExpiresAt.Equal(e.clock.Now().Add(2*time.Hour)) {
		t.Fatalf("after use, record = %+v; want the new TTL applied", r)
	}
	_, err = e.m.SetTTL(e.ctx, "t1", rec.ID, 0)
	wantCategory(t, err, errdefs.ErrInvalidArgument)
	e.m.Terminate(e.ctx, "t1", rec.ID, "")
	_, err = e.m.SetTTL(e.ctx, "t1", rec.ID, time.Hour)
	wantCategory(t, err, errdefs.ErrFailedPrecondition)
}

// ttlBox is a sandbox whose provider keeps a timeout of its own (like
// E2B's), inside a wrapper that gives it back with Unwrap (like a provider
// chain's).
type ttlBox struct {
	contexts.Sandbox
	mu   *sync.Mutex
	ttls *[]time.Duration
}

func (b ttlBox) SetTTL(ctx context.Context, ttl time.Duration) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	*b.ttls = append(*b.ttls, ttl)
	return nil
}

type chained struct{ contexts.Sandbox }

func (c chained) Unwrap() contexts.Sandbox { return c.Sandbox }

type ttlProvider struct {
	*contextstest.Provider
	mu   sync.Mutex
	ttls []time.Duration
}

func (p *ttlProvider) Create(ctx context.Context, spec contexts.Spec) (contexts.Sandbox, error) {
	sb, err := p.Provider.Create(ctx, spec)
	if err != nil {
		return nil, err
	}
	return chained{ttlBox{Sandbox: sb, mu: &p.mu, ttls: &p.ttls}}, nil
}

// TestSetTTLReachesProvider: a TTL set on a context reaches a sandbox
// whose provider keeps its own timeout, through a wrapping provider.
func TestSetTTLReachesProvider(t *testing.T) {
	p := &ttlProvider{Provider: contextstest.NewProvider()}
	m := contexts.NewManager(memory.New(), p, contexts.Config{PoolSize: -1, CleanupInterval: time.Hour})
	ctx := context.Background()
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close(context.Background()) })
	rec, err := m.GetOrCreate(ctx, ident("t1", "c1", "main"), contexts.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.SetTTL(ctx, "t1", rec.ID, 42*time.Minute); err != nil {
		t.Fatal(err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.ttls) != 1 || p.ttls[0] != 42*time.Minute {
		t.Fatalf("provider timeouts set: %v, want [42m]", p.ttls)
	}
}

// TestEndConversation: one call ends every path of a conversation (reason
// deleted) and nothing of another conversation, tenant or user; a second call
// finds nothing left.
func TestEndConversation(t *testing.T) {
	e := newEnv(t, contexts.Config{MaxPerConversation: -1})
	var paths []*contexts.Record
	for _, p := range []string{"main", "b1", "b2"} {
		paths = append(paths, e.getOrCreate(ident("t1", "c1", p)))
	}
	other := e.getOrCreate(ident("t1", "c2", "main"))
	otherTenant := e.getOrCreate(ident("t2", "c1", "main"))
	aliceID := ident("t1", "c1", "main")
	aliceID.UserID = "alice"
	otherUser := e.getOrCreate(aliceID)

	n, err := e.m.EndConversation(e.ctx, "t1", "", "c1")
	if err != nil || n != len(paths) {
		t.Fatalf("EndConversation = %d, %v; want %d", n, err, len(paths))
	}
	for _, rec := range paths {
		if r := e.record(rec.ID); r.State != contexts.StateTerminated || r.Reason != contexts.ReasonDeleted || e.running(rec.SandboxID) {
			t.Errorf("path %s: %+v", rec.PathID, r)
		}
	}
	for _, rec := range []*contexts.Record{other, otherTenant, otherUser} {
		if r := e.record(rec.ID); r.State != contexts.StateReady || !e.running(rec.SandboxID) {
			t.Errorf("context %s/%s/%s was ended: %+v", rec.TenantID, rec.ConversationID, rec.PathID, r)
		}
	}
	if n, err := e.m.EndConversation(e.ctx, "t1", "", "c1"); err != nil || n != 0 {
		t.Errorf("second EndConversation = %d, %v; want 0", n, err)
	}
	_, err = e.m.EndConversation(e.ctx, "t1", "", "")
	wantCategory(t, err, errdefs.ErrInvalidArgument)
	if n, err := e.m.EndConversation(e.ctx, "t1", "alice", "c1"); err != nil || n != 1 {
		t.Errorf("EndConversation of alice's c1 = %d, %v; want 1", n, err)
	}
}
