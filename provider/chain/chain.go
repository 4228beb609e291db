// Package chain tries providers in order: Create falls back to the next
// provider when one is unavailable (no E2B key, E2B unreachable, over its
// limits), logging and counting each fallback. Sandbox ids are prefixed
// with the provider's name ("e2b:abc"), so Attach and Destroy go to the
// provider that made the sandbox, across restarts.
package chain

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/internal/logkey"
	"github.com/sandlot/sandlot/telemetry"
)

// Config configures a chain. All fields are optional.
type Config struct {
	// FallbackOn reports whether a Create error moves on to the next
	// provider. Nil: errdefs.ErrUnavailable and ErrDeadlineExceeded.
	FallbackOn func(error) bool
	// OnFallback, when set, is called once per fallback. The chain counts
	// fallbacks itself (sandlot.provider.fallbacks, by provider and error
	// code); this is for callers that watch them (tests).
	OnFallback func(from, to string, err error)
	// Quota, when set, counts creations and compute time per tenant and
	// provider.
	Quota *Quota
	// TenantLabel is the Spec.Labels key naming the tenant. Empty:
	// "sandlot.tenant" (what contexts.Manager sets).
	TenantLabel string
	// Logger; nil discards.
	Logger *slog.Logger
	// Meter makes the fallbacks counter. Nil: telemetry.Meter(), the
	// global provider's.
	Meter metric.Meter
}

// Chain is a contexts.Provider over other providers. Safe for concurrent
// use.
type Chain struct {
	providers []contexts.Provider
	cfg       Config
	log       *slog.Logger
	fallbacks metric.Int64Counter
}

var _ contexts.Provider = (*Chain)(nil)

// sep separates the provider name from the inner sandbox id.
const sep = ":"

// New returns a chain trying providers in order.
func New(providers []contexts.Provider, cfg Config) *Chain {
	if cfg.FallbackOn == nil {
		cfg.FallbackOn = func(err error) bool {
			return errors.Is(err, errdefs.ErrUnavailable) || errors.Is(err, errdefs.ErrDeadlineExceeded) || errors.Is(err, context.DeadlineExceeded)
		}
	}
	if cfg.TenantLabel == "" {
		cfg.TenantLabel = "sandlot.tenant"
	}
	if cfg.Meter == nil {
		cfg.Meter = telemetry.Meter()
	}
	c := &Chain{providers: providers, cfg: cfg, log: cfg.Logger,
		fallbacks: telemetry.Counter(cfg.Meter, "sandlot.provider.fallbacks", "Provider chain fallbacks, by provider and reason.")}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	return c
}

// Name implements contexts.Provider: the names of the chain's providers.
func (c *Chain) Name() string {
	names := make([]string, len(c.providers))
	for i, p := range c.providers {
		names[i] = p.Name()
	}
	return "chain(" + strings.Join(names, ",") + ")"
}

