package cli

import (
	"cmp"
	"context"
	"crypto/rand"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	flag "github.com/spf13/pflag"

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
	if cfg.e2bPython != "" && cfg.e2bPython != "ipython" && cfg.e2bPython != "plain" {
		return nil, nil, fmt.Errorf("--e2b-python %q: want ipython or plain: %w", cfg.e2bPython, errdefs.ErrInvalidArgument)
	}
	ecfg := e2bcompat.Config{
		PlainPython:   cfg.e2bPython == "plain",
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
		Templates:     e2bTemplates(cfg.e2bInterpTemplate),
	}
	if cat != nil { // a nil *Catalog in the interface would not be nil
		ecfg.Catalog = cat
	}
	if cfg.e2bInternet && nw == nil {
		log.Warn("--e2b-internet has no effect without --network: E2B creates get no network")
	}
	if nw != nil && cfg.e2bInternet {
		// E2B's default only for tenants the operator's caps let have
		// mode open; the others keep sandlot's (no network).
		ecfg.DefaultOpen = func(tenantID string) bool {
			return nw.st.AllowsOpen(tenantID)
		}
	}
	h := e2bcompat.New(ecfg)
	if nw != nil {
		nw.verify = h.VerifyTrafficToken
		nw.wake = h.Wake
	}
	return h, h.Match, nil
}

// e2bTemplates maps E2B's template names for --e2b-code-interpreter-template:
// E2B's defaults, with code-interpreter-v1 (what @e2b/code-interpreter
// creates when a call names no template) on interp when one is given.
func e2bTemplates(interp string) map[string]string {
	m := maps.Clone(e2bcompat.DefaultTemplates)
	if interp != "" && interp != templates.Default {
		m["code-interpreter-v1"] = interp
	}
	return m
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

// e2bFlags are the settings of the "e2b" provider and of its account's
// plan limits. Like every daemon knob each is a flag, $SANDLOT_<NAME> and a
// config key (config.go); the account itself is configured as the E2B
// SDKs are, by E2B_API_KEY, E2B_API_URL, E2B_SANDBOX_URL and E2B_DOMAIN,
// so an API key never appears on a command line.
type e2bFlags struct {
	template       string
	deployment     string
	connectTimeout time.Duration
	sizes          string
	planCreations  int64
	planMinutes    float64
	thresholds     string
}

func (f *e2bFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.template, "e2b-template", "", "E2B template of the e2b provider's sandboxes when a call names none (default: E2B's base)")
	fs.StringVar(&f.deployment, "e2b-deployment", "", "label of the e2b provider's sandboxes: it lists and sweeps only its own (default: the node id)")
	fs.DurationVar(&f.connectTimeout, "e2b-connect-timeout", 0, "time the e2b provider waits for a new sandbox's envd (0: the provider default, 30s)")
	fs.StringVar(&f.sizes, "e2b-sizes", "", "E2B templates by resources, TEMPLATE:CPUS:MEMORY_MB,...: a sandbox asking for limits gets the smallest that fits")
	fs.Int64Var(&f.planCreations, "e2b-plan-creations", 0, "sandbox creations the E2B account's plan allows (0: not tracked); warnings at the --quota-thresholds")
	fs.Float64Var(&f.planMinutes, "e2b-plan-compute-minutes", 0, "sandbox wall-clock minutes the E2B account's plan allows (0: not tracked)")
	fs.StringVar(&f.thresholds, "quota-thresholds", "", "used shares of a plan limit that log a warning, comma-separated fractions (default 0.8,1)")
}

// e2bProvider is the "e2b" entry of --providers (see e2bFlags). Without a
// key it still builds: Create fails with "E2B API key not configured" and
// a chain falls back. A value that does not parse is an error.
func e2bProvider(log *slog.Logger, node string, f e2bFlags) (contexts.Provider, error) {
	cfg := e2b.Config{
		APIKey:         os.Getenv("E2B_API_KEY"),
		APIURL:         os.Getenv("E2B_API_URL"),
		SandboxURL:     os.Getenv("E2B_SANDBOX_URL"),
		Domain:         os.Getenv("E2B_DOMAIN"),
		Template:       f.template,
		Deployment:     cmp.Or(f.deployment, node),
		ConnectTimeout: f.connectTimeout,
		Logger:         log,
	}
	if f.connectTimeout < 0 {
		return nil, fmt.Errorf("--e2b-connect-timeout %s: want a positive duration such as 10s: %w", f.connectTimeout, errdefs.ErrInvalidArgument)
	}
	sizes, err := e2b.ParseSizes(f.sizes)
	if err != nil {
		return nil, fmt.Errorf("--e2b-sizes: %w", err)
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

// e2bQuotaFile, in the data dir, keeps the e2b quota's counts across
// restarts.
const e2bQuotaFile = "e2b-quota.json"

// e2bQuota builds the quota tracker of the e2b provider's account from the
// environment: nil when no plan limit is set. Its counts live in file.
// Crossing a threshold logs a warning and records the used share (the
// sandlot.quota.usage gauge); compute minutes of running sandboxes are
// re-checked every minute for the life of the process.
func e2bQuota(log *slog.Logger, file string, f e2bFlags) (*chain.Quota, error) {
	if f.planCreations < 0 || f.planMinutes < 0 {
		return nil, fmt.Errorf("--e2b-plan-creations and --e2b-plan-compute-minutes must not be negative: %w", errdefs.ErrInvalidArgument)
	}
	plan := chain.Plan{Creations: f.planCreations, ComputeMinutes: f.planMinutes}
	if plan == (chain.Plan{}) {
		return nil, nil
	}
	var ths []float64
	if v := f.thresholds; v != "" {
		for _, s := range strings.Split(v, ",") {
			th, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
			if err != nil || th <= 0 {
				return nil, fmt.Errorf("--quota-thresholds %q: want fractions such as 0.8,1: %w", v, errdefs.ErrInvalidArgument)
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
