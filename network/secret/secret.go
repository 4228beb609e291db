// Package secret keeps credentials out of sandboxes. A tenant registers a
// secret scoped to hosts; the sandbox is given only its placeholder
// (sandlot-secret-<id>), and the egress proxy swaps the placeholder for
// the value in requests to those hosts and the value back for the
// placeholder in everything that returns. A Secret never prints its value.
package secret

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/network/policy"
)

// Prefix starts every placeholder.
const Prefix = "sandlot-secret-"

// Bounds on a sandbox's secrets.
const (
	MaxPerSandbox = 64
	MaxValue      = 8 << 10
	MinValue      = 4 // shorter values would be scrubbed out of every response
	MaxHosts      = 16
)

// Secret is a value that may only travel to Hosts.
type Secret struct {
	ID    string   // lower-case letters, digits and '-'; the placeholder is Prefix+ID
	Hosts []string // normalized domain patterns: "api.example.com", "*.example.com"
	Value string
}

// New returns a secret with a random ID.
func New(hosts []string, value string) (Secret, error) {
	var b [12]byte
	if _, err := rand.Read(b[:]); err != nil {
		return Secret{}, err
	}
	s := Secret{ID: hex.EncodeToString(b[:]), Hosts: hosts, Value: value}
	return s, s.Validate()
}

// Placeholder is what the sandbox sees instead of the value.
func (s Secret) Placeholder() string { return Prefix + s.ID }

// String names the secret without its value.
func (s Secret) String() string {
	return fmt.Sprintf("secret %s for %s", s.ID, strings.Join(s.Hosts, ","))
}

// GoString is String, so %#v does not print the value either.
func (s Secret) GoString() string { return s.String() }

// LogValue keeps the value out of structured logs.
func (s Secret) LogValue() slog.Value {
	return slog.GroupValue(slog.String("id", s.ID), slog.String("hosts", strings.Join(s.Hosts, ",")))
}

// Validate checks the ID, the hosts and the value's bounds.
func (s Secret) Validate() error {
	if s.ID == "" || len(s.ID) > 64 {
		return invalid("secret id must have 1 to 64 characters")
	}
	for _, c := range s.ID {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return invalid("secret id %q: lower-case letters, digits and '-' only", s.ID)
		}
	}
	if len(s.Hosts) == 0 || len(s.Hosts) > MaxHosts {
		return invalid("secret %s: 1 to %d hosts", s.ID, MaxHosts)
	}
	for _, h := range s.Hosts {
		n, err := policy.NormalizeDomain(h, true)
		if err != nil {
			return fmt.Errorf("secret %s: %w", s.ID, err)
		}
		if n != h {
			return invalid("secret %s: host %q is not normalized (want %q)", s.ID, h, n)
		}
	}
	if len(s.Value) < MinValue || len(s.Value) > MaxValue {
		return invalid("secret %s: the value must have %d to %d bytes", s.ID, MinValue, MaxValue)
	}
	if strings.ContainsAny(s.Value, "\r\n\x00") {
		return invalid("secret %s: the value may not hold CR, LF or NUL (it travels in headers)", s.ID)
	}
	if strings.Contains(s.Value, Prefix) {
		return invalid("secret %s: the value may not hold a placeholder", s.ID)
	}
	return nil
}

// MatchHost reports whether the secret may travel to name (normalized).
func (s Secret) MatchHost(name string) bool {
	for _, h := range s.Hosts {
		if policy.MatchDomain(h, name) {
			return true
		}
	}
	return false
}

// Set is one sandbox's secrets. It is immutable.
type Set struct {
	secrets []Secret
	scrub   *Replacer
}

// NewSet validates ss (unique IDs, bounds) and returns the set.
func NewSet(ss []Secret) (*Set, error) {
	if len(ss) > MaxPerSandbox {
		return nil, invalid("%d secrets, at most %d per sandbox", len(ss), MaxPerSandbox)
	}
	seen := map[string]bool{}
	var pairs []string
	for _, s := range ss {
		if err := s.Validate(); err != nil {
			return nil, err
		}
		if seen[s.ID] {
			return nil, invalid("secret %s registered twice", s.ID)
		}
		seen[s.ID] = true
		pairs = append(pairs, s.Value, s.Placeholder())
	}
	return &Set{secrets: append([]Secret(nil), ss...), scrub: NewReplacer(pairs...)}, nil
}

// Len is the number of secrets.
func (s *Set) Len() int {
	if s == nil {
		return 0
	}
	return len(s.secrets)
}

// For returns the replacer that puts values in place of the placeholders
// of the secrets scoped to host, or nil when none is.
func (s *Set) For(host string) *Replacer {
	if s == nil {
		return nil
	}
	var pairs []string
	for _, sec := range s.secrets {
		if sec.MatchHost(host) {
			pairs = append(pairs, sec.Placeholder(), sec.Value)
		}
	}
	if len(pairs) == 0 {
		return nil
	}
	return NewReplacer(pairs...)
}

