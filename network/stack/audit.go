package stack

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sandlot/sandlot/network/audit"
)

// AuditQueue carries events from the connections' goroutines to a writer
// (the store's audit trail) on one goroutine of its own, so a slow store
// never holds a sandbox's connection. When Size events wait, new ones are
// dropped and counted (Dropped), and the drop is logged once a minute:
// the trail is best effort under a flood, the connections are not.
type AuditQueue struct {
	ch      chan queued
	write   func(ctx context.Context, ev audit.Event, contextID string) error
	log     *slog.Logger
	dropped atomic.Int64
	done    chan struct{}
	once    sync.Once

	mu       sync.Mutex
	lastWarn time.Time
}

type queued struct {
	ev  audit.Event
	ctx string
}

// NewAuditQueue starts a queue of size events (0: 4096) in front of write.
func NewAuditQueue(size int, write func(ctx context.Context, ev audit.Event, contextID string) error, log *slog.Logger) *AuditQueue {
	if size <= 0 {
		size = 4096
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	q := &AuditQueue{ch: make(chan queued, size), write: write, log: log, done: make(chan struct{})}
	go q.run()
	return q
}

// Func is the AuditFunc that enqueues.
func (q *AuditQueue) Func() AuditFunc {
	return func(ev audit.Event, contextID string) {
		select {
		case q.ch <- queued{ev, contextID}:
		default:
			n := q.dropped.Add(1)
			q.mu.Lock()
			warn := time.Since(q.lastWarn) > time.Minute
			if warn {
				q.lastWarn = time.Now()
			}
			q.mu.Unlock()
			if warn {
				q.log.Warn("network audit: queue full, events dropped", "dropped_total", n)
			}
		}
	}
}

// Dropped is how many events the queue dropped.
func (q *AuditQueue) Dropped() int64 { return q.dropped.Load() }

func (q *AuditQueue) run() {
	defer close(q.done)
	for it := range q.ch {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if err := q.write(ctx, it.ev, it.ctx); err != nil {
			q.log.Warn("network audit: write failed", "sandbox", it.ev.SandboxID, "err", err)
		}
		cancel()
	}
}

// Close writes what is queued (until ctx ends) and stops. Call it after
// the stack is closed: events sent afterwards panic.
func (q *AuditQueue) Close(ctx context.Context) error {
	q.once.Do(func() { close(q.ch) })
	select {
	case <-q.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
