package testenv

import (
	"sync/atomic"
	"testing"
	"time"
)

// TestUntil: a condition that comes to hold is waited for; one that never
// does gives false once the bound has passed, not before.
func TestUntil(t *testing.T) {
	var n atomic.Int32
	if !Until(10*time.Second, func() bool { return n.Add(1) >= 5 }) {
		t.Fatal("a condition that held on its fifth poll was not waited for")
	}
	start := time.Now()
	if Until(50*time.Millisecond, func() bool { return false }) {
		t.Fatal("a condition that never held was reported held")
	}
	if d := time.Since(start); d < 50*time.Millisecond {
		t.Fatalf("gave up after %s, before its 50 ms bound", d)
	}
}
