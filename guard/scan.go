package guard

import (
	"math"
	"sort"
	"strings"

	"golang.org/x/text/unicode/norm"
)

// Byte classes for the scanners.
const (
	cDigit = 1 << iota
	cUpper
	cLower
	cWord  // [A-Za-z0-9_-]
	cB64   // [A-Za-z0-9+/_-]
	cHex   // [0-9A-Fa-f]
	cLocal // email local part [A-Za-z0-9._%+-]
	cHost  // host name [A-Za-z0-9.-]
	cURL   // printable ASCII but "'<>`\ and space
	cOp    // = : , > (assignment operators)

	cAlpha = cUpper | cLower
	cAlnum = cAlpha | cDigit
)

var class [256]uint16

func init() {
	for c := 0; c < 256; c++ {
		var k uint16
		switch {
		case c >= '0' && c <= '9':
			k |= cDigit | cHex
		case c >= 'A' && c <= 'Z':
			k |= cUpper
		case c >= 'a' && c <= 'z':
			k |= cLower
		}
		if (c >= 'A' && c <= 'F') || (c >= 'a' && c <= 'f') {
			k |= cHex
		}
		if k&cAlnum != 0 {
			k |= cWord | cB64 | cLocal | cHost
		}
		switch c {
		case '_':
			k |= cWord | cB64 | cLocal
		case '-':
			k |= cWord | cB64 | cLocal | cHost
		case '+':
			k |= cB64 | cLocal
		case '/':
			k |= cB64
		case '.':
			k |= cLocal | cHost
		case '%':
			k |= cLocal
		}
		if c == '=' || c == ':' || c == ',' || c == '>' {
			k |= cOp
		}
		if c > ' ' && c < 0x7f && strings.IndexByte("\"'<>`\\", byte(c)) < 0 {
			k |= cURL
		}
		class[c] = k
	}
}

func is(c byte, k uint16) bool { return class[c]&k != 0 }

// maxDepth bounds base64-in-base64 recursion.
const maxDepth = 1

// scan finds everything in s, in s's byte offsets, with the default
// entity types.
func (g *Guard) scan(s string) []Finding {
	return g.scanEnts(s, g.ents)
}

// scanEnts finds everything in s, with the entity types in ents.
func (g *Guard) scanEnts(s string, ents entitySet) []Finding {
	if isASCII(s) {
		return g.scanView(s, 0, false, ents)
	}
	v := normalize(s)
	fs := g.scanView(v.text, 0, false, ents)
	for i := range fs {
		fs[i].Start, fs[i].End = v.raw(fs[i].Start, fs[i].End)
	}
	return resolve(fs)
}

// scanBinary finds everything in the ASCII view of a binary format, where
// a value may be glued to printable bytes of the structure around it (a
// ZIP entry's name to its data, SQLite columns to each other): emails
// and tokens with a checksum or a fixed length also match at the start
// of a longer run (see loose).
func (g *Guard) scanBinary(s string) []Finding {
	return g.scanView(s, 0, true, 0)
}

// scanView runs every detector over normalized text. Entities (ents) are
// looked for in text only: not in base64 payloads, nor in the views of
// binary formats, whose runs of printable bytes are not prose.
func (g *Guard) scanView(s string, depth int, loose bool, ents entitySet) []Finding {
	sc := scanner{g: g, s: s, depth: depth, loose: loose}
	if depth == 0 && !loose {
		sc.ents = ents
	}
	sc.words()
	sc.numbers()
	sc.emails()
	sc.urls()
	sc.pems()
	sc.assignments()
	if depth < maxDepth {
		sc.base64Runs()
	}
	if loose {
		sc.glued()
	}
	if sc.ents != 0 {
		sc.entities()
	}
	return resolve(sc.out)
}

type scanner struct {
	g     *Guard
	s     string
	depth int
	out   []Finding
	// loose is set for the view of binary data: a value may end where the
	// run of its characters does not (scanBinary).
	loose bool
	// ents are the entity types to look for.
	ents entitySet
	// entEnd is the end of the last address: runs inside it are judged.
	entEnd int
	// hdrStart, hdrEnd is the last table header found, which holds for
	// the rows up to hdrReach (the end of the last row it served).
	hdrStart, hdrEnd, hdrReach int
	// win is the model's answer for the window [winStart, winEnd).
	win              []Span
	winStart, winEnd int
}

func (sc *scanner) add(typ string, start, end int, conf float64) {
	sc.out = append(sc.out, Finding{Type: typ, Start: start, End: end, Confidence: conf})
}

// specificity ranks types for overlaps: a validated pattern says more
// than an address or a date of birth, which say more than a name, an
// organisation or a place found by judgement.
func specificity(typ string) int {
	switch typ {
	case TypeAddress, TypeDateOfBirth:
		return 3
	case TypeOrganization:
		return 2
	case TypePerson:
		return 1
	case TypeLocation:
		return 0
	}
	return 4
}

