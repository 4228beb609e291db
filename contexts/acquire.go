package contexts

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/internal/logkey"
)

// doner is a sandbox connection that reports its closing (*agent.Client).
type doner interface{ Done() <-chan struct{} }

// provedAlive reports whether sb answered within HealthCheckInterval and
// its connection is still open, which counts as a passed health check.
func (m *Manager) provedAlive(e *entry, sb Sandbox) bool {
	if m.cfg.HealthCheckInterval <= 0 {
		return false
	}
	d, ok := sb.(doner)
	if !ok {
		return false
	}
	select {
	case <-d.Done():
		return false
	default:
	}
	m.mu.Lock()
	at := e.alive
	m.mu.Unlock()
	return !at.IsZero() && time.Since(at) < m.cfg.HealthCheckInterval
}

// inBand is a sandbox connection that can check its agent in band
// (*agent.Client: agent.WithProbe).
type inBand interface{ ProbesInBand() bool }

// probingKey marks a context whose call will probe its sandbox in band
// (withProbing): the reuse's own ping is skipped.
type probingKey struct{}

// withProbing marks ctx for a call that sends agent.WithProbe's ping with
// its request, on a provider that is not shared: its sandbox's connection
// is this host's socket, where the probe proves an unanswered request was
// never dispatched. A pod's connection across a network may hold an
// answer back while the request runs, and keeps the ping before the call.
func (m *Manager) withProbing(ctx context.Context) context.Context {
	if m.shared {
		return ctx
	}
	return context.WithValue(ctx, probingKey{}, true)
}

// probesInBand reports whether the call of ctx on sb checks sb in band,
// which stands for the reuse's health check.
func probesInBand(ctx context.Context, sb Sandbox) bool {
	if v, _ := ctx.Value(probingKey{}).(bool); !v {
		return false
	}
	p, ok := sandboxAs[inBand](sb)
	if !ok || !p.ProbesInBand() {
		return false
	}
	d, ok := sandboxAs[doner](sb)
	if !ok {
		return false
	}
	select {
	case <-d.Done():
		return false // closed: the ping fails at once and the context is replaced
	default:
		return true
	}
}

// markAlive records that e's sandbox just answered.
func (m *Manager) markAlive(e *entry) {
	now := time.Now()
	m.mu.Lock()
	e.alive = now
	m.mu.Unlock()
}

// GetOrCreate returns the active context of id, creating it lazily (from
// the warm pool when it can). A reused context is health-checked; if its
// sandbox is gone it is terminated (reason error) and replaced
// transparently. Every call extends expiresAt to now + TTL.
func (m *Manager) GetOrCreate(ctx context.Context, id Identity, opts CreateOptions) (*Record, error) {
	e, err := m.acquire(ctx, id, opts, 0)
	if err != nil {
		return nil, err
	}
	m.writeUse(ctx, e)
	return m.snapshot(e), nil
}

// acquire returns the ready, health-checked and touched entry of id,
// inside a get_or_create span.
//
// recordWithin > 0 says the caller records the use itself (Execute:
// Store.RecordExecution sets lastUsedAt and expiresAt after the call) and
// that its call ends within recordWithin: a reused context whose expiresAt
// is further away than that is not touched first, saving one store write
// per call. Zero touches on reuse (GetOrCreate, Use).
func (m *Manager) acquire(ctx context.Context, id Identity, opts CreateOptions, recordWithin time.Duration) (*entry, error) {
	ctx, span := startSpan(ctx, spanGetOrCreate, id)
	e, err := m.acquireEntry(ctx, id, opts, recordWithin)
	m.sandboxAttr(span, e)
	endSpan(span, err)
	return e, err
}

