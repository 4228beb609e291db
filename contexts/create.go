package contexts

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/internal/logkey"
	"github.com/sandlot/sandlot/network/policy"
	"github.com/sandlot/sandlot/volumes"
)

// CreateOptions shape a context when GetOrCreate has to create it; they are
// ignored when the identity already has an active context.
type CreateOptions struct {
	Template string        // "" = Config.DefaultTemplate
	TTL      time.Duration // 0 = Config.TTL
	// Metadata is the caller's labels, stored on the record when created.
	// A key under ReservedPrefix is invalid_argument (CheckMetadata),
	// whether or not the call creates.
	Metadata map[string]string
	// Env is the sandbox environment. A context with Env is never served
	// from the warm pool (pooled sandboxes started without it).
	Env map[string]string
	// ID is the new context's id (a UUID); "" = a fresh one. The E2B
	// surface makes a sandbox's id its conversation's.
	ID string
	// ContextID, when set, confines the call to that context: it is never
	// created or replaced, and when the identity's live context is another
	// one or none (ended, expired, its sandbox lost) the call fails with
	// not_found. The E2B surface addresses sandboxes this way.
	ContextID string
	// MaxExecutions overrides Config.MaxExecutionsPerContext for this
	// context: 0 = the config's, negative = never rotate (E2B sandboxes,
	// whose lifecycle is timeout and kill). Kept on the record
	// (Record.MaxExecutions) so it survives a restart.
	MaxExecutions int64
	// FixedExpiry makes the context's expiry absolute: calls do not extend
	// it, only SetTTL moves it (E2B's timeout, which setTimeout sets and
	// nothing else extends). Kept on the record (Record.FixedExpiry).
	FixedExpiry bool
	// AutoPause, when positive, pauses the context at its expiry instead
	// of ending it, for that long (Record.AutoPause). A provider that
	// cannot pause refuses it up front (NotSupported).
	AutoPause time.Duration
	// AutoPauseToDisk makes AutoPause suspend the context to disk instead
	// (Record.AutoPauseToDisk); a provider that cannot capture, or a
	// manager that keeps no images, refuses it up front.
	AutoPauseToDisk bool
	// AutoResume, when positive, is kept on the record (Record.AutoResume)
	// for the edge that resumes a paused context on traffic.
	AutoResume time.Duration
	// TemplateName is the template as the caller named it, kept on the
	// record (Record.TemplateName) for edges whose names differ from
	// sandlot's.
	TemplateName string
	// Network asks for a network of the sandbox's own under this policy
	// (Spec.Network); nil: loopback only. A context with a network is
	// never served from the warm pool. Unlike the other options it also
	// applies to an existing context: a differing policy replaces the
	// context's (UpdateNetwork), which fails when the context was
	// created without a network.
	Network *policy.Policy
	// Prestart names kernels a new sandbox starts at boot (Spec.Prestart),
	// while the host still connects to it. Execute names its call's
	// kernel: the call is about to start it anyway, so its start overlaps
	// the handshake instead of following it, and costs no sandbox a
	// kernel it would not have started. A sandbox from the warm pool has
	// the pool's kernels (WarmKernels).
	Prestart []string
	// WarmKernels, when not nil, chooses the warm pool a create takes
	// from: the template's pool whose sandboxes started exactly these
	// kernels at boot, made when a create first asks for it (or at Start,
	// Config.PoolWarmKernels). []string{}: none (E2B's base sandbox runs
	// commands: a pool that starts python would spend half of each
	// refill's CPU on a kernel it never uses). nil: the template's own
	// pool (PoolSpec.Prestart, else Config.PoolPrestart). A kernel the
	// sandbox did not start at boot starts on its first use, as on any
	// sandbox.
	WarmKernels []string
	// Language is the language of the call that may create the context
	// (Execute sets it): a template that does not offer it is refused
	// before a record or a sandbox exists (invalid_argument), so a call
	// refused for its language leaves nothing running. "": no check.
	Language string
	// Volumes are mounted into a new context's sandbox (VolumeMount); a
	// context with volumes is never served from the warm pool. They do
	// not apply to an existing context.
	Volumes []VolumeMount
	// MemoryCheckpoint is a fork checkpoint (Manager.ForkSnapshot's
	// SnapshotInfo.MemoryCheckpoint) a new context's sandbox is restored from
	// (Spec.MemoryCheckpoint), never from the warm pool; where that restore fails
	// the sandbox starts fresh from the template, files only (forkmem.go).
	MemoryCheckpoint string
}