// resolve sorts findings and merges overlaps into the earliest, longest one,
// so that nothing of either value survives redaction; the merged finding
// takes the most specific type (the earliest of equals).
func resolve(fs []Finding) []Finding {
	if len(fs) < 2 {
		return fs
	}
	sort.Slice(fs, func(i, j int) bool {
		if fs[i].Start != fs[j].Start {
			return fs[i].Start < fs[j].Start
		}
		return fs[i].End > fs[j].End
	})
	out := fs[:1]
	for _, f := range fs[1:] {
		last := &out[len(out)-1]
		if f.Start < last.End {
			if f.End > last.End {
				last.End = f.End
			}
			if specificity(f.Type) > specificity(last.Type) {
				last.Type, last.Confidence = f.Type, f.Confidence
			}
			continue
		}
		out = append(out, f)
	}
	return out
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// view is the NFKC form of a text with a map back to the original.
type view struct {
	text string
	segs []seg // ordered by norm
}

// seg maps one normalization segment.
type seg struct {
	norm, raw, rawEnd int
	same              bool // normalized bytes equal the raw bytes
}

// zeroWidth characters are dropped from the view so they can't split a
// value; they stay in the original text (inside the redacted span).
func zeroWidth(b []byte) bool {
	switch string(b) {
	case "\u200b", "\u200c", "\u200d", "\u2060", "\ufeff", "\u00ad":
		return true
	}
	return false
}

func normalize(s string) view {
	var it norm.Iter
	it.InitString(norm.NFKC, s)
	var b strings.Builder
	b.Grow(len(s))
	var segs []seg
	for !it.Done() {
		start := it.Pos()
		out := it.Next()
		end := it.Pos()
		if zeroWidth(out) {
			continue
		}
		segs = append(segs, seg{norm: b.Len(), raw: start, rawEnd: end, same: string(out) == s[start:end]})
		b.Write(out)
	}
	return view{text: b.String(), segs: segs}
}

// raw maps a normalized span to the smallest span of whole segments of the
// original text that covers it.
func (v *view) raw(start, end int) (int, int) {
	return v.rawPos(start, false), v.rawPos(end, true)
}

func (v *view) rawPos(p int, isEnd bool) int {
	if len(v.segs) == 0 {
		return 0
	}
	// the segment containing p (for an end, the one containing p-1)
	q := p
	if isEnd {
		q = p - 1
	}
	i := sort.Search(len(v.segs), func(i int) bool { return v.segs[i].norm > q }) - 1
	if i < 0 {
		i = 0
	}
	sg := v.segs[i]
	if sg.same {
		return sg.raw + (p - sg.norm)
	}
	if isEnd {
		return sg.rawEnd
	}
	return sg.raw
}

// entropy is the Shannon entropy of s in bits per byte.
func entropy(s string) float64 {
	if s == "" {
		return 0
	}
	var counts [256]int
	for i := 0; i < len(s); i++ {
		counts[s[i]]++
	}
	n := float64(len(s))
	h := 0.0
	for _, c := range counts {
		if c > 0 {
			p := float64(c) / n
			h -= p * math.Log2(p)
		}
	}
	return h
}

// mix reports which classes s contains.
func mix(s string) (digit, upper, lower bool) {
	for i := 0; i < len(s); i++ {
		k := class[s[i]]
		digit = digit || k&cDigit != 0
		upper = upper || k&cUpper != 0
		lower = lower || k&cLower != 0
	}
	return
}

// placeholder reports values that stand for a secret rather than being one:
// <YOUR_KEY>, ${VAR}, $VAR, {{ var }}, %s, ****, xxxx, your_api_key, ...
func placeholder(v string) bool {
	if v == "" {
		return true
	}
	switch v[0] {
	case '<', '$', '{', '%', '[', '(':
		return true
	}
	if strings.Contains(v, "${") || strings.Contains(v, "{{") {
		return true
	}
	if strings.Trim(v, "*xX.•-_#") == "" {
		return true
	}
	l := strings.ToLower(v)
	for _, w := range []string{"your", "example", "placeholder", "changeme", "redacted", "dummy", "replace", "xxxx", "secret_here", "insert", "sample", "<", "****"} {
		if strings.Contains(l, w) {
			return true
		}
	}
	switch l {
	case "password", "passwd", "secret", "token", "none", "null", "nil", "true", "false", "undefined",
		"required", "optional", "string", "str", "bytes", "empty", "hidden", "masked":
		return true
	}
	return false
}

// hasPrefixFold is strings.HasPrefix ignoring ASCII case of s.
func hasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
}
