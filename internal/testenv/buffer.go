package testenv

import (
	"bytes"
	"sync"
)

// Buffer is a bytes.Buffer safe for concurrent writers (a logger's, a
// daemon's output) and a test reading what they wrote so far.
type Buffer struct {
	// Max, when above 0, bounds what is kept: writes past it are taken
	// (the writer is never blocked or failed) and dropped, for output as
	// long as the test (a browser's, a child's that runs on).
	Max int

	mu sync.Mutex
	b  bytes.Buffer
}

func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.Max > 0 {
		if room := s.Max - s.b.Len(); room < len(p) {
			s.b.Write(p[:max(room, 0)])
			return len(p), nil
		}
	}
	return s.b.Write(p)
}

// String returns what was written so far.
func (s *Buffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
