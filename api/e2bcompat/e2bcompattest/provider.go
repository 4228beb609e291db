package e2bcompattest

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"sync"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/errdefs"
)

// Provider is a contexts.Provider of fake Sandboxes, for running the E2B
// surface on the real contexts.Manager. It pauses (a flag: the manager and
// the edge refuse a paused sandbox's calls) and samples usage (what
// SetUsage set for the sandbox's context).
type Provider struct {
	mu     sync.Mutex
	seq    int
	boxes  map[string]*Sandbox // running sandboxes by id
	ctxOf  map[string]string   // the context id of each sandbox (Spec.Labels)
	paused map[string]bool
	usage  map[string]contexts.ResourceUsage // by context id
	specs  []contexts.Spec                   // every Create, in order
}

var _ contexts.Provider = (*Provider)(nil)

// NewProvider returns a provider with no sandbox.
func NewProvider() *Provider {
	return &Provider{boxes: map[string]*Sandbox{}, ctxOf: map[string]string{}, paused: map[string]bool{},
		usage: map[string]contexts.ResourceUsage{}}
}

// Name implements contexts.Provider.
func (p *Provider) Name() string { return "fake" }

// Capabilities implements contexts.Provider.
func (p *Provider) Capabilities() contexts.Capabilities {
	return contexts.CapPause | contexts.CapUsage | contexts.CapSnapshot
}

// Create implements contexts.Provider: a fake sandbox with spec's
// environment.
func (p *Provider) Create(ctx context.Context, spec contexts.Spec) (contexts.Sandbox, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.seq++
	sb := NewSandbox(fmt.Sprintf("e2bfake-%d", p.seq), spec.Env)
	p.boxes[sb.id] = sb
	p.ctxOf[sb.id] = spec.Labels[contexts.LabelContext]
	p.specs = append(p.specs, spec)
	return sb, nil
}

// Attach implements contexts.Provider.
func (p *Provider) Attach(ctx context.Context, id string) (contexts.Sandbox, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if sb := p.boxes[id]; sb != nil {
		return sb, nil
	}
	return nil, fmt.Errorf("fake sandbox %s: %w", id, errdefs.ErrNotFound)
}

// List implements contexts.Provider.
func (p *Provider) List(ctx context.Context) ([]string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	ids := make([]string, 0, len(p.boxes))
	for id := range p.boxes {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids, nil
}

// Destroy implements contexts.Provider: the sandbox's processes are
// killed and its calls fail from now on.
func (p *Provider) Destroy(ctx context.Context, id string) error {
	p.mu.Lock()
	sb := p.boxes[id]
	delete(p.boxes, id)
	delete(p.paused, id)
	p.mu.Unlock()
	if sb != nil {
		sb.destroy()
	}
	return nil
}

// Pause implements contexts.Provider.
func (p *Provider) Pause(ctx context.Context, id string) error { return p.setPaused(id, true) }

// Resume implements contexts.Provider.
func (p *Provider) Resume(ctx context.Context, id string) error { return p.setPaused(id, false) }

func (p *Provider) setPaused(id string, paused bool) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.boxes[id] == nil {
		return fmt.Errorf("fake sandbox %s: %w", id, errdefs.ErrNotFound)
	}
	if p.paused[id] == paused {
		return fmt.Errorf("fake sandbox %s: paused is %v already: %w", id, paused, errdefs.ErrFailedPrecondition)
	}
	p.paused[id] = paused
	return nil
}

// Usage implements contexts.Provider: what SetUsage set for the
// sandbox's context (zero without).
func (p *Provider) Usage(ctx context.Context, id string) (contexts.ResourceUsage, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.boxes[id] == nil {
		return contexts.ResourceUsage{}, fmt.Errorf("fake sandbox %s: %w", id, errdefs.ErrNotFound)
	}
	return p.usage[p.ctxOf[id]], nil
}

// SetUsage sets what Usage reports for the sandbox of context contextID
// (an E2B sandbox id).
func (p *Provider) SetUsage(contextID string, u contexts.ResourceUsage) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.usage[contextID] = u
}

// Specs returns the spec of every Create, in order.
func (p *Provider) Specs() []contexts.Spec {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.specs)
}

// Created returns how many sandboxes Create made.
func (p *Provider) Created() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.specs)
}
