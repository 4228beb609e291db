package cli

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

// TestE2BQuotaWired: with a plan in the environment ($SANDLOT_E2B_PLAN_CREATIONS
// and $SANDLOT_QUOTA_THRESHOLDS, read as serve's flags), serve's provider chain
// counts e2b creations per tenant and logs a warning at each threshold
// (the quota's own gauge is tested in provider/chain).
func TestE2BQuotaWired(t *testing.T) {
	t.Setenv("SANDLOT_E2B_PLAN_CREATIONS", "4")
	t.Setenv("SANDLOT_QUOTA_THRESHOLDS", "0.5,1")
	c, err := parseServe(t)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), e2bQuotaFile)
	var logs bytes.Buffer
	var mu sync.Mutex
	log := slog.New(slog.NewTextHandler(&syncWriter{w: &logs, mu: &mu}, nil))
	q, err := e2bQuota(log, file, c.e2b)
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
	again, err := e2bQuota(log, file, c.e2b)
	if err != nil {
		t.Fatal(err)
	}
	if u := again.Usage(chain.Account, "e2b"); u.Creations != 4 {
		t.Fatalf("after a restart the account's usage is %+v, want 4 creations", u)
	}

	if q, err := e2bQuota(log, file, e2bFlags{}); q != nil || err != nil {
		t.Fatalf("without a plan: %v, %v", q, err)
	}
	t.Setenv("SANDLOT_E2B_PLAN_CREATIONS", "lots")
	if _, err := parseServe(t); err == nil {
		t.Fatal("a bad plan was accepted")
	}
	t.Setenv("SANDLOT_E2B_PLAN_CREATIONS", "")
	if _, err := e2bQuota(log, file, e2bFlags{planCreations: 3, thresholds: "x"}); err == nil {
		t.Fatal("bad thresholds were accepted")
	}
}

// TestE2BSettingsConfigurable: the e2b provider's settings are flags, and
// so environment variables and config keys, with the documented
// precedence (flag, then environment, then file).
func TestE2BSettingsConfigurable(t *testing.T) {
	file := writeFile(t, "c.yaml", "e2b-template: from-file\ne2b-sizes: small:1:512,big:4:4096\ne2b-connect-timeout: 7s\ne2b-plan-compute-minutes: 600\n")
	t.Setenv("SANDLOT_E2B_DEPLOYMENT", "from-env")
	t.Setenv("SANDLOT_E2B_TEMPLATE", "from-env")
	c, err := parseServe(t, "--config", file, "--e2b-template", "from-flag")
	if err != nil {
		t.Fatal(err)
	}
	want := e2bFlags{template: "from-flag", deployment: "from-env", connectTimeout: 7 * time.Second,
		sizes: "small:1:512,big:4:4096", planMinutes: 600}
	if c.e2b != want {
		t.Fatalf("e2b settings %+v, want %+v", c.e2b, want)
	}
	if _, err := e2bProvider(slog.New(slog.DiscardHandler), "node-1", c.e2b); err != nil {
		t.Fatal(err)
	}
	if _, err := e2bProvider(slog.New(slog.DiscardHandler), "node-1", e2bFlags{sizes: "nonsense"}); err == nil {
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