// Scrubber returns the replacer that puts placeholders in place of every
// value of the set, for what goes back to the sandbox.
func (s *Set) Scrubber() *Replacer {
	if s == nil {
		return nil
	}
	return s.scrub
}

// Replacer replaces byte strings, leftmost first (the longest at a tie),
// in strings and in streams.
type Replacer struct {
	old, new [][]byte
	max      int
}

// NewReplacer takes old, new pairs.
func NewReplacer(pairs ...string) *Replacer {
	r := &Replacer{}
	for i := 0; i+1 < len(pairs); i += 2 {
		if pairs[i] == "" {
			continue
		}
		r.old = append(r.old, []byte(pairs[i]))
		r.new = append(r.new, []byte(pairs[i+1]))
		r.max = max(r.max, len(pairs[i]))
	}
	return r
}

// Empty reports whether r replaces nothing.
func (r *Replacer) Empty() bool { return r == nil || len(r.old) == 0 }

// first finds the leftmost match in b: its offset and pattern index.
func (r *Replacer) first(b []byte) (int, int) {
	at, which := -1, -1
	for i, o := range r.old {
		j := bytes.Index(b, o)
		if j < 0 {
			continue
		}
		if at < 0 || j < at || (j == at && len(o) > len(r.old[which])) {
			at, which = j, i
		}
	}
	return at, which
}

// longerMayFollow reports whether a pattern longer than pattern w starts
// with all of tail (so more input could make it the leftmost-longest).
func (r *Replacer) longerMayFollow(tail []byte, w int) bool {
	for _, o := range r.old {
		if len(o) > len(r.old[w]) && len(tail) < len(o) && bytes.HasPrefix(o, tail) {
			return true
		}
	}
	return false
}

// Bytes returns b with every match replaced, and the number of matches.
func (r *Replacer) Bytes(b []byte) ([]byte, int) {
	if r.Empty() {
		return b, 0
	}
	var out []byte
	n := 0
	for {
		at, w := r.first(b)
		if at < 0 {
			if n == 0 {
				return b, 0
			}
			return append(out, b...), n
		}
		out = append(append(out, b[:at]...), r.new[w]...)
		b = b[at+len(r.old[w]):]
		n++
	}
}

// String is Bytes for strings.
func (r *Replacer) String(s string) (string, int) {
	if r.Empty() {
		return s, 0
	}
	b, n := r.Bytes([]byte(s))
	if n == 0 {
		return s, 0
	}
	return string(b), n
}

// Reader returns src with every match replaced, as it streams: it holds
// back at most the longest pattern's length minus one byte.
func (r *Replacer) Reader(src io.Reader) io.Reader {
	if r.Empty() {
		return src
	}
	return &streamReplacer{r: r, src: src}
}

type streamReplacer struct {
	r    *Replacer
	src  io.Reader
	base []byte // backing of pend, reused
	pend []byte // read, not yet matched; always base[:len(pend)]
	obuf []byte // backing of out, reused
	out  []byte // replaced, not yet returned
	err  error
}

const streamChunk = 32 << 10

func (s *streamReplacer) Read(p []byte) (int, error) {
	for len(s.out) == 0 {
		if s.err != nil {
			if len(s.pend) > 0 {
				s.out, _ = s.r.Bytes(s.pend)
				s.pend = nil
				continue
			}
			return 0, s.err
		}
		if s.base == nil {
			s.base = make([]byte, streamChunk+s.r.max)
			s.pend = s.base[:0]
		}
		n, err := s.src.Read(s.base[len(s.pend):])
		s.pend = s.base[:len(s.pend)+n]
		s.err = err
		s.drain()
	}
	n := copy(p, s.out)
	s.out = s.out[n:]
	return n, nil
}

// drain moves to out everything of pend that no match can still span,
// and the rest to the front of base.
func (s *streamReplacer) drain() {
	s.obuf = s.obuf[:0]
	pend := s.pend
	held := false
	for {
		at, w := s.r.first(pend)
		if at < 0 {
			break
		}
		if s.err == nil && s.r.longerMayFollow(pend[at:], w) {
			// A longer pattern may match here once more arrives.
			s.obuf = append(s.obuf, pend[:at]...)
			pend = pend[at:]
			held = true
			break
		}
		s.obuf = append(append(s.obuf, pend[:at]...), s.r.new[w]...)
		pend = pend[at+len(s.r.old[w]):]
	}
	if keep := s.r.max - 1; !held && len(pend) > keep {
		cut := len(pend) - keep
		s.obuf = append(s.obuf, pend[:cut]...)
		pend = pend[cut:]
	}
	s.pend = s.base[:copy(s.base, pend)]
	s.out = s.obuf
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("%s: %w", fmt.Sprintf(format, args...), errdefs.ErrInvalidArgument)
}
