package contexts

// An execution's accounting (its count, its time, its last use and the
// expiry it extends) is written to the store behind its answer, not
// before it: that write was most of what the manager added to a warm call
// (a SQLite commit, a Postgres round trip). The entry's in-memory record
// counts the call at once (rotation, the answer, the sweep); one writer
// per entry writes what calls added, several calls in one write when they
// come faster than the store takes them. The same writer takes the touch
// of a record whose expiry is fixed (E2B's) after its call (writeUse).
//
// The writer starts tallyDelay after the first call it is to write, from
// a timer, not from the call: a goroutine started during a call woke an
// idle thread (the scheduler's wakep), about a third of what the manager
// added to a warm call, and the calls of that delay share one write. A
// read or write that must see the calls (settle) starts it at once.
//
// What reads the record from the store for a caller (Get, Lookup, List)
// or writes it (an end, a touch, a new TTL, a pause, a network, a usage
// sample) first waits for the writes of the calls answered before it
// (settle), so a caller reads its own calls and no older expiry lands
// over a newer one. A process killed between an answer and its write
// loses that write's count (docs/contexts.md, "Store writes per call").

import (
	"context"
	"errors"
	"time"

	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/internal/logkey"
)

// tally is what an entry's calls added and the store does not have yet.
// Guarded by Manager.mu.
type tally struct {
	n        int       // executions answered and not yet taken by the writer
	ms       int64     // their time, in milliseconds
	now, exp time.Time // the latest one's use and the expiry it set
	// answered counts the calls and uses handed to the writer, taken
	// those a write took (answered > taken: some wait for a write),
	// written those whose write is over (landed or failed); wrote is
	// closed and replaced at each write's end, for settle.
	answered, taken, written uint64
	wrote                    chan struct{}
	writing                  bool // a writer runs, or waits for its timer (Manager.armed)
	timer                    *time.Timer
	ctx                      context.Context // the waiting writer's
}

// tallyDelay is how long after a call its writer starts (see above): the
// calls answered in it share its write. A daemon killed in it loses their
// count, as one killed before a write lands (docs/contexts.md).
const tallyDelay = 5 * time.Millisecond

// recordExecution counts one execution of dur on e and extends its
// expiry: at once in memory, and in the store by e's writer (which also
// writes a use revive kept in memory for it: useDue).
func (m *Manager) recordExecution(ctx context.Context, e *entry, dur time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e.rec.ExecutionCount++
	e.rec.TotalExecutionTimeMs += dur.Milliseconds()
	now := m.now()
	exp := usedLocked(e, now)
	e.useDue = false
	if m.queueLocked(ctx, e, now, exp) {
		e.tally.n++
		e.tally.ms += dur.Milliseconds()
	}
}

// useInMemory is revive's touch of a record whose expiry is fixed (E2B's):
// the touch moves lastUsedAt only, so the store may take it after the
// call. It moves it in memory now and marks it due (writeUse, or the
// call's own recordExecution, hands it to e's writer). False when e ended
// meanwhile: the caller starts over, as after a refused touch.
func (m *Manager) useInMemory(e *entry, now time.Time) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if e.ended {
		return false
	}
	usedLocked(e, now)
	e.useDue = true
	return true
}

// writeUse hands e's writer the use useInMemory kept, if it is still
// due: after the call that used e (Use), or at once when there is none
// (GetOrCreate). The write lands after the call, so a store that says the
// record ended elsewhere drops e after that call, not under it.
func (m *Manager) writeUse(ctx context.Context, e *entry) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !e.useDue {
		return
	}
	e.useDue = false
	m.queueLocked(ctx, e, e.rec.LastUsedAt, e.rec.ExpiresAt)
}

// usedLocked moves e's last use to now and its expiry with it (unless
// fixed), and returns the expiry. Precondition: mu held.
func usedLocked(e *entry, now time.Time) time.Time {
	exp := now.Add(e.ttl)
	if e.rec.FixedExpiry {
		exp = e.rec.ExpiresAt
	}
	e.rec.LastUsedAt, e.rec.ExpiresAt = now, exp
	return exp
}

// queueLocked hands e's writer a use at now that set exp, starting the
// writer if none runs; false when the record lives only here or is over
// (nothing to write). Precondition: mu held.
func (m *Manager) queueLocked(ctx context.Context, e *entry, now, exp time.Time) bool {
	if e.unsaved || e.ended {
		return false
	}
	t := &e.tally
	if !now.Before(t.now) { // a later use's write may be taken already
		t.now, t.exp = now, exp
	}
	t.answered++
	if !t.writing {
		t.writing, t.ctx = true, context.WithoutCancel(ctx)
		if t.wrote == nil {
			t.wrote = make(chan struct{})
		}
		m.writers.n++
		m.armed[e] = struct{}{}
		if t.timer == nil {
			t.timer = time.AfterFunc(m.tallyDelay, func() { m.tallyDue(e) })
		} else {
			t.timer.Reset(m.tallyDelay)
		}
	}
	return true
}

