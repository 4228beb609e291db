package contexts

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/internal/logkey"
)

// Path event types.
const (
	PathBranched = "branched"
	PathEdited   = "edited"
	PathMerged   = "merged"
	PathDeleted  = "deleted"
	PathArchived = "archived"
)

// PathEvent reports a change to a conversation's paths.
//
// Which path an event is about: for merged, SourcePathID when set (the
// event may be posted on the target path and name the source), else the
// identity's path; for deleted and archived, the identity's path. branched
// and edited change nothing: a new branch gets its own fresh context
// lazily, inheriting nothing.
type PathEvent struct {
	Type         string // branched | edited | merged | deleted | archived
	SourcePathID string // for branched/merged when the event names the other path
	TargetPathID string
}

// drop forgets e without touching its sandbox beyond closing the
// connection (another process owns its teardown).
func (m *Manager) drop(e *entry) {
	m.mu.Lock()
	sb := m.unlink(e)
	m.mu.Unlock()
	if sb != nil {
		sb.Close()
	}
}

// unlink removes e from the maps, marks it ended and returns its sandbox.
// Precondition: mu held.
func (m *Manager) unlink(e *entry) Sandbox {
	e.ended = true
	if m.byID[e.rec.ID] == e {
		delete(m.byID, e.rec.ID)
	}
	if m.byIdent[e.rec.Identity] == e {
		delete(m.byIdent, e.rec.Identity)
	}
	sb := e.sb
	e.sb = nil
	return sb
}

// end terminates e with reason and tears its sandbox down when this
// manager wins Store.Terminate (two managers never both destroy). A store
// failure is logged and the teardown goes ahead.
func (m *Manager) end(ctx context.Context, e *entry, reason Reason, lastErr string) bool {
	won, _ := m.endErr(ctx, e, reason, lastErr)
	return won
}

// endErr is end, also returning the store failure it logged (the record
// may still say active; the cleanup pass counts it as an error).
func (m *Manager) endErr(ctx context.Context, e *entry, reason Reason, lastErr string) (bool, error) {
	m.settle(context.WithoutCancel(ctx), e) // the record ends with every call answered counted
	m.mu.Lock()
	rec := cloneRecord(e.rec)
	unsaved := e.unsaved
	m.mu.Unlock()
	lastErr = m.sanitize(ctx, rec.TenantID, lastErr)
	at := m.now()
	won := true
	defer m.changed(rec.TenantID, rec.ID)
	var storeErr error
	if !unsaved {
		ok, err := m.store.Terminate(tctx(context.WithoutCancel(ctx), rec.TenantID), rec.ID, reason, at, lastErr)
		switch {
		case err == nil:
			won = ok
		case errors.Is(err, errdefs.ErrNotFound):
			won = false
		default:
			m.log.Warn("store: terminate context; tearing down anyway", logkey.Context, rec.ID, logkey.Err, err)
			storeErr = fmt.Errorf("terminate context %s in the store: %w", rec.ID, err)
		}
	}
	m.mu.Lock()
	sb := m.unlink(e)
	if won {
		e.rec.State = finalState(reason)
		e.rec.Reason = reason
		e.rec.TerminatedAt = &at
		if lastErr != "" {
			e.rec.LastError = lastErr
		}
	}
	m.mu.Unlock()
	if !won {
		if sb != nil {
			sb.Close()
		}
		return false, nil
	}
	sid := rec.SandboxID
	if sb != nil {
		sid = sb.ID()
	}
	m.destroy(context.WithoutCancel(ctx), sb, sid)
	m.terminated(ctx, rec, sid, reason, lastErr)
	return true, storeErr
}

// terminateRecord ends a record this manager does not serve (cleanup,
// reconcile) and destroys its sandbox when it wins.
func (m *Manager) terminateRecord(ctx context.Context, rec *Record, reason Reason, lastErr string) bool {
	won, _ := m.terminateRecordErr(ctx, rec, reason, lastErr)
	return won
}

// terminateRecordErr is terminateRecord, also returning the store failure
// it logged.
func (m *Manager) terminateRecordErr(ctx context.Context, rec *Record, reason Reason, lastErr string) (bool, error) {
	m.mu.Lock()
	e := m.byID[rec.ID]
	m.mu.Unlock()
	if e != nil {
		return m.endErr(ctx, e, reason, lastErr)
	}
	lastErr = m.sanitize(ctx, rec.TenantID, lastErr)
	ok, err := m.store.Terminate(tctx(context.WithoutCancel(ctx), rec.TenantID), rec.ID, reason, m.now(), lastErr)
	m.changed(rec.TenantID, rec.ID)
	if err != nil {
		m.log.Warn("store: terminate context", logkey.Context, rec.ID, logkey.Err, err)
		return false, fmt.Errorf("terminate context %s in the store: %w", rec.ID, err)
	}
	if !ok {
		return false, nil
	}
	m.destroy(context.WithoutCancel(ctx), nil, rec.SandboxID)
	m.terminated(ctx, rec, rec.SandboxID, reason, lastErr)
	return true, nil
}

