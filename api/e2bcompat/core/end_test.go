package core

import (
	"strconv"
	"testing"
)

// TestEndRemembers: a sandbox End was told of keeps no token a call under
// way would still hand it (RememberToken), and End remembers the last
// maxEnded sandboxes, forgetting the oldest first.
func TestEndRemembers(t *testing.T) {
	e := New(Config{})
	var told []string
	e.OnForget(func(sid string) { told = append(told, sid) })
	e.RememberToken("a", "tok-1")
	e.End("a")
	if e.Holds("a") || len(told) != 1 || told[0] != "a" {
		t.Fatalf("after End: holds %v, surfaces told %v", e.Holds("a"), told)
	}
	e.RememberToken("a", "tok-2") // a create or connect that was under way
	if e.Holds("a") {
		t.Fatal("a token of an ended sandbox was kept")
	}
	for i := range maxEnded {
		e.End("s" + strconv.Itoa(i))
	}
	if e.Ended("a") || !e.Ended("s0") || !e.Ended("s"+strconv.Itoa(maxEnded-1)) || len(e.ended) != maxEnded {
		t.Fatalf("remembered %d ended sandboxes; the oldest (a) %v, s0 %v", len(e.ended), e.Ended("a"), e.Ended("s0"))
	}
}
