package audit

import (
	"context"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// KindDropped records that a tenant's events were dropped on the way to
// the trail (detail count): its queue was full, or a write failed.
const KindDropped = "audit.dropped"

// Appender is where a Writer puts its batches: the store's
// AppendAuditBatch.
type Appender interface {
	AppendAuditBatch(ctx context.Context, evs []Event) error
}

// WriterConfig bounds a Writer. Zero values are the defaults.
type WriterConfig struct {
	// PerTenant bounds the events waiting for one tenant (0: 4096); past
	// it the tenant's new events are dropped and counted.
	PerTenant int
	// Total bounds the events waiting for all tenants together (0:
	// 65536); past it an event is taken from the longest queue.
	Total int
	// Batch is the most events one write carries (0: 256).
	Batch int
	// Timeout bounds one write (0: 10 s).
	Timeout time.Duration
	Log     *slog.Logger
}

// Writer is the path of the audit events that sandboxes cause (their
// connections and lookups, the guard's findings in their output) to the
// store: Add never blocks the caller, each tenant has a queue of its own,
// and each write takes the same share of every tenant that has events
// waiting, so a tenant that floods the path fills and loses only its own
// queue. Writes are batches (one store write for up to Batch events).
// What a tenant loses is counted and written as a KindDropped event of
// that tenant once there is room. Safe for concurrent use.
type Writer struct {
	app     Appender
	cfg     WriterConfig
	log     *slog.Logger
	dropped atomic.Int64
	wake    chan struct{}
	stop    chan struct{} // closed by Close
	done    chan struct{}

	mu     sync.Mutex
	queues map[string]*queue // tenant → events waiting
	order  []string          // tenants with events waiting, in turn
	next   int               // whose turn starts the next batch
	total  int
	lost   map[string]int64 // events dropped per tenant, not yet recorded
	closed bool
	warned time.Time
}

type queue struct{ evs []Event }

// NewWriter starts a Writer in front of app; Close stops it.
func NewWriter(app Appender, cfg WriterConfig) *Writer {
	if cfg.PerTenant <= 0 {
		cfg.PerTenant = 4096
	}
	if cfg.Total <= 0 {
		cfg.Total = 65536
	}
	if cfg.Batch <= 0 {
		cfg.Batch = 256
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Second
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	w := &Writer{app: app, cfg: cfg, log: cfg.Log, wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}),
		queues: map[string]*queue{}, lost: map[string]int64{}}
	go w.run()
	return w
}

// Add queues ev for its tenant. It never blocks: when the tenant's queue
// is full, or every queue together is and the tenant's is the longest,
// ev is dropped and counted; when every queue together is full and
// another tenant's is longer, that tenant's newest event makes room.
// Events added after Close are dropped.
func (w *Writer) Add(ev Event) {
	w.mu.Lock()
	defer w.mu.Unlock()
	q := w.queues[ev.TenantID]
	switch {
	case w.closed, q != nil && len(q.evs) >= w.cfg.PerTenant:
		w.drop(ev.TenantID, 1)
		return
	case w.total >= w.cfg.Total:
		long := w.longest()
		if long == ev.TenantID {
			w.drop(ev.TenantID, 1)
			return
		}
		lq := w.queues[long]
		lq.evs = lq.evs[:len(lq.evs)-1]
		w.total--
		w.drop(long, 1)
	}
	if q == nil {
		q = &queue{}
		w.queues[ev.TenantID] = q
	}
	if len(q.evs) == 0 {
		w.order = append(w.order, ev.TenantID)
	}
	q.evs = append(q.evs, ev)
	w.total++
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// longest is the tenant with the most events waiting. Precondition: mu.
func (w *Writer) longest() string {
	best, n := "", -1
	for _, t := range w.order {
		if l := len(w.queues[t].evs); l > n {
			best, n = t, l
		}
	}
	return best
}

// drop counts n lost events of tenant. Precondition: mu.
func (w *Writer) drop(tenant string, n int64) {
	w.lost[tenant] += n
	total := w.dropped.Add(n)
	if time.Since(w.warned) > time.Minute {
		w.warned = time.Now()
		w.log.Warn("audit: events dropped (a tenant's queue is full, or the store fails)", "tenant", tenant, "dropped_total", total)
	}
}

// Dropped is how many events the Writer dropped so far.
func (w *Writer) Dropped() int64 { return w.dropped.Load() }

// take returns the next batch: each tenant with events waiting gives its
// oldest ones in turn, one at a time, until the batch is full, so every
// tenant gets the same share of the write; the counts of dropped events
// come first, one event per tenant. Precondition: mu.
func (w *Writer) take() []Event {
	var b []Event
	for t, n := range w.lost {
		b = append(b, Event{TenantID: t, Kind: KindDropped, Detail: map[string]string{"count": strconv.FormatInt(n, 10)}})
		delete(w.lost, t)
	}
	for len(b) < w.cfg.Batch && len(w.order) > 0 {
		w.next %= len(w.order)
		t := w.order[w.next]
		q := w.queues[t]
		b = append(b, q.evs[0])
		q.evs[0] = Event{}
		q.evs = q.evs[1:]
		w.total--
		if len(q.evs) == 0 {
			delete(w.queues, t)
			w.order = append(w.order[:w.next], w.order[w.next+1:]...)
		} else {
			w.next++
		}
	}
	return b
}

func (w *Writer) run() {
	defer close(w.done)
	for {
		w.mu.Lock()
		b := w.take()
		closed := w.closed
		w.mu.Unlock()
		if len(b) == 0 {
			if closed {
				return
			}
			select {
			case <-w.wake:
			case <-w.stop:
			}
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), w.cfg.Timeout)
		err := w.app.AppendAuditBatch(ctx, b)
		cancel()
		if err != nil && w.failed(b, err) {
			// A store that fails is not hammered: the next batch waits a
			// second (meanwhile the queues bound what is held).
			select {
			case <-time.After(time.Second):
			case <-w.stop:
			}
		}
	}
}

// failed counts a batch the store refused as dropped, per tenant (its
// KindDropped events included, whose counts go back in), and reports
// whether the writer goes on.
func (w *Writer) failed(b []Event, err error) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		// Shutting down with a store that fails: what is left is lost.
		w.log.Warn("audit: events could not be written at shutdown", "events", len(b)+w.total, "err", err)
		w.queues, w.order, w.total = map[string]*queue{}, nil, 0
		clear(w.lost)
		return false
	}
	w.log.Warn("audit: write failed; events dropped", "events", len(b), "err", err)
	for _, ev := range b {
		n := int64(1)
		if ev.Kind == KindDropped {
			n, _ = strconv.ParseInt(ev.Detail["count"], 10, 64)
			w.lost[ev.TenantID] += n
			continue
		}
		w.drop(ev.TenantID, n)
	}
	return true
}

// Close writes what is queued (until ctx ends) and stops; later events
// are dropped.
func (w *Writer) Close(ctx context.Context) error {
	w.mu.Lock()
	if !w.closed {
		w.closed = true
		close(w.stop)
	}
	w.mu.Unlock()
	select {
	case <-w.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