func (m *Manager) acquireEntry(ctx context.Context, id Identity, opts CreateOptions, recordWithin time.Duration) (*entry, error) {
	id, err := normalize(id)
	if err != nil {
		return nil, err
	}
	if err := opts.check(m.provider); err != nil {
		return nil, err
	}
	if _, ok := m.suspendImages(); opts.AutoPauseToDisk && !ok {
		return nil, fmt.Errorf("suspending to disk at expiry: this daemon keeps no images: %w", errdefs.ErrFailedPrecondition)
	}
	if m.isClosed() {
		return nil, errClosed
	}
	unlock, err := m.idLocks.lock(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("wait for context of %s: %w", id.ConversationID, err)
	}
	defer unlock()
	var lastErr error
	for range 4 {
		m.mu.Lock()
		e := m.byIdent[id]
		m.mu.Unlock()
		if e != nil && !m.refresh(ctx, e) {
			e = nil // ended on another node: the store may hold its successor
		}
		if e == nil {
			if e, err = m.load(ctx, id); err != nil {
				return nil, err
			}
		}
		if e != nil && opts.ContextID != "" && m.snapshot(e).ID != opts.ContextID {
			e = nil // the identity moved on to another context
		}
		if e != nil {
			// A paused context is refused before revive, whose health
			// check a frozen sandbox could not answer.
			// The record's plain fields, read without a copy of it (a
			// warm call's every copy was an allocation).
			m.mu.Lock()
			recID, paused, suspended, expiresAt, ended := e.rec.ID, e.rec.Paused(), e.rec.Suspended(), e.rec.ExpiresAt, e.ended
			m.mu.Unlock()
			if !ended && !paused && !expiresAt.After(m.now()) {
				paused = m.autoPause(ctx, m.snapshot(e)) // E2B's autoPause: at its expiry it pauses
			}
			if !ended && paused && !suspended {
				return nil, pausedErr(recID)
			}
			if !ended && suspended && expiresAt.After(m.now()) {
				// Suspended to disk: this call wakes it on a new
				// sandbox of its image, with its own TTL.
				if _, err := m.wake(ctx, e, 0, opts.Prestart); err != nil {
					return nil, err
				}
			}
			ok, err := m.revive(ctx, e, recordWithin)
			if err != nil {
				return nil, err
			}
			if ok {
				m.mu.Lock()
				tenant, template, recID := e.rec.TenantID, e.rec.Template, e.rec.ID
				sandboxID := ""
				if e.sb != nil {
					sandboxID = e.sb.ID()
				}
				m.mu.Unlock()
				m.countReused(tenant, template)
				if m.log.Enabled(ctx, slog.LevelDebug) { // its attributes cost allocations per warm call
					m.log.Debug("context reused", sessionAttrs(id, logkey.Context, recID, logkey.Sandbox, sandboxID, logkey.Template, template)...)
				}
				if err := m.ensureNetwork(ctx, e, opts.Network); err != nil {
					return nil, err
				}
				return e, nil
			}
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		if opts.ContextID != "" {
			return nil, fmt.Errorf("context %s is not active: %w", opts.ContextID, errdefs.ErrNotFound)
		}
		e, err = m.create(ctx, id, opts)
		if errors.Is(err, errLostRace) {
			lastErr = err
			continue // another process created it: load and attach on the next turn
		}
		return e, err
	}
	return nil, fmt.Errorf("context of %s/%s: %w", id.ConversationID, id.PathID, lastErr)
}

// sessionAttrs returns a log line's attributes naming the session key of
// id (tenant, user when it has one, conversation, path) followed by more:
// the create and reuse lines carry it, so a conversation's log query shows
// which context and sandbox served it.
func sessionAttrs(id Identity, more ...any) []any {
	a := make([]any, 0, 8+len(more))
	a = append(a, logkey.Tenant, id.TenantID)
	if id.UserID != "" {
		a = append(a, logkey.User, id.UserID)
	}
	a = append(a, logkey.Conversation, id.ConversationID, logkey.PathID, id.PathID)
	return append(a, more...)
}

var errLostRace = fmt.Errorf("another manager created this context concurrently: %w", errdefs.ErrUnavailable)

// load builds an entry from the store's active record of id (created by
// another process, or before a restart); its sandbox is attached by revive.
// Nil when there is none or the store fails; an error when another live
// node owns it (see own).
func (m *Manager) load(ctx context.Context, id Identity) (*entry, error) {
	rec, err := m.store.GetActive(tctx(ctx, id.TenantID), id)
	if err != nil {
		if !errors.Is(err, errdefs.ErrNotFound) {
			m.log.Warn("store: load active context", logkey.Tenant, id.TenantID, logkey.Err, err)
		}
		return nil, nil
	}
	if rec, err = m.own(ctx, rec); rec == nil {
		return nil, err
	}
	return m.adopt(rec), nil
}

// refresh reads e's record again when other nodes may serve it too (a
// shared provider): the store is the truth about a context several nodes
// serve, and this node's copy may miss a pause, a new TTL or network, or
// an ending made on another. It reports false when e ended (dropped). A
// store that cannot answer leaves the copy as it is, as does a record the
// store lacks (unsaved).
func (m *Manager) refresh(ctx context.Context, e *entry) bool {
	m.mu.Lock()
	id, tid, unsaved, ended := e.rec.ID, e.rec.TenantID, e.unsaved, e.ended
	m.mu.Unlock()
	if ended {
		return false
	}
	if !m.shared || unsaved {
		return true
	}
	m.settle(ctx, e) // the store has this node's calls
	r, err := m.store.Get(tctx(ctx, tid), id)
	switch {
	case errors.Is(err, errdefs.ErrNotFound), err == nil && !r.State.Active():
		m.log.Info("context ended elsewhere; dropping it", logkey.Context, id)
		m.drop(e)
		return false
	case err != nil:
		m.log.Warn("store: read a context served by several nodes; using this node's copy", logkey.Context, id, logkey.Err, err)
		return true
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if e.ended {
		return false
	}
	e.rec = m.withTally(e, withEnv(r, e.rec)) // and the calls answered since
	if d := r.ExpiresAt.Sub(r.LastUsedAt); d > 0 && !r.FixedExpiry {
		e.ttl = d
	}
	return true
}

// adopt registers rec as an entry without a connected sandbox, or returns
// the entry already registered for it.
func (m *Manager) adopt(rec *Record) *entry {
	m.mu.Lock()
	if e := m.byID[rec.ID]; e != nil {
		m.mu.Unlock()
		return e
	}
	ttl := rec.ExpiresAt.Sub(rec.LastUsedAt)
	if ttl <= 0 {
		ttl = m.cfg.TTL
	}
	e := &entry{exec: make(sem, 1), rec: rec, ttl: ttl}
	var stale Sandbox
	if old := m.byIdent[rec.Identity]; old != nil {
		stale = m.unlink(old) // ended elsewhere: the store moved on
	}
	m.byID[rec.ID] = e
	m.byIdent[rec.Identity] = e
	m.mu.Unlock()
	if stale != nil {
		stale.Close()
	}
	return e
}

// revive makes e usable: it waits for a record another process is
// creating, rotates or expires it when due, attaches and pings its sandbox
// and touches it (see acquire for recordWithin). It reports false when e
// was ended instead (the caller creates a new context), and an error when
// a shared provider's sandbox could not be reached now but is not known to
// be lost (reachable): the call fails and the context is kept. Precondition:
// the identity lock is held.
func (m *Manager) revive(ctx context.Context, e *entry, recordWithin time.Duration) (bool, error) {
	m.mu.Lock()
	rec := cloneRecord(e.rec)
	sb, ended := e.sb, e.ended
	m.mu.Unlock()
	if ended {
		return false, nil
	}
	if rec.State == StateCreating && sb == nil {
		r, ok := m.waitReady(ctx, rec)
		if !ok {
			m.drop(e)
			return false, nil
		}
		m.mu.Lock()
		e.rec, rec = r, cloneRecord(r)
		m.mu.Unlock()
	}
	now := m.now()
	switch {
	case !rec.ExpiresAt.After(now) && (rec.FixedExpiry || !m.extendedInStore(ctx, e, now)):
		m.end(ctx, e, ReasonExpired, "")
		return false, nil
	case m.rotationDue(rec):
		m.end(ctx, e, ReasonRotated, "")
		return false, nil
	}
	attached := sb == nil
	if sb == nil {
		var err error
		sb, err = m.provider.Attach(ctx, rec.SandboxID)
		if err != nil {
			if ctx.Err() != nil {
				return false, nil
			}
			if err := m.unreachable(rec, err); err != nil {
				return false, err
			}
			m.healthFailed(ctx, e, "sandbox lost: attach: "+err.Error(), false)
			return false, nil
		}
		if err := m.tellIdentity(ctx, sb, rec.Identity); err != nil {
			// Its health check decides; a sandbox that answers keeps
			// the identity it was told before the restart, if any.
			m.log.Debug("attached sandbox: tell its identity", logkey.Sandbox, sb.ID(), logkey.Err, err)
		}
		m.mu.Lock()
		if e.ended {
			m.mu.Unlock()
			sb.Close()
			return false, nil
		}
		e.sb = sb
		m.mu.Unlock()
	}
	if !m.provedAlive(e, sb) && !probesInBand(ctx, sb) {
		pctx, cancel := context.WithTimeout(ctx, m.cfg.HealthCheckTimeout)
		err := sb.Ping(pctx)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return false, nil
			}
			m.mu.Lock()
			moved := connMoved(e, sb)
			m.mu.Unlock()
			if moved {
				// A checkpoint closed this connection (checkpointing.go).
				return false, errMoving(rec.ID)
			}
			if m.shared {
				// This node's connection failed, which says nothing of
				// the sandbox every node reaches: attach it again, and
				// let the provider's answer judge (once: a sandbox the
				// provider just attached and that does not answer is
				// unreachable, not lost).
				m.detach(e, sb)
				if attached {
					return false, m.unreachable(rec, fmt.Errorf("ping: %v: %w", err, errdefs.ErrUnavailable))
				}
				return m.revive(ctx, e, recordWithin)
			}
			m.healthFailed(ctx, e, "health check failed: "+err.Error(), false)
			return false, nil
		}
		m.markAlive(e)
	}
	if recordWithin > 0 && rec.ExpiresAt.After(now.Add(recordWithin)) {
		// The record stays unexpired for the whole call, for every process
		// (cleanup here skips an executing context anyway), and the call's
		// Store.RecordExecution extends it and reports a record another
		// process ended (recordExecution drops the entry then). A sandbox
		// that process tore down is caught before the call by the health
		// check (its connection is closed).
		return true, nil
	}
	if recordWithin == 0 && !m.shared && rec.FixedExpiry {
		// A fixed expiry (E2B's) makes the touch a lastUsedAt only: it is
		// kept in memory now and written after the call (Use), at once
		// when there is no call (GetOrCreate), or by the call's own
		// RecordExecution (Execute). A shared provider's call writes
		// first: every node reads the record before a call (refresh).
		return m.useInMemory(e, now), nil
	}
	return m.touch(ctx, e, now), nil
}

