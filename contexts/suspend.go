package contexts

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/internal/logkey"
)

// Suspending to disk frees a context's memory and keeps its files: the
// sandbox's writable layer is captured (as Capture does) and kept as an
// image of the tenant's, the sandbox is destroyed, and the record stays
// ready and active with no sandbox (Record.SuspendImage, PausedAt). The
// next call wakes it on a new sandbox of that image: same context id,
// counters and TTL, its files as they were, its kernels and processes
// fresh (ExecuteResult.Woken says so). Reconcile and the lost-sandbox
// sweep pass over a context without a sandbox; expiry ends it and frees
// its image. docs/state.md, "Suspend to disk".

// ErrSuspended is a Capture or Pause of a context suspended to disk:
// failed_precondition (its next call wakes it).
var ErrSuspended = fmt.Errorf("the context is suspended to disk: %w", errdefs.ErrFailedPrecondition)

// SuspendImages keeps suspended contexts' filesystems. templates.Catalog
// implements it; the manager finds it on Config.Catalog.
type SuspendImages interface {
	// KeepSuspended stores the layer capture writes, over the image of
	// template, as a template of tenantID's (source "suspend", listed
	// nowhere) and returns its id and the layer's bytes.
	KeepSuspended(ctx context.Context, tenantID, contextID, template string, capture func(ctx context.Context, w io.Writer, max int64) error) (string, int64, error)
	// DropSuspended deletes such a template of tenantID's; the image GC
	// then frees its layer once no sandbox or image uses it. An id that is
	// gone, or names a template that is not such a one, is left alone
	// without an error: the manager asks it of every template a context
	// it ends ran on.
	DropSuspended(ctx context.Context, tenantID, id string) error
}

func (m *Manager) suspendImages() (SuspendImages, bool) {
	si, ok := m.cfg.Catalog.(SuspendImages)
	return si, ok && m.cfg.Catalog != nil
}

// Suspend suspends tenantID's ready context to disk. keep > 0 is E2B's
// pause: the expiry moves to now + keep (E2B's paused timeout) and the
// suspend is held (Record.SuspendHeld: E2B's traffic wakes it only with
// autoResume). 0 keeps its expiry, so the context still ends on its TTL,
// and any call or port request wakes it. A paused context may be
// suspended (its frozen memory is dropped); a suspended one is
// ErrSuspended. Where the provider keeps memory (CapMemory) a running
// context keeps it: the wake restores its kernels (Record.KeepsMemory).
func (m *Manager) Suspend(ctx context.Context, tenantID, contextID string, keep time.Duration) (*Record, error) {
	return m.suspend(ctx, tenantID, contextID, keep, true)
}

// SuspendFiles is Suspend without the memory, whatever the provider can:
// the wake boots the context from its files, its kernels fresh (E2B's
// pause with keepMemory false, and its reboot).
func (m *Manager) SuspendFiles(ctx context.Context, tenantID, contextID string, keep time.Duration) (*Record, error) {
	return m.suspend(ctx, tenantID, contextID, keep, false)
}

func (m *Manager) suspend(ctx context.Context, tenantID, contextID string, keep time.Duration, memory bool) (*Record, error) {
	if keep < 0 {
		return nil, fmt.Errorf("keep %s must not be negative: %w", keep, errdefs.ErrInvalidArgument)
	}
	if !m.provider.Capabilities().Has(CapSnapshot) {
		return nil, fmt.Errorf("suspend context %s: %w", contextID, NotSupported(m.provider.Name(), CapSnapshot))
	}
	images, ok := m.suspendImages()
	if !ok {
		return nil, fmt.Errorf("suspend context %s: this daemon keeps no images: %w", contextID, errdefs.ErrFailedPrecondition)
	}
	rec, unlock, err := m.lockForPause(ctx, tenantID, contextID)
	if err != nil {
		return nil, err
	}
	defer unlock()
	return m.suspendLocked(ctx, rec, images, keep, memory)
}

