package testenv

import (
	"strings"
	"testing"
)

func TestBufferMax(t *testing.T) {
	b := &Buffer{Max: 5}
	for _, w := range []string{"abc", "defg", "hij"} {
		if n, err := b.Write([]byte(w)); n != len(w) || err != nil {
			t.Fatalf("Write(%q) = %d, %v; want %d, nil (a bounded buffer still takes every write)", w, n, err, len(w))
		}
	}
	if got := b.String(); got != "abcde" {
		t.Errorf("kept %q, want the first 5 bytes %q", got, "abcde")
	}

	var u Buffer // no Max: keeps everything
	long := strings.Repeat("x", 1<<20)
	u.Write([]byte(long))
	if u.String() != long {
		t.Errorf("an unbounded Buffer kept %d bytes of %d", len(u.String()), len(long))
	}
}