// unreachable is the error of a call whose shared provider's sandbox
// could not be attached for a reason other than its loss (the cluster's
// API server, the network to the pod): every node reaches such a sandbox,
// and only the provider's not_found says it is gone. Nil when err is that
// verdict, or the provider is not shared (its attach failing is the loss).
func (m *Manager) unreachable(rec *Record, err error) error {
	if !m.shared || errors.Is(err, errdefs.ErrNotFound) {
		return nil
	}
	if !errdefs.Categorized(err) {
		err = fmt.Errorf("%w: %w", err, errdefs.ErrUnavailable)
	}
	m.log.Warn("attach a context's sandbox; the context is kept and the next call tries again", logkey.Context, rec.ID, logkey.Sandbox, rec.SandboxID, logkey.Err, err)
	return fmt.Errorf("context %s: its sandbox %s cannot be reached now: %w", rec.ID, rec.SandboxID, err)
}

// detach forgets sb, e's connection to its sandbox, and closes it, unless
// another call replaced it meanwhile; the next use attaches again.
func (m *Manager) detach(e *entry, sb Sandbox) {
	m.mu.Lock()
	if e.sb == sb {
		e.sb = nil
		e.alive = time.Time{}
	}
	m.mu.Unlock()
	sb.Close()
}

// touch extends e's expiry and reports false when the store says another
// process ended it (e is dropped).
func (m *Manager) touch(ctx context.Context, e *entry, now time.Time) bool {
	m.mu.Lock()
	exp := usedLocked(e, now)
	id, tid, unsaved := e.rec.ID, e.rec.TenantID, e.unsaved
	m.mu.Unlock()
	defer m.changed(tid, id)
	if unsaved {
		return true
	}
	m.settle(ctx, e) // no call's older expiry lands after this one
	if err := m.store.Touch(tctx(ctx, tid), id, now, exp); err != nil {
		if errors.Is(err, errdefs.ErrNotFound) || errors.Is(err, errdefs.ErrFailedPrecondition) {
			m.log.Info("context ended elsewhere; dropping it", logkey.Context, id, logkey.Err, err)
			m.drop(e)
			return false
		}
		m.log.Warn("store: touch context", logkey.Context, id, logkey.Err, err)
	}
	return true
}