// providerBound bounds a suspend's capture and its checkpoint each: a
// checkpoint of a sandbox's whole memory (2 GiB by default) and a capture
// of its writable layer take seconds to tens of seconds on a slow disk.
const providerBound = 5 * time.Minute

// suspendLocked suspends rec, with its memory when withMemory and the
// provider can. Precondition: its identity lock is held.
func (m *Manager) suspendLocked(ctx context.Context, rec *Record, images SuspendImages, keep time.Duration, withMemory bool) (*Record, error) {
	if rec.Suspended() {
		return nil, fmt.Errorf("context %s: %w", rec.ID, ErrSuspended)
	}
	sandboxID := rec.SandboxID
	// The capture and the checkpoint are bounded (providerBound): a
	// runtime that never answers (a hung runsc subprocess) must not hold
	// the caller for good, least of all the cleanup loop, whose expiries,
	// suspends and sweep wait behind it. What follows them (the record's
	// save) runs on ctx.
	m.mu.Lock()
	bound := m.providerBound
	m.mu.Unlock()
	cctx, cancel := context.WithTimeout(ctx, bound)
	img, bytes, err := images.KeepSuspended(cctx, rec.TenantID, rec.ID, rec.Template, func(ctx context.Context, w io.Writer, max int64) error {
		return m.provider.Capture(ctx, sandboxID, w, max)
	})
	cancel()
	if err != nil {
		if errors.Is(err, errdefs.ErrNotFound) && m.notListed(ctx, sandboxID) {
			if m.terminateRecord(ctx, rec, ReasonError, "sandbox lost") {
				m.markLost(rec.Identity)
			}
			return nil, fmt.Errorf("context %s: its sandbox is gone: %w", rec.ID, errdefs.ErrNotFound)
		}
		return nil, fmt.Errorf("suspend context %s: %w", rec.ID, untouchedError{err})
	}
	// Where the provider keeps memory (runsc), the sandbox is
	// checkpointed and stays on the host, stopped: the record keeps its
	// id, and the wake restores it (the image is the fallback). A failed
	// checkpoint leaves a sandbox whose agent let go of its channel: it is
	// destroyed as a file-only suspend's is. A paused (frozen) sandbox
	// drops its memory, as Suspend says, and could not release its channel.
	memory := false
	if withMemory && !rec.Paused() && m.provider.Capabilities().Has(CapMemory) {
		// A call in flight meets the release: not a loss (checkpointing.go).
		m.mu.Lock()
		e := m.byID[rec.ID]
		m.mu.Unlock()
		defer m.beginCheckpoint(e)()
		kctx, cancel := context.WithTimeout(ctx, bound)
		err := m.provider.Checkpoint(kctx, sandboxID)
		cancel()
		if err != nil {
			m.log.Warn("suspend without memory: checkpoint failed", logkey.Context, rec.ID, logkey.Sandbox, sandboxID, logkey.Err, err)
		} else {
			memory = true
		}
	} else if withMemory && m.provider.Capabilities().Has(CapMemory) {
		m.log.Warn("suspend without memory: the sandbox is frozen", logkey.Context, rec.ID, logkey.Sandbox, sandboxID)
	}
	// The record first: a crash after it leaves a stray sandbox, which
	// the sweep destroys; the other order would leave a record naming a
	// destroyed sandbox, ended as lost at the next start.
	now := m.now()
	m.mu.Lock()
	var sb Sandbox
	if e := m.byID[rec.ID]; e != nil && !e.ended {
		sb, e.sb = e.sb, nil
	}
	m.mu.Unlock()
	kept := ""
	if memory {
		kept = sandboxID
	}
	out, err := m.savePause(ctx, rec, func(r *Record) {
		at := now.UTC()
		r.PausedAt, r.SuspendImage, r.SandboxID = &at, img, kept
		r.SuspendHeld = keep > 0
		if keep > 0 {
			r.ExpiresAt = now.Add(keep)
		}
	}, 0)
	if err != nil {
		m.dropImage(ctx, rec.TenantID, img)
		if memory {
			m.destroy(context.WithoutCancel(ctx), sb, sandboxID)
		}
		return nil, err
	}
	if memory {
		if sb != nil {
			sb.Close() // its connection ended with the checkpoint
		}
		m.log.Info("context suspended with its memory", logkey.Context, rec.ID, logkey.Tenant, rec.TenantID, logkey.Sandbox, sandboxID, logkey.Template, img, logkey.Bytes, bytes)
		return out, nil
	}
	// The template the sandbox ran on, when an earlier wake's image: the
	// new image holds its layers, so nothing needs it any more.
	m.dropImage(ctx, rec.TenantID, rec.Template)
	m.destroy(context.WithoutCancel(ctx), sb, sandboxID)
	m.log.Info("context suspended", logkey.Context, rec.ID, logkey.Tenant, rec.TenantID, logkey.Sandbox, sandboxID, logkey.Template, img, logkey.Bytes, bytes)
	return out, nil
}

