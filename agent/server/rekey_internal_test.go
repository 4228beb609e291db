package server

import (
	"bytes"
	"testing"
)

// TestRekeyZeroesOldKey: a rekey leaves the old key (a fork's source's)
// nowhere in the agent: the bytes it was given at start read zero after,
// and the new key is the one asked. Before, Config.Key kept the source's.
func TestRekeyZeroesOldKey(t *testing.T) {
	old := bytes.Repeat([]byte{7}, 32)
	s := New(Config{Key: old})
	s.keys.mu.Lock()
	s.keys.replace(bytes.Repeat([]byte{9}, 32))
	s.keys.mu.Unlock()
	if !bytes.Equal(s.cfg.Key, make([]byte, 32)) {
		t.Fatalf("the old key after a rekey: %x, want zeros", s.cfg.Key)
	}
	if got := s.key(); !bytes.Equal(got, bytes.Repeat([]byte{9}, 32)) {
		t.Fatalf("key after a rekey = %x", got)
	}
}