// waitReady polls a record another process is creating until it is ready.
// A record stuck in creating past CreatingTimeout is ended as an orphan.
func (m *Manager) waitReady(ctx context.Context, rec *Record) (*Record, bool) {
	deadline := rec.CreatedAt.Add(m.cfg.CreatingTimeout)
	sctx := tctx(ctx, rec.TenantID)
	for {
		r, err := m.store.Get(sctx, rec.ID)
		if err != nil {
			return nil, false
		}
		switch {
		case r.State == StateReady:
			return r, true
		case !r.State.Active():
			return nil, false
		case !m.now().Before(deadline):
			m.terminateRecord(ctx, r, ReasonError, "stuck in creating")
			return nil, false
		}
		select {
		case <-ctx.Done():
			return nil, false
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// healthFailed ends e, whose sandbox is gone, counting a failed health
// check. told says the call that found it reports the loss itself (a call
// the sandbox died under): otherwise the identity's next context carries
// it to the next call (markLost).
func (m *Manager) healthFailed(ctx context.Context, e *entry, msg string, told bool) {
	if m.isClosed() {
		// Close detached the sandbox under this call: that is no evidence
		// against it, and it must stay running for the next Start.
		return
	}
	m.mu.Lock()
	template, id, tid := e.rec.Template, e.rec.ID, e.rec.TenantID
	m.mu.Unlock()
	m.countHealthFailure(tid, template)
	m.log.Warn("context sandbox unhealthy; recreating", logkey.Context, id, logkey.Err, m.sanitize(ctx, tid, msg))
	if m.end(ctx, e, ReasonError, msg) && !told {
		m.markLost(m.snapshot(e).Identity)
	}
}

// SetTTL changes an active context's TTL and sets expiresAt to now + ttl.
// Later uses extend by the new TTL. A context another live node serves is
// refused like a call (unavailable, naming the node).
func (m *Manager) SetTTL(ctx context.Context, tenantID, contextID string, ttl time.Duration) (*Record, error) {
	if ttl <= 0 {
		return nil, fmt.Errorf("ttl %s must be positive: %w", ttl, errdefs.ErrInvalidArgument)
	}
	rec, err := m.Get(ctx, tenantID, contextID)
	if err != nil {
		return nil, err
	}
	if !rec.State.Active() {
		return nil, fmt.Errorf("context %s is %s: %w", contextID, rec.State, errdefs.ErrFailedPrecondition)
	}
	if err := m.servedElsewhere(ctx, rec); err != nil {
		return nil, err // its node keeps the TTL in memory and would not see the change
	}
	now := m.now()
	exp := now.Add(ttl)
	m.mu.Lock()
	e := m.byID[contextID]
	unsaved := false
	var sb Sandbox
	if e != nil {
		e.ttl = ttl
		e.rec.LastUsedAt, e.rec.ExpiresAt = now, exp
		unsaved, sb = e.unsaved, e.sb
	}
	m.mu.Unlock()
	if ts, ok := sandboxAs[ttlSetter](sb); ok {
		if err := ts.SetTTL(ctx, ttl); err != nil {
			return nil, fmt.Errorf("context %s: set the provider's timeout: %w", contextID, err)
		}
	}
	if !unsaved {
		m.settle(ctx, e)
		if err := m.store.Touch(tctx(ctx, tenantID), contextID, now, exp); err != nil {
			if errors.Is(err, errdefs.ErrFailedPrecondition) || errors.Is(err, errdefs.ErrNotFound) {
				return nil, err
			}
			m.log.Warn("store: set ttl", logkey.Context, contextID, logkey.Err, err)
		}
	}
	rec.LastUsedAt, rec.ExpiresAt = now, exp
	m.changed(tenantID, contextID)
	return rec, nil
}

// ttlSetter is a sandbox whose provider keeps a timeout of its own (an E2B
// sandbox ends at its E2B timeout): SetTTL moves it with the context's.
type ttlSetter interface {
	SetTTL(ctx context.Context, ttl time.Duration) error
}

// sandboxAs finds T in sb or in the sandboxes it wraps (a provider chain
// wraps its providers' sandboxes and gives them back with Unwrap).
func sandboxAs[T any](sb Sandbox) (T, bool) {
	for sb != nil {
		if t, ok := sb.(T); ok {
			return t, true
		}
		u, ok := sb.(interface{ Unwrap() Sandbox })
		if !ok {
			break
		}
		sb = u.Unwrap()
	}
	var zero T
	return zero, false
}