// volumesOf returns the volumes rec's sandbox mounted, for the sandbox a
// wake gives it: the mounts recorded when its first sandbox opened them
// (Config.Volumes), which also keep the volumes from being deleted while
// the context is suspended.
func (m *Manager) volumesOf(ctx context.Context, rec *Record) ([]VolumeMount, error) {
	if m.cfg.Volumes == nil {
		return nil, nil
	}
	ms, err := m.cfg.Volumes.Mounts(tctx(ctx, rec.TenantID), rec.TenantID, rec.ID)
	if err != nil {
		return nil, fmt.Errorf("its volumes: %w", err)
	}
	out := make([]VolumeMount, 0, len(ms))
	for _, v := range ms {
		out = append(out, v.Mount)
	}
	return out, nil
}

// notListed reports whether the provider no longer has the sandbox (a
// capture's not_found may also be the template's).
func (m *Manager) notListed(ctx context.Context, sandboxID string) bool {
	ids, err := m.provider.List(ctx)
	if err != nil {
		return false
	}
	for _, id := range ids {
		if id == sandboxID {
			return false
		}
	}
	return true
}

func (m *Manager) dropImage(ctx context.Context, tenantID, img string) {
	images, ok := m.suspendImages()
	if !ok || img == "" {
		return
	}
	if err := images.DropSuspended(context.WithoutCancel(ctx), tenantID, img); err != nil {
		m.log.Warn("drop a suspended context's image", logkey.Tenant, tenantID, logkey.Template, img, logkey.Err, err)
	}
}

