package daemon

import (
	"context"
	"crypto/rand"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"

	"github.com/sandlot/sandlot/api/e2bcompat"
	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/templates"
	"github.com/sandlot/sandlot/tenant"
	"github.com/sandlot/sandlot/volumes"
)

// e2bSecretFile holds the key that signs E2B envdAccessTokens, so tokens
// handed out survive a restart.
const e2bSecretFile = "e2b-secret"

// e2bWire builds the E2B surface (api/e2bcompat) over the manager, which
// the front door matches before its other routes. admit is the per-tenant
// in-flight limit of every surface. podPorts: the front door serves the
// ports route to sandbox pods (the kubernetes provider), so creates answer
// the ports domain as with sandbox networks.
func e2bWire(cfg Config, m *contexts.Manager, cat *templates.Catalog, builds *e2bcompat.Builds, auth *tenant.Authenticator, admit func(context.Context, string) (func(), error), nw *netWire, podPorts bool, vols *volumes.Service, log *slog.Logger) (*e2bcompat.Handler, error) {
	secret, err := e2bSecret(cfg.DataDir)
	if err != nil {
		return nil, err
	}
	domain := ""
	if cfg.servesPorts(podPorts) || nw != nil {
		domain = cfg.Network.Domain
	}
	if cfg.E2B.Python != "" && cfg.E2B.Python != "ipython" && cfg.E2B.Python != "plain" {
		return nil, fmt.Errorf("--e2b-python %q: want ipython or plain: %w", cfg.E2B.Python, errdefs.ErrInvalidArgument)
	}
	ecfg := e2bcompat.Config{
		PlainPython:   cfg.E2B.Python == "plain",
		Domain:        domain,
		Manager:       m,
		Secret:        secret,
		Logger:        log,
		Tenants:       auth,
		TokenTTL:      cfg.E2B.TokenTTL,
		MaxTimeout:    cfg.E2B.MaxTimeout,
		PausedTimeout: cfg.E2B.PausedTimeout,
		Admit:         admit,
		Builds:        builds,
		Templates:     e2bTemplates(cfg.E2B.InterpTemplate),
	}
	if cat != nil { // a nil *Catalog in the interface would not be nil
		ecfg.Catalog = cat
	}
	if vols != nil {
		ecfg.Volumes = vols
	}
	if cfg.E2B.Internet && nw == nil {
		log.Warn("--e2b-internet has no effect without --network: E2B creates get no network")
	}
	if nw != nil && cfg.E2B.Internet {
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
	return h, nil
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
