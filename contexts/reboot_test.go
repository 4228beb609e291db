package contexts_test

import (
	"context"
	"errors"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/contexts/contextstest"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/store/memory"
)

// hookProvider is the fake provider with a hook as each Destroy begins.
type hookProvider struct {
	*contextstest.Provider
	mu        sync.Mutex
	onDestroy func(id string)
}

func (p *hookProvider) Destroy(ctx context.Context, id string) error {
	p.mu.Lock()
	f := p.onDestroy
	p.mu.Unlock()
	if f != nil {
		f(id)
	}
	return p.Provider.Destroy(ctx, id)
}

// keeper is a catalog that keeps suspended contexts' images and
// snapshots by name only (the fake's layers are empty).
type keeper struct {
	mu      sync.Mutex
	seq     int
	deleted []string
	forks   map[string]string // fork templates (TakeForkSnapshot): tenant by id
}

func (*keeper) ResolveTemplate(ctx context.Context, tenantID, ref string) (contexts.TemplateInfo, error) {
	return contexts.TemplateInfo{ID: ref, Name: ref}, nil
}

func (*keeper) TemplateInfo(ctx context.Context, id string) (contexts.TemplateInfo, error) {
	return contexts.TemplateInfo{ID: id, Name: id}, nil
}

func (k *keeper) next(prefix string) string {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.seq++
	return prefix + string(rune('a'+k.seq))
}

func (k *keeper) KeepSuspended(ctx context.Context, tenantID, contextID, template string, capture func(ctx context.Context, w io.Writer, max int64) error) (string, int64, error) {
	return k.next("img-"), 0, capture(ctx, io.Discard, 1<<20)
}

func (*keeper) DropSuspended(ctx context.Context, tenantID, id string) error { return nil }

func (k *keeper) TakeSnapshot(ctx context.Context, tenantID, contextID, template, name string, capture func(ctx context.Context, w io.Writer, max int64) error) (contexts.SnapshotInfo, error) {
	if err := capture(ctx, io.Discard, 1<<20); err != nil {
		return contexts.SnapshotInfo{}, err
	}
	return contexts.SnapshotInfo{ID: k.next("snap-"), Name: name, ContextID: contextID, Template: template}, nil
}

func (k *keeper) DeleteSnapshot(ctx context.Context, tenantID, id string) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.deleted = append(k.deleted, id)
	delete(k.forks, id)
	return nil
}

// TakeForkSnapshot, ForkTemplates and IsForkTemplate: the store's marks
// (contexts.ForkMarks), kept here.
func (k *keeper) TakeForkSnapshot(ctx context.Context, tenantID, contextID, template, name string, capture func(ctx context.Context, w io.Writer, max int64) error) (contexts.SnapshotInfo, error) {
	info, err := k.TakeSnapshot(ctx, tenantID, contextID, template, name, capture)
	if err != nil {
		return info, err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.forks == nil {
		k.forks = map[string]string{}
	}
	k.forks[info.ID] = tenantID
	return info, nil
}

func (k *keeper) ForkTemplates(ctx context.Context, before time.Time, limit int) ([]contexts.ForkTemplate, error) {
	return nil, nil // the fake's templates have no age: nothing for the sweep
}

func (k *keeper) IsForkTemplate(ctx context.Context, tenantID, id string) (bool, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	t, ok := k.forks[id]
	return ok && t == tenantID, nil
}

func (k *keeper) deletedIDs() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]string(nil), k.deleted...)
}

// TestRebootAtomic: a reboot (E2B's connect with onResume 'reboot') of a
// paused context is one operation: a call that arrives while the reboot
// has dropped the old sandbox and not yet booted the new one waits for
// the reboot and then runs on the rebooted sandbox, and the reboot
// succeeds. The hook starts that call as the old sandbox is destroyed and
// lets the reboot go on only once the call waits on the context's lock.
func TestRebootAtomic(t *testing.T) {
	p := &hookProvider{Provider: contextstest.NewProvider()}
	m := contexts.NewManager(memory.New(), p, contexts.Config{PoolSize: -1, CleanupInterval: time.Hour, Catalog: &keeper{}})
	ctx := context.Background()
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer m.Close(ctx)
	id := contexts.Identity{TenantID: "t1", ConversationID: "c", PathID: "main"}
	if _, err := m.Execute(ctx, id, contexts.ExecuteRequest{Language: "python", Code: "x = 41"}, nil); err != nil {
		t.Fatal(err)
	}
	rec, err := m.Lookup(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Pause(ctx, "t1", rec.ID, time.Minute); err != nil {
		t.Fatal(err)
	}

	type result struct {
		res *contexts.ExecuteResult
		err error
	}
	landed := make(chan result, 1)
	var once sync.Once
	p.mu.Lock()
	p.onDestroy = func(sandboxID string) {
		if sandboxID != rec.SandboxID {
			return
		}
		once.Do(func() {
			go func() {
				res, err := m.Execute(ctx, id, contexts.ExecuteRequest{Language: "python", Code: "print(x)"}, nil)
				landed <- result{res, err}
			}()
			// The call waits on the context's lock (the reboot holds it).
			deadline := time.Now().Add(30 * time.Second)
			for contexts.LockWaiters(m, id) < 2 && time.Now().Before(deadline) {
				time.Sleep(time.Millisecond)
			}
			if contexts.LockWaiters(m, id) < 2 {
				t.Error("the call never waited on the reboot's lock: the interleaving was not exercised")
			}
		})
	}
	p.mu.Unlock()

	out, err := m.Reboot(ctx, "t1", rec.ID, time.Minute)
	if err != nil {
		t.Fatalf("Reboot with a call waiting: %v", err)
	}
	if out.Paused() || out.Suspended() || out.SandboxID == "" || out.SandboxID == rec.SandboxID {
		t.Fatalf("after the reboot: %+v, want a running context on a new sandbox", out)
	}
	var got result
	select {
	case got = <-landed:
	case <-time.After(60 * time.Second):
		t.Fatal("the waiting call never ran")
	}
	if got.err != nil {
		t.Fatalf("the call that waited: %v", got.err)
	}
	if got.res.SandboxID != out.SandboxID || got.res.Success {
		t.Fatalf("the call that waited: %+v; want it on the rebooted sandbox %s, x gone", got.res, out.SandboxID)
	}
	if n := p.Created(); n != 2 {
		t.Fatalf("%d sandboxes created, want 2 (the first, the reboot's)", n)
	}
	if _, err := m.Reboot(ctx, "t1", rec.ID, time.Minute); !errors.Is(err, contexts.ErrNotPaused) {
		t.Fatalf("a reboot of a running context: %v, want ErrNotPaused", err)
	}
	if _, err := m.Reboot(ctx, "t2", rec.ID, time.Minute); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("another tenant's reboot: %v, want not_found", err)
	}
}
