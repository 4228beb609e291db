package e2b_test

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/provider/e2b"
	"github.com/sandlot/sandlot/store/memory"
)

// TestDeploymentsOnOneAccount: two sandlot deployments (their own stores,
// their own deployment ids) on one E2B account, here sandlot's own E2B
// surface. Neither lists the other's sandboxes, and neither's reconcile or
// cleanup sweep kills them: a file written through one survives the
// other's start and cleanup passes.
func TestDeploymentsOnOneAccount(t *testing.T) {
	srv := sandlotE2B(t)
	ctx := context.Background()
	provider := func(dep string) *e2b.Provider {
		return e2b.New(e2b.Config{APIKey: testKey, APIURL: srv.URL, SandboxURL: srv.URL, Deployment: dep, ConnectTimeout: 2 * time.Second})
	}
	pa, pb := provider("dep-a"), provider("dep-b")

	// List sees only its own deployment's sandboxes.
	sa, err := pa.Create(ctx, contexts.Spec{TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	sb, err := pb.Create(ctx, contexts.Spec{TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		p          *e2b.Provider
		own, other string
	}{{pa, sa.ID(), sb.ID()}, {pb, sb.ID(), sa.ID()}} {
		ids, err := tc.p.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(ids, tc.own) || slices.Contains(ids, tc.other) {
			t.Fatalf("list %v: want %s and not %s", ids, tc.own, tc.other)
		}
	}

	// Two managers, one per deployment, each with its own store.
	manager := func(p *e2b.Provider) *contexts.Manager {
		m := contexts.NewManager(memory.New(), p, contexts.Config{PoolSize: -1, CleanupInterval: time.Hour})
		if err := m.Start(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.Close(context.Background()) })
		return m
	}
	ma := manager(pa)
	id := contexts.Identity{TenantID: "t1", ConversationID: "c1", PathID: "main"}
	var first *contexts.Record
	err = ma.Use(ctx, id, contexts.CreateOptions{}, func(ctx context.Context, rec *contexts.Record, s contexts.Sandbox) error {
		first = rec
		_, err := s.WriteFile(ctx, agent.WriteParams{Path: "state.txt", Data: []byte("kept")})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	mb := manager(pb) // B's start reconciles against the shared account
	for range 2 {     // the sweep's grace is one pass
		if _, err := mb.Cleanup(ctx); err != nil {
			t.Fatal(err)
		}
	}
	err = ma.Use(ctx, id, contexts.CreateOptions{}, func(ctx context.Context, rec *contexts.Record, s contexts.Sandbox) error {
		if rec.ID != first.ID || rec.SandboxID != first.SandboxID {
			t.Errorf("context %s/%s after the other deployment's cleanup, want %s/%s", rec.ID, rec.SandboxID, first.ID, first.SandboxID)
		}
		r, err := s.ReadFile(ctx, agent.ReadParams{Path: "state.txt"})
		if err != nil {
			return err
		}
		if string(r.Data) != "kept" {
			t.Errorf("state.txt = %q, want kept", r.Data)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("A's context after B's start and cleanup: %v", err)
	}
	if ids, err := pa.List(ctx); err != nil || !slices.Contains(ids, first.SandboxID) {
		t.Fatalf("A's list after B's cleanup: %v, %v; want %s", ids, err, first.SandboxID)
	}
}

// TestDeploymentLabel: the label Create sets, which List filters on. A
// caller's labels cannot override it, and an id is reduced to bytes that
// survive the metadata filter's URL encodings.
func TestDeploymentLabel(t *testing.T) {
	srv := sandlotE2B(t)
	ctx := context.Background()
	for _, tc := range []struct{ dep, want string }{
		{"", e2b.DefaultDeployment},
		{"node-a.1_x", "node-a.1_x"},
		{"host a/b=c&d%", "host_a_b_c_d_"},
	} {
		t.Run(tc.want, func(t *testing.T) {
			p := e2b.New(e2b.Config{APIKey: testKey, APIURL: srv.URL, SandboxURL: srv.URL, Deployment: tc.dep, ConnectTimeout: 2 * time.Second})
			sb, err := p.Create(ctx, contexts.Spec{TTL: time.Minute, Labels: map[string]string{"sandlotDeployment": "other", "managedBy": "x"}})
			if err != nil {
				t.Fatal(err)
			}
			req, _ := http.NewRequest("GET", srv.URL+"/sandboxes/"+sb.ID(), nil)
			req.Header.Set("X-API-KEY", testKey)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var d struct{ Metadata map[string]string }
			if err := json.NewDecoder(resp.Body).Decode(&d); err != nil {
				t.Fatal(err)
			}
			if d.Metadata["sandlotDeployment"] != tc.want || d.Metadata["managedBy"] != "sandlot" {
				t.Fatalf("metadata %v, want sandlotDeployment=%s managedBy=sandlot", d.Metadata, tc.want)
			}
			if ids, err := p.List(ctx); err != nil || !slices.Contains(ids, sb.ID()) {
				t.Fatalf("list %v, %v; want %s", ids, err, sb.ID())
			}
		})
	}
}
