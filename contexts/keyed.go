package contexts

import (
	"context"
	"sync"
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

// lock acquires k's mutex and returns its unlock function.
func (k *keyed[K]) lock(ctx context.Context, key K) (func(), error) {
	k.mu.Lock()
	if k.m == nil {
		k.m = map[K]*keyedLock{}
	}
	l := k.m[key]
	if l == nil {
		l = &keyedLock{ch: make(chan struct{}, 1)}
		k.m[key] = l
	}
	l.refs++
	k.mu.Unlock()

	release := func() {
		k.mu.Lock()
		l.refs--
		if l.refs == 0 {
			delete(k.m, key)
		}
		k.mu.Unlock()
	}
	select {
	case l.ch <- struct{}{}:
	case <-ctx.Done():
		release()
		return nil, ctx.Err()
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			<-l.ch
			release()
		})
	}, nil
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
