package daemon

import (
	"bytes"
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/contexts/contextstest"
	"github.com/sandlot/sandlot/provider/chain"
)

// e2bNamed is the fake provider under the name the quota plans use.
type e2bNamed struct{ *contextstest.Provider }

func (e2bNamed) Name() string { return "e2b" }

// TestE2BQuotaWired: with a plan (E2BProvider.PlanCreations and
// QuotaThresholds, serve's $SANDLOT_E2B_PLAN_CREATIONS and
// $SANDLOT_QUOTA_THRESHOLDS), the daemon's provider chain counts e2b
// creations per tenant and logs a warning at each threshold (the quota's
// own gauge is tested in provider/chain).
func TestE2BQuotaWired(t *testing.T) {
	plan := E2BProvider{PlanCreations: 4, QuotaThresholds: "0.5,1"}
	file := filepath.Join(t.TempDir(), e2bQuotaFile)
	var logs bytes.Buffer
	var mu sync.Mutex
	log := slog.New(slog.NewTextHandler(&syncWriter{w: &logs, mu: &mu}, nil))
	q, err := e2bQuota(log, file, plan)
	if err != nil || q == nil {
		t.Fatalf("quota %v, %v", q, err)
	}
	p := providerChain([]contexts.Provider{e2bNamed{contextstest.NewProvider()}}, log, q)
	for range 4 {
		if _, err := p.Create(context.Background(), contexts.Spec{Labels: map[string]string{"sandlot.tenant": "t1"}}); err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if n := strings.Count(logs.String(), "provider quota threshold reached"); n != 2 {
		t.Fatalf("%d threshold warnings logged:\n%s", n, logs.String())
	}
	if u := q.Usage("t1", "e2b"); u.Creations != 4 {
		t.Fatalf("usage %+v", u)
	}
	// The account's count survives a restart (the plan is the account's).
	again, err := e2bQuota(log, file, plan)
	if err != nil {
		t.Fatal(err)
	}
	if u := again.Usage(chain.Account, "e2b"); u.Creations != 4 {
		t.Fatalf("after a restart the account's usage is %+v, want 4 creations", u)
	}

	if q, err := e2bQuota(log, file, E2BProvider{}); q != nil || err != nil {
		t.Fatalf("without a plan: %v, %v", q, err)
	}
	if _, err := e2bQuota(log, file, E2BProvider{PlanCreations: 3, QuotaThresholds: "x"}); err == nil {
		t.Fatal("bad thresholds were accepted")
	}
}

// TestE2BProviderSettings: the e2b provider builds from its settings, and
// refuses sizes that do not parse.
func TestE2BProviderSettings(t *testing.T) {
	f := E2BProvider{Template: "from-flag", Deployment: "from-env", ConnectTimeout: 7 * time.Second,
		Sizes: "small:1:512,big:4:4096", PlanComputeMinutes: 600}
	if _, err := e2bProvider(slog.New(slog.DiscardHandler), "node-1", f); err != nil {
		t.Fatal(err)
	}
	if _, err := e2bProvider(slog.New(slog.DiscardHandler), "node-1", E2BProvider{Sizes: "nonsense"}); err == nil {
		t.Fatal("bad sizes were accepted")
	}
}

type syncWriter struct {
	w  *bytes.Buffer
	mu *sync.Mutex
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}
