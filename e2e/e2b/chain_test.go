package e2b

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/provider/chain"
	"github.com/sandlot/sandlot/provider/e2b"
	"github.com/sandlot/sandlot/store/memory"
)

// TestSandlotBehindSandlot runs a real chain: an outer Manager whose
// provider chain starts with the e2b provider, pointed at a second sandlot
// (E2B surface, real Manager, real sandlot-agent processes) over HTTP.
func TestSandlotBehindSandlot(t *testing.T) {
	t.Parallel()
	url := server(t, sandboxProvider(t))
	remote := e2b.New(e2b.Config{APIKey: apiKey, APIURL: url, SandboxURL: url, ConnectTimeout: 5 * time.Second})
	local := sandboxProvider(t)
	var mu sync.Mutex
	var fallbacks []string
	quota, err := chain.NewQuota(chain.QuotaConfig{Plans: map[string]chain.Plan{"e2b": {Creations: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	c := chain.New([]contexts.Provider{remote, local}, chain.Config{Quota: quota, OnFallback: func(from, to string, err error) {
		mu.Lock()
		fallbacks = append(fallbacks, from+"->"+to)
		mu.Unlock()
	}})
	m := contexts.NewManager(memory.New(), c, contexts.Config{PoolSize: -1})
	ctx := context.Background()
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close(context.Background()) })

	id, _ := contexts.Resolve("tenant-outer", "", "conv-1", "", "")
	if _, err := m.Execute(ctx, id, contexts.ExecuteRequest{Language: agent.Python, Code: "x = 20"}, nil); err != nil {
		t.Fatal(err)
	}
	res, err := m.Execute(ctx, id, contexts.ExecuteRequest{Language: agent.Python, Code: "print('hi')\nx * 2 + 2"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Results) == 0 || res.Results[0].Text != "42" || res.Stdout != "hi\n" {
		t.Fatalf("execute through the chain: %+v", res.RunCodeResult)
	}
	if !strings.HasPrefix(res.SandboxID, "e2b:") {
		t.Fatalf("sandbox id %q: not made by the e2b provider", res.SandboxID)
	}
	err = m.Use(ctx, id, contexts.CreateOptions{}, func(ctx context.Context, rec *contexts.Record, sb contexts.Sandbox) error {
		if _, err := sb.WriteFile(ctx, agent.WriteParams{Path: "notes/a.txt", Data: []byte("through two sandlots")}); err != nil {
			return err
		}
		r, err := sb.Exec(ctx, agent.ExecParams{Shell: "cat notes/a.txt; exit 3"}, nil)
		if err != nil {
			return err
		}
		if r.Stdout != "through two sandlots" || r.ExitCode != 3 {
			t.Errorf("exec %+v", r)
		}
		list, err := sb.List(ctx, agent.ListParams{Path: "notes"})
		if err != nil || len(list) != 1 || list[0].Name != "a.txt" {
			t.Errorf("list %+v %v", list, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	innerIDs, err := remote.List(ctx)
	if err != nil || len(innerIDs) != 1 {
		t.Fatalf("inner sandboxes %v %v", innerIDs, err)
	}
	if u := quota.Usage("tenant-outer", "e2b"); u.Creations != 1 {
		t.Fatalf("quota usage %+v", u)
	}
	rec, err := m.Lookup(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	// The cleanup pass samples the E2B-backed context's usage from the
	// inner sandlot's metrics (its sandbox's cgroup) and stores it.
	if _, err := m.Cleanup(ctx); err != nil {
		t.Fatal(err)
	}
	if got, err := m.Get(ctx, "tenant-outer", rec.ID); err != nil || got.ResourceUsage.MemoryBytes <= 0 {
		t.Fatalf("usage of the e2b-backed context after a cleanup pass: %+v %v", got, err)
	} else {
		t.Logf("usage through the e2b provider: %+v", got.ResourceUsage)
	}
	if err := m.Terminate(ctx, "tenant-outer", rec.ID, contexts.ReasonManual); err != nil {
		t.Fatal(err)
	}
	if ids, err := remote.List(ctx); err != nil || slices.Contains(ids, innerIDs[0]) {
		t.Fatalf("inner sandbox survives terminate: %v %v", ids, err)
	}

	// Without a key the chain falls back to the local provider, counted.
	noKey := chain.New([]contexts.Provider{e2b.New(e2b.Config{APIURL: url}), local}, chain.Config{OnFallback: func(from, to string, err error) {
		mu.Lock()
		fallbacks = append(fallbacks, from+"->"+to+": "+err.Error())
		mu.Unlock()
	}})
	m2 := contexts.NewManager(memory.New(), noKey, contexts.Config{PoolSize: -1})
	id2, _ := contexts.Resolve("tenant-outer", "", "conv-2", "", "")
	res, err = m2.Execute(ctx, id2, contexts.ExecuteRequest{Language: agent.Bash, Code: "echo local"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(res.SandboxID, local.Name()+":") || res.Stdout != "local\n" {
		t.Fatalf("fallback result %+v", res)
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Contains(fallbacks, "e2b->"+local.Name()+": E2B API key not configured") {
		t.Fatalf("fallbacks %q", fallbacks)
	}
	m2.Close(ctx)
}
