package contexts_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/contexts/contextstest"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/store/memory"
)

// TestForkWalls: Fork puts the new context on a path of the source's own
// tenant, user and conversation, and nowhere else: another tenant's
// context is not_found, the source's own path invalid, a path that has a
// context already_exists before anything is captured, an identity part
// the manager refuses invalid; the new context starts from the fork's
// snapshot, and a fork whose context cannot start deletes it again.
func TestForkWalls(t *testing.T) {
	p := contextstest.NewProvider()
	k := &keeper{}
	m := contexts.NewManager(memory.New(), p, contexts.Config{PoolSize: -1, CleanupInterval: time.Hour, Catalog: k, MaxPerTenant: 3})
	ctx := context.Background()
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer m.Close(ctx)
	src := contexts.Identity{TenantID: "t1", UserID: "u1", ConversationID: "c", PathID: "main"}
	rec, err := m.GetOrCreate(ctx, src, contexts.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.GetOrCreate(ctx, contexts.Identity{TenantID: "t2", ConversationID: "c", PathID: "main"}, contexts.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, tenant, path string
		want               error
	}{
		{"another tenant's context", "t2", "branch", errdefs.ErrNotFound},
		{"the source's own path", "t1", "main", errdefs.ErrInvalidArgument},
		{"no path", "t1", "", errdefs.ErrInvalidArgument},
		{"a control character", "t1", "b\x00", errdefs.ErrInvalidArgument},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := m.Fork(ctx, tc.tenant, rec.ID, tc.path); !errors.Is(err, tc.want) {
				t.Fatalf("Fork: %v, want %v", err, tc.want)
			}
		})
	}
	res, err := m.Fork(ctx, "t1", rec.ID, "branch")
	if err != nil {
		t.Fatal(err)
	}
	want := contexts.Identity{TenantID: "t1", UserID: "u1", ConversationID: "c", PathID: "branch"}
	if res.Context.Identity != want || res.Context.Template != res.Snapshot.ID || res.Snapshot.ContextID != rec.ID || res.Memory {
		t.Fatalf("fork: %+v (snapshot %+v), want a context on %v from the snapshot", res.Context, res.Snapshot, want)
	}
	before := p.Created()
	if _, err := m.Fork(ctx, "t1", rec.ID, "branch"); !errors.Is(err, errdefs.ErrAlreadyExists) {
		t.Fatalf("a second fork onto the path: %v, want already_exists", err)
	}
	if p.Created() != before || len(k.deletedIDs()) != 0 {
		t.Fatal("a fork onto a taken path captured or created something")
	}
	// The tenant's limit (3: two of t1's and the fork's) refuses the
	// context: its snapshot goes again.
	if _, err := m.GetOrCreate(ctx, contexts.Identity{TenantID: "t1", ConversationID: "d", PathID: "main"}, contexts.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Fork(ctx, "t1", rec.ID, "third"); err == nil {
		t.Fatal("a fork past the tenant's limit started")
	}
	if got := k.deletedIDs(); len(got) != 1 {
		t.Fatalf("snapshots deleted after the refused fork: %v, want its own", got)
	}
	if _, err := m.Lookup(ctx, contexts.Identity{TenantID: "t1", UserID: "u1", ConversationID: "c", PathID: "third"}); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("the refused fork's path: %v, want no context", err)
	}
}

// TestForkTemplateGoes: a fork's template (up to 4 GiB a layer, counted in
// the tenant's snapshot bound, and not deletable over MCP) is deleted once
// no context runs on it: kept while another context still runs on it,
// gone when the last one ends. ForkSnapshot's template (E2B's fork of N)
// stays while its caller's ctx is live, so a fork of the batch that ends
// early does not take it from the others, and goes after.
func TestForkTemplateGoes(t *testing.T) {
	p := contextstest.NewProvider()
	k := &keeper{}
	m := contexts.NewManager(memory.New(), p, contexts.Config{PoolSize: -1, CleanupInterval: time.Hour, Catalog: k})
	ctx := context.Background()
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer m.Close(ctx)
	src, err := m.GetOrCreate(ctx, contexts.Identity{TenantID: "t1", ConversationID: "c", PathID: "main"}, contexts.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	deleted := func(id string) bool { return slices.Contains(k.deletedIDs(), id) }
	waitDeleted := func(t *testing.T, id string) {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); !deleted(id); time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("template %s was not deleted; deleted: %v", id, k.deletedIDs())
			}
		}
	}
	end := func(t *testing.T, id string) {
		t.Helper()
		if err := m.Terminate(ctx, "t1", id, contexts.ReasonManual); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("fork onto a path", func(t *testing.T) {
		res, err := m.Fork(ctx, "t1", src.ID, "branch")
		if err != nil {
			t.Fatal(err)
		}
		tmpl := res.Snapshot.ID
		other, err := m.GetOrCreate(ctx, contexts.Identity{TenantID: "t1", ConversationID: "d", PathID: "main"}, contexts.CreateOptions{Template: tmpl})
		if err != nil {
			t.Fatal(err)
		}
		end(t, res.Context.ID)
		if deleted(tmpl) {
			t.Fatal("the fork's template was deleted while another context runs on it")
		}
		end(t, other.ID)
		waitDeleted(t, tmpl)
	})

	t.Run("ForkSnapshot batch", func(t *testing.T) {
		call, cancel := context.WithCancel(ctx)
		defer cancel()
		_, info, err := m.ForkSnapshot(call, "t1", src.ID)
		if err != nil {
			t.Fatal(err)
		}
		for _, conv := range []string{"e1", "e2"} {
			rec, err := m.GetOrCreate(call, contexts.Identity{TenantID: "t1", ConversationID: conv, PathID: "main"}, contexts.CreateOptions{Template: info.ID})
			if err != nil {
				t.Fatal(err)
			}
			end(t, rec.ID) // each ends before the batch is done
		}
		if deleted(info.ID) {
			t.Fatal("the fork's template was deleted while its batch was still starting")
		}
		cancel()
		waitDeleted(t, info.ID)
	})

	t.Run("kept while its fork runs", func(t *testing.T) {
		res, err := m.Fork(ctx, "t1", src.ID, "live")
		if err != nil {
			t.Fatal(err)
		}
		if deleted(res.Snapshot.ID) {
			t.Fatal("the template of a running fork was deleted")
		}
		end(t, res.Context.ID)
		waitDeleted(t, res.Snapshot.ID)
	})
}
