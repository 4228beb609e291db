package daemon

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/internal/logkey"
	"github.com/sandlot/sandlot/provider/chain"
	"github.com/sandlot/sandlot/provider/e2b"
	"github.com/sandlot/sandlot/provider/local"
	"github.com/sandlot/sandlot/volumes"
)

// localConfig is the local provider's configuration, without its images
// and networks.
func (c Config) localConfig(log *slog.Logger) local.Config {
	return local.Config{
		Runtime:      runtimeName(c.Runtime),
		StateDir:     c.StateDir,
		Limits:       c.Limits,
		HostTemplate: c.Images.HostTemplate,
		NoMemory:     !c.SuspendMemory,
		ReadyTimeout: c.CreateTimeout,
		MaxCreating:  c.MaxCreating,
		Logger:       log,
	}
}

// newProvider builds the providers Config.Providers names, in fallback
// order (a chain when there are several). When none can be built (no
// runtime, no agent binary), sandboxes are unavailable: the daemon still
// starts, and /readyz and every tool call say why. Settings that do not
// parse, or networks that do not start, are no provider and an error: the
// daemon does not start.
func newProvider(ctx context.Context, cfg Config, log *slog.Logger, nw *netWire, tw *templateWire, ke *kubeEgress, vols *volumes.Service) (contexts.Provider, error) {
	var ps []contexts.Provider
	var errs []error
	for _, name := range cfg.providers() {
		switch name {
		case "local":
			lc := cfg.localConfig(log)
			if vols != nil { // a nil *Service in the interface would not be nil
				lc.Volumes = vols
			}
			if cfg.Images.Default != "" {
				s, builtins, err := openImages(ctx, cfg, log)
				if err != nil {
					errs = append(errs, fmt.Errorf("provider local: %w", err))
					continue
				}
				lc.Images, lc.Missing = s, builtins.missing
				if tw != nil {
					lc.Templates = tw.attach(s, builtins)
				}
			}
			if nw != nil {
				lc.Networks = nw.st
			}
			p, err := local.New(lc)
			if err != nil {
				errs = append(errs, fmt.Errorf("provider local: %w", err))
				continue
			}
			if nw != nil {
				// The networks of sandboxes still running are taken over;
				// the others are removed.
				ids, err := p.List(ctx)
				if err == nil {
					err = nw.start(ctx, ids)
				}
				if err != nil {
					nw.startErr = err
					return nil, err
				}
			}
			if tw != nil && lc.Images != nil {
				tw.live = p.LiveImages
			}
			log.Info("provider ready", slog.String(logkey.Provider, name), slog.String(logkey.Runtime, p.Runtime().Name()))
			ps = append(ps, p)
		case "e2b":
			p, err := e2bProvider(log, cfg.Node, cfg.E2BProvider)
			if err != nil {
				return nil, err
			}
			ps = append(ps, p)
		case "kubernetes":
			p, err := kubernetesProvider(cfg, log, ke)
			if err != nil {
				return nil, fmt.Errorf("provider kubernetes: %w", err)
			}
			if ke != nil {
				ke.prov = p
				if k := cfg.Kubernetes; k.EgressProxy != "" && len(k.EgressKey) > 0 {
					if err := ke.serve(k.egressListen(), k.EgressKey, log); err != nil {
						return nil, err
					}
				}
			}
			go prepareKubernetes(p, log)
			log.Info("provider ready", slog.String(logkey.Provider, name))
			ps = append(ps, p)
		default:
			errs = append(errs, fmt.Errorf("provider %q is not built into this binary (local, e2b, kubernetes): %w", name, errdefs.ErrInvalidArgument))
		}
	}
	if len(ps) > 0 {
		for _, err := range errs {
			log.Warn("provider skipped", slog.String(logkey.Err, err.Error()))
		}
		var quota *chain.Quota
		if cfg.uses("e2b") {
			q, err := e2bQuota(log, filepath.Join(cfg.DataDir, e2bQuotaFile), cfg.E2BProvider)
			if err != nil {
				log.Warn("e2b quota tracking off", slog.String(logkey.Err, err.Error()))
			}
			quota = q
		}
		return providerChain(ps, log, quota), nil
	}
	err := fmt.Errorf("no usable sandbox provider: %v: %w", errors.Join(errs...), errdefs.ErrUnavailable)
	err = errdefs.Public(err, "This server cannot start sandboxes (no usable sandbox provider: "+reasons(errs)+
		"); its operator must install an OCI runtime (crun or runc) or configure E2B, then restart it (GET /readyz says what is missing).")
	log.Error("no sandbox provider; tool calls answer 503", slog.String(logkey.Err, err.Error()))
	return noProvider{err}, err
}