// Termination is one context the manager ended (Config.OnTerminated).
type Termination struct {
	TenantID, ContextID, SandboxID, Template string
	Reason                                   Reason
	LastError                                string // guarded
}

// terminated records a termination the manager won: its span (unless a
// Terminate or PathEvent span already covers it), the counters, the log
// line and Config.OnTerminated.
func (m *Manager) terminated(ctx context.Context, rec *Record, sandboxID string, reason Reason, lastErr string) {
	if !inTerminateSpan(ctx) {
		_, span := startSpan(ctx, spanTerminate, rec.Identity, attrContext.String(rec.ID), attrReason.String(string(reason)))
		terminateAttrs(span, rec, sandboxID, lastErr)
		span.End()
	} else {
		// The Terminate or PathEvent span is the current one: it knew
		// the context by id or by identity only.
		terminateAttrs(currentSpan(ctx), rec, sandboxID, lastErr)
	}
	// Its suspended image, and the template it ran on when that was an
	// earlier wake's image (dropImage leaves any other template alone).
	m.dropImage(ctx, rec.TenantID, rec.SuspendImage)
	m.dropImage(ctx, rec.TenantID, rec.Template)
	m.dropFork(ctx, rec.TenantID, rec.Template)
	m.countTerminated(rec.TenantID, rec.Template, reason)
	m.log.Info("context terminated", logkey.Context, rec.ID, logkey.Tenant, rec.TenantID, logkey.Reason, string(reason))
	ev := Termination{TenantID: rec.TenantID, ContextID: rec.ID, SandboxID: sandboxID, Template: rec.Template, Reason: reason, LastError: lastErr}
	if m.cfg.OnTerminated != nil {
		m.cfg.OnTerminated(context.WithoutCancel(ctx), ev)
	}
	m.obsMu.Lock()
	obs := slices.Clone(m.observers)
	m.obsMu.Unlock()
	for _, o := range obs {
		o.fn(context.WithoutCancel(ctx), ev)
	}
}

// observer is one OnTerminated function, with the sequence number that
// removes it.
type observer struct {
	seq int
	fn  func(context.Context, Termination)
}

// OnTerminated adds fn to the observers told of every termination this
// manager wins, whatever its path, as Config.OnTerminated is (after it,
// then in the order they were added): an edge that keeps state per context
// lets go of it there, at once. fn runs on the terminating goroutine,
// which may hold the context's identity lock, and must not block for long.
// remove takes fn off again.
func (m *Manager) OnTerminated(fn func(ctx context.Context, ev Termination)) (remove func()) {
	m.obsMu.Lock()
	defer m.obsMu.Unlock()
	m.obsSeq++
	seq := m.obsSeq
	m.observers = append(m.observers, observer{seq, fn})
	return func() {
		m.obsMu.Lock()
		defer m.obsMu.Unlock()
		m.observers = slices.DeleteFunc(m.observers, func(o observer) bool { return o.seq == seq })
	}
}

func finalState(r Reason) State {
	if r == ReasonError {
		return StateError
	}
	return StateTerminated
}

// destroy closes sb (when connected) and destroys sandbox id.
func (m *Manager) destroy(ctx context.Context, sb Sandbox, id string) {
	if sb != nil {
		sb.Close()
	}
	if id == "" {
		return
	}
	dctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := m.provider.Destroy(dctx, id); err != nil {
		m.log.Warn("destroy sandbox", logkey.Sandbox, id, logkey.Err, err)
	}
}

// destroyLater destroys sb in the background, for a caller that must not
// wait for it (a create discarding a warm sandbox). Close waits for every
// one under way, so none outlives the manager.
func (m *Manager) destroyLater(sb Sandbox) {
	m.mu.Lock()
	m.discarding.n++
	m.mu.Unlock()
	go func() {
		m.destroy(context.Background(), sb, sb.ID())
		m.mu.Lock()
		defer m.mu.Unlock()
		m.discarding.done()
	}()
}

// waitDiscards waits, as long as ctx allows, for the destroys
// destroyLater started.
func (m *Manager) waitDiscards(ctx context.Context) error {
	return m.discarding.wait(ctx, &m.mu, "sandboxes being destroyed")
}

