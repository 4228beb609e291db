package kernels

import (
	"bytes"

	"github.com/sandlot/sandlot/agent"
)

// The python driver writes the result of most cells in one of two exact
// layouts (json.dumps's separators): no value, or one plain value's text.
// decodePlainResult reads those without reflection; json.Unmarshal stays
// the reference and takes every other line (escapes, non-ASCII, rich
// results, errors, other drivers). The line comes from the sandbox's
// kernel, which user code can write to: the fast path accepts only what
// encoding/json decodes to the same driverResult (FuzzPlainResult).
var (
	plainHead    = []byte(`{"id": `)
	plainNone    = []byte(`, "results": [], "error": null}`)
	plainText    = []byte(`, "results": [{"text": "`)
	plainTextEnd = []byte(`", "main": true}], "error": null}`)
)

// decodePlainResult decodes line into dr when it has one of the plain
// layouts and reports whether it did.
func decodePlainResult(line []byte, dr *driverResult) bool {
	if !bytes.HasPrefix(line, plainHead) {
		return false
	}
	rest := line[len(plainHead):]
	id, n, ok := plainInt(rest)
	if !ok {
		return false
	}
	rest = rest[n:]
	switch {
	case bytes.Equal(rest, plainNone):
		*dr = driverResult{ID: &id, Results: []agent.RichResult{}}
		return true
	case bytes.HasPrefix(rest, plainText) && bytes.HasSuffix(rest, plainTextEnd) && len(rest) >= len(plainText)+len(plainTextEnd):
		text := rest[len(plainText) : len(rest)-len(plainTextEnd)]
		for _, c := range text {
			if c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
				return false // escapes, control bytes, non-ASCII: encoding/json
			}
		}
		*dr = driverResult{ID: &id, Results: []agent.RichResult{{Text: string(text), Main: true}}}
		return true
	}
	return false
}

// plainInt reads a JSON integer of at most 18 digits (no overflow) at the
// start of b: its value and length.
func plainInt(b []byte) (int64, int, bool) {
	i := 0
	neg := len(b) > 0 && b[0] == '-'
	if neg {
		i++
	}
	start := i
	var v int64
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		if i-start == 18 {
			return 0, 0, false
		}
		v = v*10 + int64(b[i]-'0')
		i++
	}
	digits := i - start
	if digits == 0 || (digits > 1 && b[start] == '0') {
		return 0, 0, false
	}
	if neg {
		v = -v
	}
	return v, i, true
}
