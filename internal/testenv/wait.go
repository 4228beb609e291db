package testenv

import (
	"testing"
	"time"
)

// Until polls cond until it holds or bound has passed, and reports
// whether it held: for a goroutine that may not end its test (a fake's
// hook). The polls start a millisecond apart and slow to 20 ms.
func Until(bound time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(bound)
	pause := time.Millisecond
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(pause)
		pause = min(2*pause, 20*time.Millisecond)
	}
	return true
}

// WaitFor polls cond until it holds, ending t after bound with what it
// waited for: a test waits for the condition it needs, never a snapshot
// of asynchronous work taken right after it started.
func WaitFor(t testing.TB, what string, bound time.Duration, cond func() bool) {
	t.Helper()
	if !Until(bound, cond) {
		t.Fatalf("timed out after %s waiting for %s", bound, what)
	}
}
