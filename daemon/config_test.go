package daemon

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/contexts/contextstest"
	"github.com/sandlot/sandlot/provider/local"
	"github.com/sandlot/sandlot/store/memory"
)

// TestConfigReachesConsumers: each lifecycle field of Config lands in the
// field of contexts.Config or local.Config it names (cli's
// TestKnobsReachTheirConsumer brings each from its flag to Config).
func TestConfigReachesConsumers(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		got  func(contexts.Config, local.Config) any
		want any
	}{
		{"ContextTTL", Config{ContextTTL: 11 * time.Minute}, func(m contexts.Config, _ local.Config) any { return m.TTL }, 11 * time.Minute},
		{"CleanupInterval", Config{CleanupInterval: 12 * time.Second}, func(m contexts.Config, _ local.Config) any { return m.CleanupInterval }, 12 * time.Second},
		{"ExecTimeout", Config{ExecTimeout: 13 * time.Second}, func(m contexts.Config, _ local.Config) any { return m.DefaultTimeout }, 13 * time.Second},
		{"MaxExecTimeout", Config{MaxExecTimeout: 14 * time.Minute}, func(m contexts.Config, _ local.Config) any { return m.MaxTimeout }, 14 * time.Minute},
		{"MaxExecutions", Config{MaxExecutions: -1}, func(m contexts.Config, _ local.Config) any { return m.MaxExecutionsPerContext }, int64(-1)},
		{"MaxPerTenant", Config{MaxPerTenant: 16}, func(m contexts.Config, _ local.Config) any { return m.MaxPerTenant }, 16},
		{"MaxPerConversation", Config{MaxPerConversation: 17}, func(m contexts.Config, _ local.Config) any { return m.MaxPerConversation }, 17},
		{"PoolSize none", Config{PoolSize: 0}, func(m contexts.Config, _ local.Config) any { return m.PoolSize }, -1},
		{"PoolSize default", Config{PoolSize: -1}, func(m contexts.Config, _ local.Config) any { return m.PoolSize }, 0},
		{"PoolSizes", Config{PoolSizes: map[string]int{"a": 1, "b": 0}}, func(m contexts.Config, _ local.Config) any { return m.PoolSizes }, map[string]int{"a": 1, "b": 0}},
		{"Limits", Config{Limits: contexts.Limits{PIDs: 9}}, func(m contexts.Config, l local.Config) any { return []int64{m.Limits.PIDs, l.Limits.PIDs} }, []int64{9, 9}},
		{"CreateTimeout", Config{CreateTimeout: 19 * time.Second}, func(_ contexts.Config, l local.Config) any { return l.ReadyTimeout }, 19 * time.Second},
		{"MaxCreating", Config{MaxCreating: 3}, func(_ contexts.Config, l local.Config) any { return l.MaxCreating }, 3},
		{"Runtime auto", Config{Runtime: "auto"}, func(_ contexts.Config, l local.Config) any { return l.Runtime }, ""},
		{"Node", Config{Node: "n-1"}, func(m contexts.Config, _ local.Config) any { return m.Node }, "n-1"},
		{"LeaseTTL", Config{LeaseTTL: 21 * time.Second}, func(m contexts.Config, _ local.Config) any { return m.LeaseTTL }, 21 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, tc.got(tc.cfg.managerConfig(), tc.cfg.localConfig(nil))); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestContextTTLExpiresContext: Config.ContextTTL ($SANDLOT_CONTEXT_TTL)
// reaches the manager the daemon builds: an idle context expires after it,
// and not before under the default TTL.
func TestContextTTLExpiresContext(t *testing.T) {
	for _, tc := range []struct {
		ttl       time.Duration
		wantState contexts.State
	}{
		{0, contexts.StateReady},
		{90 * time.Second, contexts.StateTerminated},
	} {
		t.Run("ttl="+tc.ttl.String(), func(t *testing.T) {
			var mu sync.Mutex
			now := time.Now()
			mcfg := Config{ContextTTL: tc.ttl}.managerConfig()
			mcfg.Clock = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
			ctx := context.Background()
			m := contexts.NewManager(memory.New(), contextstest.NewProvider(), mcfg)
			defer m.Close(ctx)
			rec, err := m.GetOrCreate(ctx, contexts.Identity{TenantID: "t", ConversationID: "c", PathID: "main"}, contexts.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			now = now.Add(2 * time.Minute)
			mu.Unlock()
			if _, err := m.Cleanup(ctx); err != nil {
				t.Fatal(err)
			}
			got, err := m.Get(ctx, "t", rec.ID)
			if err != nil {
				t.Fatal(err)
			}
			if got.State != tc.wantState {
				t.Fatalf("after 2 idle minutes: %s (%s), want %s", got.State, got.Reason, tc.wantState)
			}
			if tc.wantState == contexts.StateTerminated && got.Reason != contexts.ReasonExpired {
				t.Fatalf("reason %s, want expired", got.Reason)
			}
		})
	}
}

// TestProviders: Config.Providers is trimmed, and empty means local.
func TestProviders(t *testing.T) {
	if diff := cmp.Diff([]string{"local"}, Config{}.providers()); diff != "" {
		t.Errorf("zero Config (-want +got):\n%s", diff)
	}
	c := Config{Providers: []string{" e2b", "local "}}
	if !c.uses("e2b") || !c.uses("local") || c.uses("k8s") {
		t.Errorf("uses of %q", c.Providers)
	}
}
