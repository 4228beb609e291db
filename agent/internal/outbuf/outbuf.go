// Package outbuf keeps a bounded prefix of a process's output stream and
// hands back UTF-8-safe pieces for streaming.
package outbuf

import "unicode/utf8"

// DefaultMax is the per-stream cap when the caller names none.
const DefaultMax = 1 << 20

// Buffer keeps the first Max bytes written to it (cut at a rune boundary)
// and records whether anything was dropped. Not safe for concurrent use.
type Buffer struct {
	max       int
	buf       []byte
	carry     []byte // an incomplete UTF-8 sequence held back from streaming
	truncated bool
}

// New returns a Buffer keeping at most max bytes (DefaultMax when max <= 0
// or larger than DefaultMax).
func New(max int64) *Buffer {
	if max <= 0 || max > DefaultMax {
		max = DefaultMax
	}
	return &Buffer{max: int(max)}
}

// Write keeps what fits and returns the newly kept bytes that are safe to
// stream now (complete runes only; an incomplete tail waits for the next
// Write or Flush).
func (b *Buffer) Write(p []byte) string {
	if b.truncated {
		return ""
	}
	room := b.max - len(b.buf)
	if len(p) > room {
		p = p[:room]
		// Cut at a rune start so the kept text stays valid UTF-8.
		if ls := lastRuneStart(p); ls >= 0 && !utf8.FullRune(p[ls:]) {
			p = p[:ls]
		}
		b.truncated = true
	}
	b.buf = append(b.buf, p...)
	s := append(b.carry, p...)
	b.carry = nil
	cut := len(s)
	if ls := lastRuneStart(s); ls >= 0 && !utf8.FullRune(s[ls:]) {
		cut = ls
	}
	if cut < len(s) {
		b.carry = append([]byte(nil), s[cut:]...)
	}
	return string(s[:cut])
}

func lastRuneStart(p []byte) int {
	for i := len(p) - 1; i >= 0 && i >= len(p)-utf8.UTFMax; i-- {
		if utf8.RuneStart(p[i]) {
			return i
		}
	}
	return -1
}

// Flush returns the held-back tail (which may be invalid UTF-8).
func (b *Buffer) Flush() string {
	s := string(b.carry)
	b.carry = nil
	return s
}

// String returns everything kept.
func (b *Buffer) String() string { return string(b.buf) }

// Truncated reports whether output was dropped.
func (b *Buffer) Truncated() bool { return b.truncated }

// Len is the number of bytes kept.
func (b *Buffer) Len() int { return len(b.buf) }