// sanitize shapes an error message for Record.LastError: one line, at
// most 512 bytes, guarded.
func (m *Manager) sanitize(ctx context.Context, tenantID, s string) string {
	if s == "" {
		return s
	}
	s = strings.Join(strings.Fields(s), " ")
	if m.cfg.Guard != nil {
		// Stored text is held to the guard's enforce mode whatever the
		// tenant's (TaskStoredRecord): secrets and PII are never stored
		// (000 §5.4). Guarded before it is cut, so no value is cut in
		// half past the guard's sight.
		s = m.cfg.Guard.Text(WithTaskType(ctx, TaskStoredRecord), tenantID, s)
	}
	if len(s) > 512 {
		s = s[:512]
		for len(s) > 0 && !validEnd(s) {
			s = s[:len(s)-1]
		}
		s += "…"
	}
	return s
}

func validEnd(s string) bool { return strings.ToValidUTF8(s, "\x00") == s }

// Terminate ends a context of tenantID with reason (empty: manual) and
// destroys its sandbox. Terminating an ended context is a no-op; a context
// of another tenant is ErrNotFound.
func (m *Manager) Terminate(ctx context.Context, tenantID, contextID string, reason Reason) (err error) {
	ctx, span := startSpan(ctx, spanTerminate, Identity{TenantID: tenantID}, attrContext.String(contextID), attrReason.String(string(reason)))
	ctx = withTerminateSpan(ctx)
	defer func() { endSpan(span, err) }()
	if reason == "" {
		reason = ReasonManual
	}
	if err := checkReason(reason); err != nil {
		return err
	}
	rec, err := m.Get(ctx, tenantID, contextID)
	if err != nil {
		return err
	}
	if !rec.State.Active() {
		return nil
	}
	m.terminateRecord(ctx, rec, reason, "")
	return nil
}

func checkReason(r Reason) error {
	switch r {
	case ReasonExpired, ReasonError, ReasonManual, ReasonMerged, ReasonDeleted, ReasonArchived, ReasonRotated:
		return nil
	}
	return fmt.Errorf("termination reason %q: %w", r, errdefs.ErrInvalidArgument)
}

// PathEvent applies a conversation path event (see PathEvent for which
// path each type affects). Ending a path with no active context is a no-op.
func (m *Manager) PathEvent(ctx context.Context, id Identity, ev PathEvent) error {
	id, err := normalize(id)
	if err != nil {
		return err
	}
	var reason Reason
	switch ev.Type {
	case PathBranched, PathEdited:
		return nil
	case PathMerged:
		reason = ReasonMerged
		if ev.SourcePathID != "" {
			id.PathID = ev.SourcePathID
		}
	case PathDeleted:
		reason = ReasonDeleted
	case PathArchived:
		reason = ReasonArchived
	default:
		return fmt.Errorf("path event type %q (use branched, edited, merged, deleted or archived): %w",
			ev.Type, errdefs.ErrInvalidArgument)
	}
	unlock, err := m.idLocks.lock(ctx, id)
	if err != nil {
		return err
	}
	defer unlock()
	m.mu.Lock()
	e := m.byIdent[id]
	m.mu.Unlock()
	ctx, span := startSpan(ctx, spanTerminate, id, attrReason.String(string(reason)))
	ctx = withTerminateSpan(ctx)
	defer span.End()
	if e != nil {
		m.end(ctx, e, reason, "")
	}
	// The store may know an active context this manager does not serve.
	rec, err := m.store.GetActive(tctx(ctx, id.TenantID), id)
	switch {
	case err == nil:
		m.terminateRecord(ctx, rec, reason, "")
	case !errors.Is(err, errdefs.ErrNotFound):
		m.log.Warn("store: path event lookup", logkey.Tenant, id.TenantID, logkey.Err, err)
	}
	return nil
}

// EndConversation terminates every active context of one conversation of
// tenantID, on every path, with reason deleted: the call a client makes
// when a conversation is deleted, instead of one path event per path it
// would have to know. It returns how many contexts it ended; a
// conversation with none is not an error (ending is idempotent). The
// conversation is one user's (userID, "" being no user): another user's
// contexts of the same conversation id stay.
func (m *Manager) EndConversation(ctx context.Context, tenantID, userID, conversationID string) (int, error) {
	if _, err := normalize(Identity{TenantID: tenantID, UserID: userID, ConversationID: conversationID}); err != nil {
		return 0, err
	}
	f := Filter{TenantID: tenantID, UserID: userID, ByUser: true, ConversationID: conversationID, States: []State{StateCreating, StateReady}}
	var ended int
	for {
		recs, err := m.List(ctx, f)
		if err != nil {
			return ended, err
		}
		for _, rec := range recs {
			if err := m.Terminate(ctx, tenantID, rec.ID, ReasonDeleted); err != nil {
				return ended, fmt.Errorf("end context %s of conversation %s: %w", rec.ID, conversationID, err)
			}
			ended++
		}
		// Terminated records leave the filter, so a full page means more
		// may follow; an empty or short page is the end.
		if len(recs) == 0 || (f.Limit == 0 && len(recs) < 100) {
			return ended, nil
		}
	}
}
