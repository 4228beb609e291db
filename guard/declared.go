package guard

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/sandlot/sandlot/contexts"
)

// TypeSecret is a known value: one the caller declared secret
// (contexts.WithSecrets) or one of the tenant's stored secrets
// (Config.Known). Whatever it looks like, it is a finding wherever it
// appears, in any of its forms.
const TypeSecret = "SECRET"

// declared holds the forms of the known values that are searched for:
// the value itself and its common encodings (base64 in both alphabets at
// the three byte alignments it can take inside a longer run, hex in both
// cases, URL and JSON escaping). Searching for the encoded forms catches
// a value inside base64 or hex of any length, where the generic base64
// decoder needs a run of 24 characters. The guard is the one owner of
// this masking: declared and stored values are one needle set, searched
// in one pass with the detectors.
type declared struct {
	needles []string
}

// minNeedle bounds the encoded forms searched for: an alignment of a
// short value leaves few base64 characters that depend on it alone. The
// value itself is always searched for (declared values have at least
// contexts.MinSecretLen bytes, stored ones network/secret.MinValue).
const minNeedle = 6

// knownTTL is how long a tenant's stored values are cached (Forget drops
// them at once).
const knownTTL = 5 * time.Second

// maxKnownTenants bounds the cache of stored values.
const maxKnownTenants = 4096

// knownForms is a tenant's cached stored values, as forms.
type knownForms struct {
	at    time.Time
	forms []string
}

// Forget makes tenantID's cached stored values stale, after a change, so
// the next redactor looks them up again (and keeps them only if the
// lookup fails).
func (g *Guard) Forget(tenantID string) {
	g.knownMu.Lock()
	if c, ok := g.knownCache[tenantID]; ok {
		c.at = time.Time{}
		g.knownCache[tenantID] = c
	}
	g.knownMu.Unlock()
}

// stored returns the forms of tenantID's stored values (Config.Known),
// cached for knownTTL. A failed lookup keeps the last known forms (or
// none): output is not held on the store.
func (g *Guard) stored(ctx context.Context, tenantID string) []string {
	if g.known == nil || tenantID == "" {
		return nil
	}
	g.knownMu.Lock()
	c, ok := g.knownCache[tenantID]
	g.knownMu.Unlock()
	if ok && time.Since(c.at) < knownTTL {
		return c.forms
	}
	vals, err := g.known(ctx, tenantID)
	if err != nil {
		return c.forms
	}
	c = knownForms{at: time.Now(), forms: formsOf(nil, vals)}
	g.knownMu.Lock()
	if len(g.knownCache) >= maxKnownTenants {
		clear(g.knownCache)
	}
	g.knownCache[tenantID] = c
	g.knownMu.Unlock()
	return c.forms
}

// declaredOf returns the forms of the values known for tenantID's output
// under ctx (its declared values, contexts.MaskedValues, and the tenant's
// stored ones), nil when there are none.
func (g *Guard) declaredOf(ctx context.Context, tenantID string) *declared {
	stored := g.stored(ctx, tenantID)
	vals := contexts.MaskedValues(ctx)
	switch {
	case len(vals) == 0 && len(stored) == 0:
		return nil
	case len(vals) == 0:
		return &declared{needles: stored} // shared, read only
	}
	return &declared{needles: formsOf(stored, vals)}
}

// formsOf appends to have the forms of vals that it does not hold yet.
func formsOf(have []string, vals []string) []string {
	out := slices.Clone(have)
	seen := make(map[string]bool, len(have))
	for _, n := range have {
		seen[n] = true
	}
	add := func(n string, min int) {
		if len(n) >= min && !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	for _, v := range vals {
		add(v, 1)
		if q, err := json.Marshal(v); err == nil {
			add(string(q[1:len(q)-1]), minNeedle)
		}
		add(url.QueryEscape(v), minNeedle)
		add(url.PathEscape(v), minNeedle)
		add(hex.EncodeToString([]byte(v)), minNeedle)
		add(strings.ToUpper(hex.EncodeToString([]byte(v))), minNeedle)
		for _, enc := range []*base64.Encoding{base64.RawStdEncoding, base64.RawURLEncoding} {
			for k := range 3 {
				add(aligned(enc, v, k), minNeedle)
			}
		}
	}
	return out
}

// aligned returns the base64 characters that depend on v alone when v
// starts k bytes (0..2) into a 3-byte group of a longer encoded text.
func aligned(enc *base64.Encoding, v string, k int) string {
	b := make([]byte, k+len(v))
	copy(b[k:], v)
	s := enc.EncodeToString(b)
	start := (8*k + 5) / 6 // first character with no bit of the k bytes before
	end := 8 * (k + len(v)) / 6
	if start >= end {
		return ""
	}
	return s[start:end]
}

// find returns every occurrence of a form in s.
func (d *declared) find(s string) []Finding {
	if d == nil {
		return nil
	}
	var fs []Finding
	for _, n := range d.needles {
		for i := 0; ; {
			j := strings.Index(s[i:], n)
			if j < 0 {
				break
			}
			fs = append(fs, Finding{Type: TypeSecret, Start: i + j, End: i + j + len(n), Confidence: 1})
			i += j + 1
		}
	}
	return fs
}

// partial returns the start of the longest tail of s that is the start of
// a form (and so may be completed by the next write), or len(s).
func (d *declared) partial(s string) int {
	p := len(s)
	if d == nil {
		return p
	}
	for _, n := range d.needles {
		for i := max(0, len(s)-len(n)+1); i < p; i++ {
			if strings.HasPrefix(n, s[i:]) {
				p = i
				break
			}
		}
	}
	return p
}

// scanCtx is scan plus the values known for tenantID under ctx.
func (g *Guard) scanCtx(ctx context.Context, tenantID, s string) []Finding {
	return withDeclared(g.scanEnts(s, g.entsOf(ctx, tenantID)), g.declaredOf(ctx, tenantID), s)
}

// in reports whether any form occurs in b.
func (d *declared) in(b []byte) bool {
	if d == nil {
		return false
	}
	for _, n := range d.needles {
		if bytes.Contains(b, []byte(n)) {
			return true
		}
	}
	return false
}

// withDeclared adds d's findings in s to fs (resolved).
func withDeclared(fs []Finding, d *declared, s string) []Finding {
	if d == nil {
		return fs
	}
	more := d.find(s)
	if len(more) == 0 {
		return fs
	}
	return resolve(append(fs, more...))
}
