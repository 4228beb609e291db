package stack

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/sandlot/sandlot/contexts"
)

// SecretGuard masks the values of a tenant's secrets in everything that
// leaves its sandboxes, before the inner guard's own detectors run. A
// sandbox never receives a value (the proxy scrubs responses), so this is
// the second wall: a value that got in some other way (a server that
// transformed and echoed it back in a form the scrubber missed and then
// the program undid, a value pasted by hand) still does not come out.
// Text and streams show the secret's placeholder; files keep their length
// (the value's bytes become '*').
type SecretGuard struct {
	inner  contexts.Guard
	lookup func(ctx context.Context, tenantID string) ([]Secret, error)
	ttl    time.Duration

	mu    sync.Mutex
	cache map[string]cachedValues
}

type cachedValues struct {
	at   time.Time
	vals []maskValue
	max  int // longest value
}

type maskValue struct{ value, placeholder string }

// NewSecretGuard wraps inner; lookup returns a tenant's secrets with their
// values (SecretsFunc with nil names). Lookups are cached for 5 s;
// Forget drops a tenant's at once (after a change).
func NewSecretGuard(inner contexts.Guard, lookup func(ctx context.Context, tenantID string) ([]Secret, error)) *SecretGuard {
	return &SecretGuard{inner: inner, lookup: lookup, ttl: 5 * time.Second, cache: map[string]cachedValues{}}
}

// Forget drops tenantID's cached values.
func (g *SecretGuard) Forget(tenantID string) {
	g.mu.Lock()
	delete(g.cache, tenantID)
	g.mu.Unlock()
}

func (g *SecretGuard) values(ctx context.Context, tenantID string) cachedValues {
	g.mu.Lock()
	c, ok := g.cache[tenantID]
	g.mu.Unlock()
	if ok && time.Since(c.at) < g.ttl {
		return c
	}
	ss, err := g.lookup(ctx, tenantID)
	if err != nil {
		return c // the last known values, or none: output is not held on the store
	}
	c = cachedValues{at: time.Now()}
	for _, s := range ss {
		c.vals = append(c.vals, maskValue{s.Value, s.Placeholder()})
		c.max = max(c.max, len(s.Value))
	}
	g.mu.Lock()
	if len(g.cache) > 4096 {
		clear(g.cache)
	}
	g.cache[tenantID] = c
	g.mu.Unlock()
	return c
}

func (c cachedValues) mask(s string) string {
	for _, v := range c.vals {
		s = strings.ReplaceAll(s, v.value, v.placeholder)
	}
	return s
}

func (c cachedValues) maskBytes(p []byte) []byte {
	for _, v := range c.vals {
		if bytes.Contains(p, []byte(v.value)) {
			p = bytes.ReplaceAll(p, []byte(v.value), bytes.Repeat([]byte{'*'}, len(v.value)))
		}
	}
	return p
}

// Text implements contexts.Guard.
func (g *SecretGuard) Text(ctx context.Context, tenantID, s string) string {
	return g.inner.Text(ctx, tenantID, g.values(ctx, tenantID).mask(s))
}

// Stream implements contexts.Guard.
func (g *SecretGuard) Stream(ctx context.Context, tenantID string) contexts.StreamRedactor {
	inner := g.inner.Stream(ctx, tenantID)
	c := g.values(ctx, tenantID)
	if len(c.vals) == 0 {
		return inner
	}
	return &secretStream{inner: inner, c: c}
}

// File implements contexts.Guard.
func (g *SecretGuard) File(ctx context.Context, tenantID string) contexts.FileRedactor {
	inner := g.inner.File(ctx, tenantID)
	c := g.values(ctx, tenantID)
	if len(c.vals) == 0 {
		return inner
	}
	return &secretFile{inner: inner, c: c}
}

// Image implements contexts.Guard: an image holding a value is withheld.
func (g *SecretGuard) Image(ctx context.Context, tenantID, format string, data []byte) ([]byte, string) {
	for _, v := range g.values(ctx, tenantID).vals {
		if bytes.Contains(data, []byte(v.value)) {
			return nil, "[image withheld: it holds a secret]"
		}
	}
	return g.inner.Image(ctx, tenantID, format, data)
}

// secretStream holds back a tail shorter than the longest value, so a
// value split across chunks is still masked; it cuts on rune boundaries.
type secretStream struct {
	inner   contexts.StreamRedactor
	c       cachedValues
	pending string
}

func (s *secretStream) Write(chunk string) string {
	buf := s.c.mask(s.pending + chunk)
	cut := max(len(buf)-(s.c.max-1), 0)
	for cut > 0 && cut < len(buf) && !utf8.RuneStart(buf[cut]) {
		cut--
	}
	s.pending = buf[cut:]
	return s.inner.Write(buf[:cut])
}

func (s *secretStream) Flush() string {
	out := s.inner.Write(s.c.mask(s.pending))
	s.pending = ""
	return out + s.inner.Flush()
}

type secretFile struct {
	inner   contexts.FileRedactor
	c       cachedValues
	pending []byte
}

func (f *secretFile) Write(p []byte) []byte {
	buf := f.c.maskBytes(append(f.pending, p...))
	cut := max(len(buf)-(f.c.max-1), 0)
	f.pending = append([]byte(nil), buf[cut:]...)
	return f.inner.Write(buf[:cut])
}

func (f *secretFile) Flush() []byte {
	out := f.inner.Write(f.c.maskBytes(f.pending))
	f.pending = nil
	return append(out, f.inner.Flush()...)
}
