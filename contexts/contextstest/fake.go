// Package contextstest holds hand-written fakes of the contexts interfaces
// for unit tests of the packages above the provider (manager, tools,
// servers). The fakes keep everything in memory; no process is started.
package contextstest

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/errdefs"
)

// RunFunc handles RunCode for a fake sandbox. It may call out to stream.
type RunFunc func(ctx context.Context, sb *Sandbox, p agent.RunCodeParams, out contexts.OutputFunc) (*agent.RunCodeResult, error)

// Provider is a fake contexts.Provider. Its zero value is not usable; call
// NewProvider. Exported fields may be set before use.
type Provider struct {
	// Run handles RunCode; nil: Echo.
	Run RunFunc
	// CreateDelay is slept in Create (honouring ctx).
	CreateDelay time.Duration
	// CreateErr, when set, is returned by every Create.
	CreateErr error
	// DestroyDelay is slept in Destroy before the sandbox goes (honouring
	// ctx), for a test that must see a destroy still under way.
	DestroyDelay time.Duration
	// OnCreate, when set, is called as each Create begins (before
	// CreateDelay), for a test that must know a create is under way.
	OnCreate func(spec contexts.Spec)
	// ListedEarly lists a sandbox from the start of its Create (before
	// OnCreate), as an OCI runtime lists its bundle; one destroyed before
	// the Create returns fails it with not_found, as a runtime's does.
	ListedEarly bool
	// IDPrefix starts every sandbox id; "": "fake-". Fakes standing for
	// providers on different hosts need different prefixes, or their ids
	// collide.
	IDPrefix string
	// Without lists the optional operations this fake lacks: Capabilities
	// leaves them out and their methods answer contexts.NotSupported.
	// Zero: it has them all.
	Without contexts.Capabilities
	// Shared adds contexts.CapShared: the fake stands for a provider
	// every node reaches (kubernetes), so managers that share one fake
	// (and a store) are nodes of one cluster. Zero: node-bound, as two
	// fakes for two hosts are.
	Shared bool

	mu         sync.Mutex
	boxes      map[string]*box // running sandboxes by id
	attaches   int             // Attach calls
	created    []contexts.Spec // every successful Create, in order
	seq        int
	destroys   int   // running sandboxes removed
	calls      int   // Destroy calls
	failNext   int   // Creates left to fail
	destroyErr error // FailDestroy: what every Destroy answers
}

// box is a fake sandbox's shared state; handles (Attach) point at it.
type box struct {
	id    string
	spec  contexts.Spec
	mu    sync.Mutex
	dead  bool
	files map[string][]byte
	vars  map[string]string // "kernel state" for Echo's assignments
	added map[string]string // SetEnv's variables
	runs  int
	// paused: every call on the sandbox fails until Resume (a real
	// frozen sandbox would hang; the manager must not call it at all).
	paused bool
}

var _ contexts.Provider = (*Provider)(nil)

// all is every optional operation the fake performs.
const all = contexts.CapPause | contexts.CapUsage | contexts.CapSnapshot

// Capabilities implements contexts.Provider: all but Without, and
// CapShared when Shared.
func (p *Provider) Capabilities() contexts.Capabilities {
	c := all &^ p.Without
	if p.Shared {
		c |= contexts.CapShared
	}
	return c
}

// running returns sandbox id when the fake can perform op on it.
func (p *Provider) running(id string, op contexts.Capabilities) (*box, error) {
	if !p.Capabilities().Has(op) {
		return nil, contexts.NotSupported(p.Name(), op)
	}
	p.mu.Lock()
	b := p.boxes[id]
	p.mu.Unlock()
	if b == nil {
		return nil, fmt.Errorf("fake sandbox %s: %w", id, errdefs.ErrNotFound)
	}
	return b, nil
}

// Usage implements contexts.Provider: MemoryBytes is 1 MiB per RunCode
// the sandbox served, PIDs is 1.
func (p *Provider) Usage(ctx context.Context, id string) (contexts.ResourceUsage, error) {
	b, err := p.running(id, contexts.CapUsage)
	if err != nil {
		return contexts.ResourceUsage{}, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.paused {
		return contexts.ResourceUsage{}, fmt.Errorf("fake sandbox %s is paused: %w", id, errdefs.ErrUnavailable)
	}
	return contexts.ResourceUsage{MemoryBytes: int64(b.runs) << 20, PIDs: 1}, nil
}

// Pause implements contexts.Provider: calls on the sandbox fail until
// Resume.
func (p *Provider) Pause(ctx context.Context, id string) error {
	return p.setPaused(id, true)
}

// Resume implements contexts.Provider.
func (p *Provider) Resume(ctx context.Context, id string) error {
	return p.setPaused(id, false)
}

func (p *Provider) setPaused(id string, paused bool) error {
	b, err := p.running(id, contexts.CapPause)
	if err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case paused && b.paused:
		return fmt.Errorf("fake sandbox %s is paused already: %w", id, errdefs.ErrFailedPrecondition)
	case !paused && !b.paused:
		return fmt.Errorf("fake sandbox %s is not paused: %w", id, errdefs.ErrFailedPrecondition)
	}
	b.paused = paused
	return nil
}