// Create implements contexts.Provider.
func (c *Chain) Create(ctx context.Context, spec contexts.Spec) (contexts.Sandbox, error) {
	if len(c.providers) == 0 {
		return nil, fmt.Errorf("no provider configured: %w", errdefs.ErrUnavailable)
	}
	if spec.MemoryCheckpoint != "" {
		// A fork with memory is restored where its checkpoint is.
		p, inner, ok := c.route(spec.MemoryCheckpoint)
		if !ok {
			return nil, fmt.Errorf("fork checkpoint %q: %w", spec.MemoryCheckpoint, errdefs.ErrNotFound)
		}
		spec.MemoryCheckpoint = inner
		sb, err := p.Create(ctx, spec)
		if err != nil {
			return nil, err
		}
		if c.cfg.Quota != nil {
			c.cfg.Quota.Started(spec.Labels[c.cfg.TenantLabel], p.Name(), sb.ID())
		}
		return &sandbox{Sandbox: sb, id: p.Name() + sep + sb.ID()}, nil
	}
	var errs []error
	for i, p := range c.providers {
		sb, err := p.Create(ctx, spec)
		if err == nil {
			if c.cfg.Quota != nil {
				c.cfg.Quota.Started(spec.Labels[c.cfg.TenantLabel], p.Name(), sb.ID())
			}
			return &sandbox{Sandbox: sb, id: p.Name() + sep + sb.ID()}, nil
		}
		errs = append(errs, fmt.Errorf("%s: %w", p.Name(), err))
		if ctx.Err() != nil || !c.cfg.FallbackOn(err) || i == len(c.providers)-1 {
			break
		}
		next := c.providers[i+1].Name()
		c.log.Warn("provider unavailable, falling back", logkey.Provider, p.Name(), "next", next, logkey.Err, err)
		c.fallbacks.Add(ctx, 1, metric.WithAttributes(
			attribute.String("provider", p.Name()), attribute.String("reason", string(errdefs.CodeOf(err)))))
		if c.cfg.OnFallback != nil {
			c.cfg.OnFallback(p.Name(), next, err)
		}
	}
	return nil, errors.Join(errs...)
}

// route finds the provider of a chain sandbox id.
func (c *Chain) route(id string) (contexts.Provider, string, bool) {
	name, inner, ok := strings.Cut(id, sep)
	if !ok {
		return nil, id, false
	}
	for _, p := range c.providers {
		if p.Name() == name {
			return p, inner, true
		}
	}
	return nil, id, false
}

// Attach implements contexts.Provider. An id without a known prefix is
// offered to each provider in turn.
func (c *Chain) Attach(ctx context.Context, id string) (contexts.Sandbox, error) {
	if p, inner, ok := c.route(id); ok {
		sb, err := p.Attach(ctx, inner)
		if err != nil {
			return nil, err
		}
		return &sandbox{Sandbox: sb, id: id}, nil
	}
	for _, p := range c.providers {
		sb, err := p.Attach(ctx, id)
		if err == nil {
			return &sandbox{Sandbox: sb, id: p.Name() + sep + sb.ID()}, nil
		}
	}
	return nil, fmt.Errorf("sandbox %s: %w", id, errdefs.ErrNotFound)
}

// List implements contexts.Provider. A provider that is unavailable (say,
// E2B without a key) is skipped.
func (c *Chain) List(ctx context.Context) ([]string, error) {
	var out []string
	for _, p := range c.providers {
		ids, err := p.List(ctx)
		if err != nil {
			if c.cfg.FallbackOn(err) {
				c.log.Info("provider skipped in list", logkey.Provider, p.Name(), logkey.Err, err)
				continue
			}
			return nil, fmt.Errorf("%s: %w", p.Name(), err)
		}
		if c.cfg.Quota != nil {
			c.cfg.Quota.Live(p.Name(), ids)
		}
		for _, id := range ids {
			out = append(out, p.Name()+sep+id)
		}
	}
	return out, nil
}

// Destroy implements contexts.Provider.
func (c *Chain) Destroy(ctx context.Context, id string) error {
	if p, inner, ok := c.route(id); ok {
		err := p.Destroy(ctx, inner)
		if err == nil && c.cfg.Quota != nil {
			c.cfg.Quota.Stopped(p.Name(), inner)
		}
		return err
	}
	var errs []error
	for _, p := range c.providers {
		if err := p.Destroy(ctx, id); err != nil && !c.cfg.FallbackOn(err) {
			errs = append(errs, fmt.Errorf("%s: %w", p.Name(), err))
		}
	}
	return errors.Join(errs...)
}

// sandbox carries the chain id of a provider's sandbox.
type sandbox struct {
	contexts.Sandbox
	id string
}

func (s *sandbox) ID() string { return s.id }

// Unwrap returns the provider's own sandbox.
func (s *sandbox) Unwrap() contexts.Sandbox { return s.Sandbox }

// now is replaced in tests.
var now = time.Now
