package guard

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"net/url"
	"strings"

	"github.com/sandlot/sandlot/contexts"
)

// TypeSecret is a value the caller declared secret (contexts.WithSecrets):
// whatever it looks like, it is a finding wherever it appears.
const TypeSecret = "SECRET"

// declared holds the forms of a context's declared secret values that are
// searched for: the value itself and its common encodings (base64 in
// both alphabets at the three byte alignments it can take inside a longer
// run, hex in both cases, URL and JSON escaping). Searching for the
// encoded forms catches a value inside base64 or hex of any length, where
// the generic base64 decoder needs a run of 24 characters.
type declared struct {
	needles []string
}

// minNeedle bounds the forms searched for: an alignment of a short value
// leaves few base64 characters that depend on it alone.
const minNeedle = 6

// declaredOf returns the forms of ctx's declared values, nil when there
// are none.
func declaredOf(ctx context.Context) *declared {
	vals := contexts.MaskedValues(ctx)
	if len(vals) == 0 {
		return nil
	}
	d := &declared{}
	seen := map[string]bool{}
	add := func(n string) {
		if len(n) >= minNeedle && !seen[n] {
			seen[n] = true
			d.needles = append(d.needles, n)
		}
	}
	for _, v := range vals {
		add(v)
		if q, err := json.Marshal(v); err == nil {
			add(string(q[1 : len(q)-1]))
		}
		add(url.QueryEscape(v))
		add(url.PathEscape(v))
		add(hex.EncodeToString([]byte(v)))
		add(strings.ToUpper(hex.EncodeToString([]byte(v))))
		for _, enc := range []*base64.Encoding{base64.RawStdEncoding, base64.RawURLEncoding} {
			for k := range 3 {
				add(aligned(enc, v, k))
			}
		}
	}
	return d
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

// scanCtx is scan plus the declared values of ctx.
func (g *Guard) scanCtx(ctx context.Context, s string) []Finding {
	return withDeclared(g.scan(s), declaredOf(ctx), s)
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