// check validates the options a caller gives, before anything is looked
// up or created.
func (o *CreateOptions) check(provider Provider) error {
	if err := CheckMetadata(o.Metadata); err != nil {
		return err
	}
	if o.AutoPause < 0 || o.AutoResume < 0 {
		return fmt.Errorf("autoPause and autoResume must not be negative: %w", errdefs.ErrInvalidArgument)
	}
	switch {
	case o.AutoPauseToDisk && o.AutoPause <= 0:
		return fmt.Errorf("autoPauseToDisk needs autoPause: %w", errdefs.ErrInvalidArgument)
	case o.AutoPauseToDisk && !provider.Capabilities().Has(CapSnapshot):
		return fmt.Errorf("suspending to disk at expiry: %w", NotSupported(provider.Name(), CapSnapshot))
	case o.AutoPause > 0 && !o.AutoPauseToDisk && !provider.Capabilities().Has(CapPause):
		return fmt.Errorf("pausing at expiry: %w", NotSupported(provider.Name(), CapPause))
	}
	return volumes.CheckMounts(o.Volumes)
}

// templateNotFound is the error for a template the manager does not know:
// "template NAME not found", category not_found.
type templateNotFound string

func (templateNotFound) Unwrap() error { return errdefs.ErrNotFound }

// resolveTemplate is what a create stores as its template: with a Catalog
// the record's id (built, pulled and imported templates are all records),
// else the name, which must be one of Config.Templates.
func (m *Manager) resolveTemplate(ctx context.Context, tenantID, name string) (string, error) {
	if m.cfg.Catalog == nil {
		if !m.hasTemplate(name) {
			return "", templateNotFound(name)
		}
		return name, nil
	}
	info, err := m.cfg.Catalog.ResolveTemplate(ctx, tenantID, name)
	if errors.Is(err, errdefs.ErrNotFound) {
		return "", templateNotFound(name) // one answer for unknown and another tenant's
	}
	if err != nil {
		return "", err
	}
	return info.ID, nil
}

// hasTemplate reports whether name is one of Config.Templates (by default
// DefaultTemplate and the keys of PoolSizes).
func (m *Manager) hasTemplate(name string) bool {
	if len(m.cfg.Templates) == 0 {
		_, pooled := m.cfg.PoolSizes[name]
		return pooled || name == m.cfg.DefaultTemplate
	}
	return slices.Contains(m.cfg.Templates, name)
}

// limitErr checks the tenant and conversation limits for a new context of
// id. Precondition: the tenant lock is held.
func (m *Manager) limitErr(ctx context.Context, id Identity) error {
	count := func(conv string) int {
		n, err := m.store.CountActive(tctx(ctx, id.TenantID), id.TenantID, id.UserID, conv)
		if err != nil {
			m.log.Warn("store: count active contexts; using the in-memory count", logkey.Tenant, id.TenantID, logkey.Err, err)
			n = 0
			m.mu.Lock()
			for k := range m.byIdent {
				if k.TenantID == id.TenantID && (conv == "" || k.UserID == id.UserID && k.ConversationID == conv) {
					n++
				}
			}
			m.mu.Unlock()
		}
		return n
	}
	if lim := m.cfg.MaxPerTenant; lim > 0 {
		if n := count(""); n >= lim {
			return &Failure{Kind: FailureLimit, Err: fmt.Errorf("tenant %s has %d active contexts (limit %d); terminate one or wait for expiry: %w",
				id.TenantID, n, lim, errdefs.ErrResourceExhausted)}
		}
	}
	// A conversation's limit counts the contexts of one user's
	// conversation: two users who name the same conversation have two.
	if lim := m.cfg.MaxPerConversation; lim > 0 {
		if n := count(id.ConversationID); n >= lim {
			return &Failure{Kind: FailureLimit, Err: fmt.Errorf("conversation %s of tenant %s has %d active contexts (limit %d); terminate one or wait for expiry: %w",
				id.ConversationID, id.TenantID, n, lim, errdefs.ErrResourceExhausted)}
		}
	}
	return nil
}

