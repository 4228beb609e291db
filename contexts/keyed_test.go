package contexts

import (
	"context"
	"runtime"
	"sync"
	"testing"
	"time"
)

// TestKeyedUnlockOnce: a second unlock of a hold is a no-op, even once the
// key's lock (recycled) is held by another caller; the lock of a key
// nobody holds or waits for is dropped.
func TestKeyedUnlockOnce(t *testing.T) {
	var k keyed[string]
	ctx := context.Background()
	unlockA, err := k.lock(ctx, "x")
	if err != nil {
		t.Fatal(err)
	}
	unlockA()
	if n := len(k.m); n != 0 {
		t.Fatalf("%d locks kept after the last unlock", n)
	}
	unlockB, err := k.lock(ctx, "x")
	if err != nil {
		t.Fatal(err)
	}
	unlockA() // must not release B's hold
	if l := k.m["x"]; l == nil || len(l.ch) != 1 || l.refs != 1 {
		t.Fatalf("B's hold released by A's second unlock: %+v", l)
	}
	unlockB()
	unlockB()
	if n := len(k.m); n != 0 {
		t.Fatalf("%d locks kept after the last unlock", n)
	}
}

// TestKeyedExcludes: holders of one key never overlap; a waiter whose ctx
// ends gives up without taking the lock.
func TestKeyedExcludes(t *testing.T) {
	var k keyed[string]
	var wg sync.WaitGroup
	var mu sync.Mutex
	inside := 0
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 200 {
				unlock, err := k.lock(context.Background(), "x")
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				inside++
				if inside != 1 {
					t.Errorf("%d holders at once", inside)
				}
				mu.Unlock()
				runtime.Gosched() // another goroutine gets its turn while this one holds the key
				mu.Lock()
				inside--
				mu.Unlock()
				unlock()
			}
		}()
	}
	wg.Wait()
	unlock, err := k.lock(context.Background(), "x")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := k.lock(ctx, "x"); err == nil {
		t.Fatal("took a held lock")
	}
	// A waiter blocked on the held key, then cancelled, gives up without
	// taking it; the holder's unlock then leaves no lock behind.
	ctx, cancel = context.WithCancel(context.Background())
	gaveUp := make(chan error, 1)
	go func() {
		_, err := k.lock(ctx, "x")
		gaveUp <- err
	}()
	waitWaiters(t, &k, "x", 2)
	cancel()
	if err := <-gaveUp; err == nil {
		t.Fatal("a cancelled waiter took a held lock")
	}
	unlock()
	if n := len(k.m); n != 0 {
		t.Fatalf("%d locks kept after the last unlock", n)
	}
}

// waitWaiters waits, bounded, until key's lock counts n holders and waiters.
func waitWaiters(t *testing.T, k *keyed[string], key string, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		k.mu.Lock()
		l := k.m[key]
		refs := 0
		if l != nil {
			refs = l.refs
		}
		k.mu.Unlock()
		if refs == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("key %q counts %d holders and waiters, want %d", key, refs, n)
		}
		time.Sleep(time.Millisecond)
	}
}