// wake gives suspended e a new sandbox from its image and ttl from now
// (0: its own TTL), and frees the image. The sandbox has what the create
// gave the first: the context's identity, the create's environment
// (Record.Env), its network, limits and volumes (as the store records
// them, where they were mounted); its kernels start fresh (prestart: those
// a call is about to use). Precondition: the identity lock is held.
func (m *Manager) wake(ctx context.Context, e *entry, ttl time.Duration, prestart []string) (*Record, error) {
	m.mu.Lock()
	rec := cloneRecord(e.rec)
	if ttl <= 0 {
		ttl = e.ttl
	}
	m.mu.Unlock()
	if !rec.Suspended() {
		return rec, nil
	}
	fallback := rec.SandboxID != ""
	if fallback {
		out, err := m.restore(ctx, e, rec, ttl)
		if err == nil || errors.Is(err, errdefs.ErrNotFound) && e.isEnded(m) {
			return out, err
		}
		if ctx.Err() != nil {
			// The caller gave up (a timeout, a cancel) during the restore:
			// the checkpoint stays for the next wake, which tries again.
			return nil, fmt.Errorf("wake context %s: %w", rec.ID, err)
		}
		// The image holds its files: wake without the memory.
		m.log.Warn("wake without memory: restore failed", logkey.Context, rec.ID, logkey.Sandbox, rec.SandboxID, logkey.Err, err)
		m.destroy(context.WithoutCancel(ctx), nil, rec.SandboxID)
	}
	vols, err := m.volumesOf(ctx, rec)
	if err != nil {
		return nil, fmt.Errorf("wake context %s: %w", rec.ID, err)
	}
	spec := Spec{
		Template: rec.SuspendImage,
		Limits:   m.cfg.Limits,
		Env:      createEnv(rec.Identity, rec.Env),
		Labels:   map[string]string{LabelTenant: rec.TenantID, LabelContext: rec.ID},
		TTL:      ttl,
		Network:  clonePolicy(rec.Network),
		Prestart: prestart,
		Volumes:  vols,
	}
	defer m.creates.begin(m.now())() // until e owns the sandbox, or it is destroyed
	sb, err := m.provider.Create(ctx, spec)
	if err != nil {
		err = guardError(ctx, m.cfg.Guard, rec.TenantID, err)
		if !errdefs.Categorized(err) {
			err = fmt.Errorf("%w: %w", errdefs.ErrUnavailable, err)
		}
		return nil, fmt.Errorf("wake context %s: %w", rec.ID, err)
	}
	now := m.now()
	// The new sandbox runs on the image's template, which becomes the
	// context's: a later suspend, snapshot or fork captures the layer
	// over it (its upper dir holds only what changed since the wake), so
	// the template stays while the context runs, and goes when a later
	// suspend supersedes it or the context ends (dropImage).
	img := rec.SuspendImage
	out, err := m.savePause(ctx, rec, func(r *Record) {
		r.PausedAt, r.SuspendImage, r.SandboxID, r.Template = nil, "", sb.ID(), img
		r.SuspendHeld = false
		r.LastUsedAt, r.ExpiresAt = now, now.Add(ttl)
	}, ttl)
	if err != nil {
		m.destroy(context.WithoutCancel(ctx), sb, sb.ID())
		return nil, err
	}
	m.mu.Lock()
	if e.ended {
		m.mu.Unlock()
		m.destroy(context.WithoutCancel(ctx), sb, sb.ID())
		return nil, fmt.Errorf("context %s has ended: %w", rec.ID, errdefs.ErrNotFound)
	}
	e.sb = sb
	e.woken, e.restored = true, false
	e.alive = time.Now()
	m.mu.Unlock()
	if fallback {
		// A suspend with memory kept the template the sandbox ran on (an
		// earlier wake's image) for the restore; the new image holds it.
		m.dropImage(ctx, rec.TenantID, rec.Template)
	}
	// A fork's template it ran on, when this was the last context on it.
	m.dropFork(ctx, rec.TenantID, rec.Template)
	m.log.Info("context woken", logkey.Context, rec.ID, logkey.Tenant, rec.TenantID, logkey.Sandbox, sb.ID())
	return out, nil
}

// takeWoken reports whether e woke from suspension and no call has said
// so yet, and clears it: one call reports it.
func (m *Manager) takeWoken(e *entry) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	v := e.woken
	e.woken = false
	return v
}

type wokenKey struct{}

// Woken reports, inside a Use callback, whether the call's context woke
// from suspension to disk for it: its files are as they were, its kernels
// and processes started fresh. The first caller to ask gets true, once.
func Woken(ctx context.Context) bool {
	f, ok := ctx.Value(wokenKey{}).(func() bool)
	return ok && f()
}

// withWoken returns ctx for a Use callback on e: Woken(ctx) asks whether
// e woke for this call.
func (m *Manager) withWoken(ctx context.Context, e *entry) context.Context {
	return context.WithValue(ctx, wokenKey{}, func() bool { return m.takeWoken(e) })
}