// create makes a new context for id: the record first (the store's
// uniqueness is the cross-process guard), then the sandbox. It returns
// errLostRace when another process holds the identity. Precondition: the
// identity lock is held.
func (m *Manager) create(ctx context.Context, id Identity, opts CreateOptions) (*entry, error) {
	template := opts.Template
	if template == "" {
		template = m.cfg.DefaultTemplate
	}
	template, err := m.resolveTemplate(ctx, id.TenantID, template)
	if err != nil {
		return nil, err
	}
	if opts.Language != "" {
		if err := m.checkLanguage(ctx, template, opts.Language); err != nil {
			return nil, err
		}
	}
	ttl := opts.TTL
	if ttl <= 0 {
		ttl = m.cfg.TTL
	}
	now := m.now()
	recID := opts.ID
	if recID == "" {
		recID = uuid.NewString()
	} else if _, err := uuid.Parse(recID); err != nil {
		return nil, fmt.Errorf("context id %q is not a UUID: %w", recID, errdefs.ErrInvalidArgument)
	}
	if err := m.checkNetwork(id.TenantID, opts.Network); err != nil {
		return nil, err
	}
	rec := &Record{
		ID:         recID,
		Identity:   id,
		State:      StateCreating,
		Provider:   m.provider.Name(),
		Template:   template,
		CreatedAt:  now,
		LastUsedAt: now,
		ExpiresAt:  now.Add(ttl),
		Metadata:   maps.Clone(opts.Metadata),
		Node:       m.cfg.Node,
		Env:        maps.Clone(opts.Env),
		Lifecycle: Lifecycle{
			AutoPause:       opts.AutoPause,
			AutoPauseToDisk: opts.AutoPauseToDisk,
			AutoResume:      opts.AutoResume,
			FixedExpiry:     opts.FixedExpiry,
			MaxExecutions:   opts.MaxExecutions,
			Network:         clonePolicy(opts.Network),
			TemplateName:    opts.TemplateName,
		},
	}
	sctx := tctx(ctx, id.TenantID)

	unlockTenant, err := m.tenantLocks.lock(ctx, id.TenantID)
	if err != nil {
		return nil, err
	}
	if err := m.limitErr(ctx, id); err != nil {
		unlockTenant()
		return nil, err
	}
	unsaved := false
	if err := m.store.Create(sctx, rec); err != nil {
		switch {
		case errors.Is(err, errdefs.ErrAlreadyExists):
			unlockTenant()
			return nil, errLostRace
		case errors.Is(err, errdefs.ErrInvalidArgument), errors.Is(err, errdefs.ErrPermissionDenied):
			unlockTenant()
			return nil, err
		}
		m.log.Warn("store: create context; carrying on in memory", logkey.Context, rec.ID, logkey.Err, err)
		unsaved = true
	}
	e := &entry{exec: make(sem, 1), rec: rec, ttl: ttl, unsaved: unsaved}
	m.mu.Lock()
	m.creating[rec.ID] = true
	m.byID[rec.ID] = e
	m.byIdent[id] = e
	m.mu.Unlock()
	unlockTenant()
	m.changed(id.TenantID, rec.ID)

	defer m.creates.begin(m.now())() // until e owns the sandbox, or it is destroyed
	sb, err := m.sandbox(ctx, rec, opts)
	m.mu.Lock()
	delete(m.creating, rec.ID)
	m.mu.Unlock()
	if err != nil {
		m.end(context.WithoutCancel(ctx), e, ReasonError, "create sandbox: "+err.Error())
		gone := ctx.Err() != nil // the caller went away: no failure of the provider's
		if !errdefs.Categorized(err) && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
			err = fmt.Errorf("%w: %w", errdefs.ErrUnavailable, err)
		}
		gerr := guardError(ctx, m.cfg.Guard, id.TenantID, err)
		err = fmt.Errorf("create sandbox for context %s: %w", rec.ID, gerr)
		if _, explained := errdefs.Explanation(gerr); !explained && errdefs.IsClientFault(gerr) {
			// The caller reads the cause, not the id of a context it
			// never named (errdefs.PublicMessage).
			err = errdefs.Public(err, errdefs.PublicMessage(gerr))
		}
		if !gone {
			err = createFailed{err}
		}
		return nil, err
	}

	m.mu.Lock()
	e.sb = sb
	e.rec.State = StateReady
	e.rec.SandboxID = sb.ID()
	saved := cloneRecord(e.rec)
	ended := e.ended
	m.mu.Unlock()
	if ended { // terminated while creating (Close, Terminate)
		m.destroy(context.WithoutCancel(ctx), sb, sb.ID())
		return nil, fmt.Errorf("context %s was terminated while being created: %w", rec.ID, errdefs.ErrUnavailable)
	}
	if !unsaved {
		if err := m.store.Update(sctx, saved); err != nil {
			if errors.Is(err, errdefs.ErrFailedPrecondition) || errors.Is(err, errdefs.ErrNotFound) {
				m.drop(e)
				m.destroy(context.WithoutCancel(ctx), sb, sb.ID())
				return nil, fmt.Errorf("context %s was ended while being created: %w", rec.ID, errdefs.ErrUnavailable)
			}
			m.log.Warn("store: mark context ready", logkey.Context, rec.ID, logkey.Err, err)
		}
	}
	m.changed(id.TenantID, rec.ID)
	m.mu.Lock()
	m.inheritLost(id, e)
	m.mu.Unlock()
	m.countCreated(id.TenantID, template, rec.Provider)
	m.log.Debug("context created", sessionAttrs(id, logkey.Context, rec.ID, logkey.Sandbox, sb.ID(), logkey.Template, template)...)
	return e, nil
}