// runtimeName maps Config.Runtime to local.Config.Runtime ("" is auto).
func runtimeName(s string) string {
	if s == "auto" {
		return ""
	}
	return s
}

// noProvider fails every sandbox operation with its error.
type noProvider struct{ err error }

func (p noProvider) Name() string { return "none" }
func (p noProvider) Create(context.Context, contexts.Spec) (contexts.Sandbox, error) {
	return nil, p.err
}
func (p noProvider) Attach(context.Context, string) (contexts.Sandbox, error) { return nil, p.err }
func (p noProvider) List(context.Context) ([]string, error)                   { return nil, p.err }
func (p noProvider) Destroy(context.Context, string) error                    { return nil }
func (p noProvider) Capabilities() contexts.Capabilities                      { return 0 }
func (p noProvider) Pause(context.Context, string) error                      { return p.err }
func (p noProvider) Resume(context.Context, string) error                     { return p.err }
func (p noProvider) Usage(context.Context, string) (contexts.ResourceUsage, error) {
	return contexts.ResourceUsage{}, p.err
}

// e2bProvider is the "e2b" entry of Config.Providers (see E2BProvider). Without a
// key it still builds: Create fails with "E2B API key not configured" and
// a chain falls back. A value that does not parse is an error.
func e2bProvider(log *slog.Logger, node string, f E2BProvider) (contexts.Provider, error) {
	cfg := e2b.Config{
		APIKey:         f.APIKey,
		APIURL:         f.APIURL,
		SandboxURL:     f.SandboxURL,
		Domain:         f.Domain,
		Template:       f.Template,
		Deployment:     cmp.Or(f.Deployment, node),
		ConnectTimeout: f.ConnectTimeout,
		Logger:         log,
	}
	if f.ConnectTimeout < 0 {
		return nil, fmt.Errorf("--e2b-connect-timeout %s: want a positive duration such as 10s: %w", f.ConnectTimeout, errdefs.ErrInvalidArgument)
	}
	sizes, err := e2b.ParseSizes(f.Sizes)
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

// e2bQuota builds the quota tracker of the e2b provider's account from its
// plan: nil when no plan limit is set. Its counts live in file.
// Crossing a threshold logs a warning and records the used share (the
// sandlot.quota.usage gauge); compute minutes of running sandboxes are
// re-checked every minute for the life of the process.
func e2bQuota(log *slog.Logger, file string, f E2BProvider) (*chain.Quota, error) {
	if f.PlanCreations < 0 || f.PlanComputeMinutes < 0 {
		return nil, fmt.Errorf("--e2b-plan-creations and --e2b-plan-compute-minutes must not be negative: %w", errdefs.ErrInvalidArgument)
	}
	plan := chain.Plan{Creations: f.PlanCreations, ComputeMinutes: f.PlanComputeMinutes}
	if plan == (chain.Plan{}) {
		return nil, nil
	}
	var ths []float64
	if v := f.QuotaThresholds; v != "" {
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

// reasons joins why each provider was skipped into one line.
func reasons(errs []error) string {
	parts := make([]string, 0, len(errs))
	for _, err := range errs {
		parts = append(parts, errdefs.Message(err.Error()))
	}
	if len(parts) == 0 {
		return "none configured"
	}
	return strings.Join(parts, "; ")
}