// suspendIdle suspends the ready, running contexts this manager serves
// that no call has used for their idle suspend (idleFor), and returns how
// many. A context a call or a Use callback holds is left for the next
// pass.
func (m *Manager) suspendIdle(ctx context.Context, now time.Time) int {
	if (m.cfg.IdleSuspend <= 0 && m.cfg.IdleSuspendOf == nil) || !m.provider.Capabilities().Has(CapSnapshot) {
		return 0
	}
	images, ok := m.suspendImages()
	if !ok {
		return 0
	}
	running := func(e *entry) bool { // precondition: mu held
		r := e.rec
		return !e.ended && !e.unsaved && e.users == 0 && r.State == StateReady && r.SandboxID != "" && !r.Paused() && r.ExpiresAt.After(now)
	}
	type cand struct {
		id               Identity
		tenant, template string
		used             time.Time
	}
	m.mu.Lock()
	var cands []cand
	for _, e := range m.byID {
		if running(e) {
			cands = append(cands, cand{e.rec.Identity, e.rec.TenantID, e.rec.Template, e.rec.LastUsedAt})
		}
	}
	m.mu.Unlock()
	n := 0
	idle := m.idleFor(ctx)
	for _, c := range cands {
		if ctx.Err() != nil {
			break
		}
		d := idle(c.tenant, c.template)
		if d <= 0 || now.Sub(c.used) < d {
			continue
		}
		due := func(e *entry) bool { return running(e) && now.Sub(e.rec.LastUsedAt) >= d }
		if m.suspendIdleOne(ctx, c.id, images, due) {
			n++
		}
	}
	if n > 0 {
		m.log.Info("suspended idle contexts", "count", n)
	}
	return n
}

// idleFor returns, for one cleanup pass, the idle suspend of a context of
// a tenant and template: the smallest set value of the daemon's
// (Config.IdleSuspend) and theirs (Config.IdleSuspendOf, asked once per
// pair); 0, never.
func (m *Manager) idleFor(ctx context.Context) func(tenantID, template string) time.Duration {
	type key struct{ tenant, template string }
	seen := map[key]time.Duration{}
	return func(tenantID, template string) time.Duration {
		k := key{tenantID, template}
		if d, ok := seen[k]; ok {
			return d
		}
		d := m.cfg.IdleSuspend
		if m.cfg.IdleSuspendOf != nil {
			if o := m.cfg.IdleSuspendOf(ctx, tenantID, template); o > 0 && (d <= 0 || o < d) {
				d = o
			}
		}
		seen[k] = d
		return d
	}
}

// suspendIdleOne suspends id's context if it is still due once its
// identity lock is held and no call runs on it.
func (m *Manager) suspendIdleOne(ctx context.Context, id Identity, images SuspendImages, due func(*entry) bool) bool {
	unlock, err := m.idLocks.lock(ctx, id)
	if err != nil {
		return false
	}
	defer unlock()
	m.mu.Lock()
	e := m.byIdent[id]
	m.mu.Unlock()
	if e == nil {
		return false
	}
	select {
	case e.exec <- struct{}{}:
		defer e.exec.unlock()
	default:
		return false // executing: used now
	}
	m.mu.Lock()
	ok := due(e)
	rec := cloneRecord(e.rec)
	m.mu.Unlock()
	if !ok {
		return false
	}
	if _, err := m.suspendLocked(ctx, rec, images, 0, true); err != nil {
		m.log.Warn("suspend an idle context", logkey.Context, rec.ID, logkey.Err, err)
		return false
	}
	return true
}

// Wake wakes tenantID's context suspended to disk as its next call would
// (a new sandbox of its image, its own TTL from now) and returns its
// record; a context that is not suspended is returned as it is, running
// or paused with its memory (Resume thaws that one). The edges call it
// for traffic that reaches a context without a call: a request to one of
// its ports.
func (m *Manager) Wake(ctx context.Context, tenantID, contextID string) (*Record, error) {
	rec, unlock, err := m.lockForPause(ctx, tenantID, contextID)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if !rec.Suspended() {
		return rec, nil
	}
	return m.wake(ctx, m.adopt(rec), 0, nil)
}