// Paused reports whether sandbox id is paused.
func (p *Provider) Paused(id string) bool {
	p.mu.Lock()
	b := p.boxes[id]
	p.mu.Unlock()
	if b == nil {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.paused
}

// NewProvider returns an empty fake provider.
func NewProvider() *Provider { return &Provider{boxes: map[string]*box{}} }

// Name implements contexts.Provider.
func (p *Provider) Name() string { return "fake" }

// FailCreates makes the next n Creates fail.
func (p *Provider) FailCreates(n int) {
	p.mu.Lock()
	p.failNext = n
	p.mu.Unlock()
}

// Create implements contexts.Provider.
func (p *Provider) Create(ctx context.Context, spec contexts.Spec) (sb contexts.Sandbox, err error) {
	var early *box
	if p.ListedEarly {
		p.mu.Lock()
		early = p.newBox(spec)
		p.mu.Unlock()
		defer func() {
			if err != nil {
				p.mu.Lock()
				delete(p.boxes, early.id)
				p.mu.Unlock()
			}
		}()
	}
	if p.OnCreate != nil {
		p.OnCreate(spec)
	}
	if p.CreateDelay > 0 {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(p.CreateDelay):
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.CreateErr != nil {
		return nil, p.CreateErr
	}
	if p.failNext > 0 {
		p.failNext--
		return nil, fmt.Errorf("fake: create failed: %w", errdefs.ErrUnavailable)
	}
	b := early
	if b == nil {
		b = p.newBox(spec)
	} else if p.boxes[b.id] != b {
		return nil, fmt.Errorf("fake sandbox %s destroyed while being created: %w", b.id, errdefs.ErrNotFound)
	}
	p.created = append(p.created, spec)
	return &Sandbox{p: p, b: b}, nil
}

// newBox lists a new sandbox of spec. Precondition: p.mu held.
func (p *Provider) newBox(spec contexts.Spec) *box {
	p.seq++
	prefix := p.IDPrefix
	if prefix == "" {
		prefix = "fake-"
	}
	b := &box{id: fmt.Sprintf("%s%d", prefix, p.seq), spec: spec, files: map[string][]byte{}, vars: map[string]string{}}
	p.boxes[b.id] = b
	return b
}

// Attach implements contexts.Provider.
func (p *Provider) Attach(ctx context.Context, id string) (contexts.Sandbox, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.attaches++
	b := p.boxes[id]
	if b == nil {
		return nil, fmt.Errorf("fake sandbox %s: %w", id, errdefs.ErrNotFound)
	}
	return &Sandbox{p: p, b: b}, nil
}

// List implements contexts.Provider.
func (p *Provider) List(ctx context.Context) ([]string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var ids []string
	for id := range p.boxes {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids, nil
}

// Destroy implements contexts.Provider.
func (p *Provider) Destroy(ctx context.Context, id string) error {
	if p.DestroyDelay > 0 {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(p.DestroyDelay):
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls++
	if p.destroyErr != nil {
		return p.destroyErr
	}
	if b := p.boxes[id]; b != nil {
		b.mu.Lock()
		b.dead = true
		b.mu.Unlock()
		delete(p.boxes, id)
		p.destroys++
	}
	return nil
}

// FailDestroy makes every later Destroy fail with err and leave its
// sandbox running (a runtime that refuses the kill); nil makes them work
// again.
func (p *Provider) FailDestroy(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.destroyErr = err
}

// AttachCalls returns how many times Attach was called, known id or not.
func (p *Provider) AttachCalls() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.attaches
}

// DestroyCalls returns how many times Destroy was called, known id or not.
func (p *Provider) DestroyCalls() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.calls
}

// Kill makes sandbox id die behind everyone's back: it stays listed (a
// crashed container) but every call on it fails. Kill(id) then Destroy
// removes it.
func (p *Provider) Kill(id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if b := p.boxes[id]; b != nil {
		b.mu.Lock()
		b.dead = true
		b.mu.Unlock()
	}
}

// Vanish removes sandbox id as if the host lost it (not listed any more).
func (p *Provider) Vanish(id string) {
	p.Kill(id)
	p.mu.Lock()
	delete(p.boxes, id)
	p.mu.Unlock()
}

// Running returns the ids of the sandboxes not destroyed.
func (p *Provider) Running() []string {
	ids, _ := p.List(context.Background())
	return ids
}

// Created returns how many sandboxes Create returned.
func (p *Provider) Created() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.created)
}

// Specs returns the specs of every successful Create, in order.
func (p *Provider) Specs() []contexts.Spec {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]contexts.Spec(nil), p.created...)
}

// Destroyed returns how many running sandboxes Destroy removed.
func (p *Provider) Destroyed() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.destroys
}
