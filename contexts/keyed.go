package contexts

import (
	"context"
	"sync"
	"sync/atomic"
)

// keyed is a set of mutexes, one per key, created on demand and dropped
// when nobody holds or waits for them. Lock waits honour ctx.
type keyed[K comparable] struct {
	mu sync.Mutex
	m  map[K]*keyedLock
}

type keyedLock struct {
	ch   chan struct{} // holds one token while locked
	refs int           // holders and waiters; guarded by keyed.mu
}

// keyedLocks recycles the locks of keys nobody holds any more: a warm
// call takes and drops its identity's lock once, and made one each time.
var keyedLocks = sync.Pool{New: func() any { return &keyedLock{ch: make(chan struct{}, 1)} }}

// keyedHold is one holder's lock, unlocked at most once.
type keyedHold[K comparable] struct {
	k    *keyed[K]
	l    *keyedLock
	key  K
	done atomic.Bool
}

func (h *keyedHold[K]) unlock() {
	if h.done.CompareAndSwap(false, true) {
		<-h.l.ch
		h.k.release(h.key, h.l)
	}
}

// lock acquires k's mutex and returns its unlock function, which may be
// called more than once.
func (k *keyed[K]) lock(ctx context.Context, key K) (func(), error) {
	k.mu.Lock()
	if k.m == nil {
		k.m = map[K]*keyedLock{}
	}
	l := k.m[key]
	if l == nil {
		l = keyedLocks.Get().(*keyedLock)
		k.m[key] = l
	}
	l.refs++
	k.mu.Unlock()

	select {
	case l.ch <- struct{}{}:
	case <-ctx.Done():
		k.release(key, l)
		return nil, ctx.Err()
	}
	h := &keyedHold[K]{k: k, l: l, key: key}
	return h.unlock, nil
}

// release drops one holder or waiter of l, key's lock; the last one
// drops the lock (its channel empty: nobody holds it).
func (k *keyed[K]) release(key K, l *keyedLock) {
	k.mu.Lock()
	l.refs--
	last := l.refs == 0
	if last {
		delete(k.m, key)
	}
	k.mu.Unlock()
	if last {
		keyedLocks.Put(l)
	}
}

// sem is a mutex whose Lock honours ctx.
type sem chan struct{}

func (s sem) lock(ctx context.Context) error {
	select {
	case s <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s sem) unlock() { <-s }
