package cli

import (
	"cmp"
	"context"
	"crypto/rand"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/sandlot/sandlot/api/e2bcompat"
	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/provider/chain"
	"github.com/sandlot/sandlot/provider/e2b"
	"github.com/sandlot/sandlot/templates"
	"github.com/sandlot/sandlot/tenant"
)

// e2bSecretFile holds the key that signs E2B envdAccessTokens, so tokens
// handed out survive a restart.
const e2bSecretFile = "e2b-secret"

// e2bWire builds the E2B surface (api/e2bcompat) over the manager: the
// handler and its matcher for server.Config.E2B and E2BMatch. admit is the
// per-tenant in-flight limit the server applies to its own routes.
func e2bWire(cfg serveConfig, m *contexts.Manager, cat *templates.Catalog, builds *e2bcompat.Builds, auth *tenant.Authenticator, admit func(context.Context, string) (func(), error), nw *netWire, log *slog.Logger) (http.Handler, func(*http.Request) bool, error) {
	secret, err := e2bSecret(cfg.store.dataDir)
	if err != nil {
		return nil, nil, err
	}
	domain := ""
	if nw != nil {
		domain = cfg.network.domain
	}
	ecfg := e2bcompat.Config{
		Domain:        domain,
		Manager:       m,
		Secret:        secret,
		Logger:        log,
		Tenants:       auth,
		TokenTTL:      cfg.e2bTokenTTL,
		MaxTimeout:    cfg.e2bMaxTimeout,
		PausedTimeout: cfg.e2bPausedTimeout,
		Admit:         admit,
		Builds:        builds,
	}
	if cat != nil { // a nil *Catalog in the interface would not be nil
		ecfg.Catalog = cat
	}
	h := e2bcompat.New(ecfg)
	if nw != nil {
		nw.verify = h.VerifyTrafficToken
	}
	return h, h.Match, nil
}

// e2bSecret reads DATA/e2b-secret, creating it (32 random bytes, 0600) on
// first start.
func e2bSecret(dataDir string) ([]byte, error) {
	path := filepath.Join(dataDir, e2bSecretFile)
	if b, err := os.ReadFile(path); err == nil && len(b) >= 32 {
		return b, nil
	}
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return nil, fmt.Errorf("e2b secret: %w", err)
	}
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return nil, fmt.Errorf("data dir: %w", err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		return nil, fmt.Errorf("write the e2b secret: %w", err)
	}
	return b, nil
}

// e2bProvider is the "e2b" entry of --providers, configured like the E2B
// SDKs: E2B_API_KEY, E2B_API_URL, E2B_SANDBOX_URL, E2B_DOMAIN, plus
// SANDLOT_E2B_TEMPLATE, SANDLOT_E2B_CONNECT_TIMEOUT, SANDLOT_E2B_SIZES
// (templates by resources, "template:cpus:memoryMB,...") and
// SANDLOT_E2B_DEPLOYMENT (default: the node id, so each daemon lists and
// sweeps only the sandboxes it created). Without a key it still builds:
// Create fails with "E2B API key not configured" and a chain falls back.
// A value that does not parse is an error.
func e2bProvider(log *slog.Logger, node string) (contexts.Provider, error) {
	cfg := e2b.Config{
		APIKey:     os.Getenv("E2B_API_KEY"),
		APIURL:     os.Getenv("E2B_API_URL"),
		SandboxURL: os.Getenv("E2B_SANDBOX_URL"),
		Domain:     os.Getenv("E2B_DOMAIN"),
		Template:   os.Getenv("SANDLOT_E2B_TEMPLATE"),
		Deployment: cmp.Or(os.Getenv("SANDLOT_E2B_DEPLOYMENT"), node),
		Logger:     log,
	}
	if v := os.Getenv("SANDLOT_E2B_CONNECT_TIMEOUT"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return nil, fmt.Errorf("SANDLOT_E2B_CONNECT_TIMEOUT=%q: want a duration such as 10s: %w", v, errdefs.ErrInvalidArgument)
		}
		cfg.ConnectTimeout = d
	}
	sizes, err := e2b.ParseSizes(os.Getenv("SANDLOT_E2B_SIZES"))
	if err != nil {
		return nil, fmt.Errorf("SANDLOT_E2B_SIZES: %w", err)
	}
	cfg.Sizes = sizes
	return e2b.New(cfg), nil
}

// providerChain puts several providers in fallback order (the chain counts
// its fallbacks). A non-nil quota counts creations and compute minutes per
// tenant and provider (a chain of one is kept for it).
func providerChain(ps []contexts.Provider, log *slog.Logger, quota *chain.Quota) contexts.Provider {
	if len(ps) == 1 && quota == nil {
		return ps[0]
	}
	return chain.New(ps, chain.Config{Logger: log, Quota: quota})
}

// Environment of the e2b provider's plan limits: E2B's plans limit an
// account (one API key), so these apply to all tenants together.
const (
	envE2BPlanCreations = "SANDLOT_E2B_PLAN_CREATIONS"       // sandbox creations
	envE2BPlanMinutes   = "SANDLOT_E2B_PLAN_COMPUTE_MINUTES" // sandbox wall-clock minutes
	envQuotaThresholds  = "SANDLOT_QUOTA_THRESHOLDS"         // fractions, e.g. "0.5,0.8,1" (default 0.8,1)
)

// e2bQuotaFile, in the data dir, keeps the e2b quota's counts across
// restarts.
const e2bQuotaFile = "e2b-quota.json"

// e2bQuota builds the quota tracker of the e2b provider's account from the
// environment: nil when no plan limit is set. Its counts live in file.
// Crossing a threshold logs a warning and records the used share (the
// sandlot.quota.usage gauge); compute minutes of running sandboxes are
// re-checked every minute for the life of the process.
func e2bQuota(log *slog.Logger, file string) (*chain.Quota, error) {
	var plan chain.Plan
	if v := os.Getenv(envE2BPlanCreations); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("%s=%q: want a count: %w", envE2BPlanCreations, v, errdefs.ErrInvalidArgument)
		}
		plan.Creations = n
	}
	if v := os.Getenv(envE2BPlanMinutes); v != "" {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f < 0 {
			return nil, fmt.Errorf("%s=%q: want minutes: %w", envE2BPlanMinutes, v, errdefs.ErrInvalidArgument)
		}
		plan.ComputeMinutes = f
	}
	if plan == (chain.Plan{}) {
		return nil, nil
	}
	var ths []float64
	if v := os.Getenv(envQuotaThresholds); v != "" {
		for _, f := range strings.Split(v, ",") {
			th, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
			if err != nil || th <= 0 {
				return nil, fmt.Errorf("%s=%q: want fractions such as 0.8,1: %w", envQuotaThresholds, v, errdefs.ErrInvalidArgument)
			}
			ths = append(ths, th)
		}
	}
	q, err := chain.NewQuota(chain.QuotaConfig{
		AccountPlans: map[string]chain.Plan{"e2b": plan},
		Thresholds:   ths,
		Logger:       log,
		File:         file,
	})
	if err != nil {
		return nil, err
	}
	if plan.ComputeMinutes > 0 {
		go func() {
			for range time.Tick(time.Minute) {
				q.Check()
			}
		}()
	}
	return q, nil
}