// sandbox returns a sandbox for rec: a warm one from the pool when it can,
// else a new one, on which the template's PoolSpec.Warm runs when the
// pool could have served the create, so that the create returns what a
// warm sandbox would have been (a desktop started and drawn) either way.
func (m *Manager) sandbox(ctx context.Context, rec *Record, opts CreateOptions) (Sandbox, error) {
	serves := m.poolServes(rec.Template, opts)
	key := m.poolChoose(rec.Template, opts.WarmKernels)
	if serves {
		if sb := m.poolTake(ctx, rec.Identity, key); sb != nil { // told its identity
			err := m.claimNetwork(ctx, rec, sb, opts.Network)
			if err == nil {
				return sb, nil
			}
			m.log.Warn("warm sandbox: claim it; creating anew", logkey.Sandbox, sb.ID(), logkey.Err, err)
			m.destroyLater(sb)
		}
	}
	spec := Spec{
		Template:         rec.Template,
		Limits:           m.cfg.Limits,
		Env:              createEnv(rec.Identity, opts.Env),
		Labels:           map[string]string{LabelTenant: rec.TenantID, LabelContext: rec.ID},
		TTL:              rec.ExpiresAt.Sub(rec.CreatedAt),
		Network:          opts.Network,
		Prestart:         slices.Clone(opts.Prestart),
		Volumes:          slices.Clone(opts.Volumes),
		MemoryCheckpoint: opts.MemoryCheckpoint,
	}
	sb, err := m.createSandbox(ctx, rec, spec)
	if err != nil {
		return nil, err
	}
	m.poolEnsure(key)
	if warm := m.cfg.PoolSpecs[rec.Template].Warm; serves && warm != nil {
		if err := warm(ctx, sb); err != nil {
			m.destroy(context.WithoutCancel(ctx), sb, sb.ID())
			return nil, err
		}
	}
	return sb, nil
}

// claimNetwork gives a warm sandbox's network (set up without an owner)
// to rec's tenant and context.
func (m *Manager) claimNetwork(ctx context.Context, rec *Record, sb Sandbox, p *policy.Policy) error {
	if p == nil {
		return nil
	}
	c, ok := m.cfg.Networks.(NetworkClaimer)
	if !ok {
		return nil
	}
	return c.Claim(ctx, sb.ID(), rec.TenantID, rec.ID, *p)
}

func (e templateNotFound) Error() string { return "template " + string(e) + " not found" }