// tallyDue starts e's writer when its timer fires, unless settle started
// it first.
func (m *Manager) tallyDue(e *entry) {
	m.mu.Lock()
	if _, ok := m.armed[e]; !ok {
		m.mu.Unlock()
		return
	}
	delete(m.armed, e)
	ctx := e.tally.ctx
	m.mu.Unlock()
	m.writeTally(ctx, e)
}

// startTallyLocked starts e's writer now if it waits for its timer.
// Precondition: mu held.
func (m *Manager) startTallyLocked(e *entry) {
	if _, ok := m.armed[e]; !ok {
		return
	}
	delete(m.armed, e)
	e.tally.timer.Stop() // if it fired meanwhile, tallyDue finds it started
	go m.writeTally(e.tally.ctx, e)
}

// writeTally writes e's tally to the store until nothing is left. A write
// the store refuses because the record ended or moved to another node
// drops e, as a synchronous write did, and what is left is not written;
// any other failure is logged and the calls stay counted in memory only.
// An entry Close ended still gets its calls written.
func (m *Manager) writeTally(ctx context.Context, e *entry) {
	dropped := false
	for {
		m.mu.Lock()
		t := e.tally
		upto := t.answered // the calls this write takes
		if upto == t.taken || dropped {
			e.tally.taken, e.tally.written = upto, upto
			e.tally.n, e.tally.ms, e.tally.writing = 0, 0, false
			e.tally.ctx = nil
			m.wroteLocked(e)
			m.writers.done()
			m.mu.Unlock()
			return
		}
		e.tally.n, e.tally.ms, e.tally.taken = 0, 0, upto
		id, tid := e.rec.ID, e.rec.TenantID
		m.mu.Unlock()
		r, err := m.store.RecordExecution(tctx(ctx, tid), id, t.n, time.Duration(t.ms)*time.Millisecond, t.now, t.exp)
		m.changed(tid, id)
		switch {
		case err == nil && !m.serves(r):
			// Another node took it over while this one's lease had lapsed
			// (a shared provider's records are every node's: no takeover).
			m.log.Warn("context taken over by another node; dropping it", logkey.Context, id, logkey.Node, r.Node)
			m.drop(e)
			dropped = true
		case err == nil:
			// The in-memory record counted these calls already; it stays
			// the newer copy (a pause or a new TTL may have changed it
			// since, and be on its way to the store).
		case errors.Is(err, errdefs.ErrNotFound) || errors.Is(err, errdefs.ErrFailedPrecondition):
			m.mu.Lock()
			ended := e.ended
			m.mu.Unlock()
			if !ended {
				m.log.Info("context ended elsewhere; dropping it", logkey.Context, id, logkey.Err, err)
				m.drop(e)
			}
			dropped = true
		case t.n == 0: // uses only (writeUse)
			m.log.Warn("store: touch context", logkey.Context, id, logkey.Err, err)
		default:
			m.log.Warn("store: record execution", logkey.Context, id, logkey.Err, err)
		}
		m.mu.Lock()
		e.tally.written = upto
		m.wroteLocked(e)
		m.mu.Unlock()
	}
}

// wroteLocked wakes the settles waiting on e's writes. Precondition: mu
// held.
func (m *Manager) wroteLocked(e *entry) {
	close(e.tally.wrote)
	e.tally.wrote = make(chan struct{})
}

// withTally adds to r, a record of e read from the store, what e's calls
// added that no write has taken yet. Precondition: mu held.
func (m *Manager) withTally(e *entry, r *Record) *Record {
	if p := e.tally; p.answered > p.taken {
		r.ExecutionCount += int64(p.n)
		r.TotalExecutionTimeMs += p.ms
		r.LastUsedAt, r.ExpiresAt = p.now, p.exp
	}
	return r
}

// settle waits until the writes of the calls e answered before it are
// over, or ctx ends. Calls answered meanwhile do not hold it up.
func (m *Manager) settle(ctx context.Context, e *entry) {
	if e == nil {
		return
	}
	m.mu.Lock()
	target := e.tally.answered
	for e.tally.written < target {
		m.startTallyLocked(e)
		wrote := e.tally.wrote
		m.mu.Unlock()
		select {
		case <-wrote:
		case <-ctx.Done():
			return
		}
		m.mu.Lock()
	}
	m.mu.Unlock()
}

// settleID is settle for the entry of context id, if this manager has one.
func (m *Manager) settleID(ctx context.Context, id string) {
	m.mu.Lock()
	e := m.byID[id]
	m.mu.Unlock()
	m.settle(ctx, e)
}

// settleAll is settle for every entry.
func (m *Manager) settleAll(ctx context.Context) {
	m.mu.Lock()
	es := make([]*entry, 0, len(m.byID))
	for _, e := range m.byID {
		if e.tally.writing {
			es = append(es, e)
		}
	}
	m.mu.Unlock()
	for _, e := range es {
		m.settle(ctx, e)
	}
}

// waitWriters waits until no writer runs (Close, after it ended every
// entry: their last calls' writes land before the store closes). The
// writers still waiting for their timers start now.
func (m *Manager) waitWriters(ctx context.Context) error {
	m.mu.Lock()
	for e := range m.armed {
		m.startTallyLocked(e)
	}
	m.mu.Unlock()
	return m.writers.wait(ctx, &m.mu, "executions being written")
}
