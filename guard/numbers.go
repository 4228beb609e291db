package guard

import (
	"math/bits"
	"net/netip"
	"strconv"
	"strings"

	"github.com/nyaruka/phonenumbers"
)

// numTok is a run of digit groups joined by short separators, the shape
// shared by cards, SSNs, phones and IPv4 addresses.
type numTok struct {
	plus   bool // a '+' (or "00") right before the first group
	paren  bool // the first group is in parentheses
	start  int  // first byte (the '+' or '(' if any)
	ng     int
	groups [maxGroups]struct{ a, b int }
	seps   [maxGroups]string // seps[k] precedes groups[k]; seps[0] is ""
}

const maxGroups = 10

// numbers walks digit runs that start a token (not inside a word or a
// decimal) and classifies the token.
func (sc *scanner) numbers() {
	s := sc.s
	n := len(s)
	for i := 0; i < n; {
		c := s[i]
		if c < '0' || c > '9' {
			i++
			continue
		}
		if i > 0 {
			p := s[i-1]
			if is(p, cAlpha) || p == '_' || (p == '.' && i > 1 && is(s[i-2], cDigit)) || p == '-' && i > 1 && is(s[i-2], cAlnum) {
				for i < n && is(s[i], cAlnum) {
					i++
				}
				continue
			}
		}
		end := sc.number(i)
		for i < n && is(s[i], cDigit) {
			i++
		}
		if end > i {
			i = end
		}
	}
}

// number tokenizes at i and tries the detectors on the longest prefix of
// groups that any accepts. It returns the end of the token.
func (sc *scanner) number(i int) int {
	s := sc.s
	n := len(s)
	var t numTok
	t.start = i
	if i > 0 && s[i-1] == '+' && (i == 1 || !is(s[i-2], cAlnum)) {
		t.plus, t.start = true, i-1
	} else if i > 0 && s[i-1] == '(' {
		t.paren, t.start = true, i-1
	}
	p := i
	for t.ng < maxGroups {
		a := p
		for p < n && is(s[p], cDigit) {
			p++
		}
		t.groups[t.ng] = struct{ a, b int }{a, p}
		t.ng++
		// separator: up to 2 of " -./()" then a digit
		q := p
		for q < n && q-p < 2 && strings.IndexByte(" -./()", s[q]) >= 0 {
			q++
		}
		if t.ng == maxGroups || q == p || q >= n || !is(s[q], cDigit) || strings.Count(s[p:q], " ") > 1 {
			break
		}
		t.seps[t.ng] = s[p:q]
		p = q
	}
	tokEnd := t.groups[t.ng-1].b
	for k := t.ng; k >= 1; k-- {
		if sc.classify(&t, k) {
			return t.groups[k-1].b
		}
	}
	return tokEnd
}

// after returns the byte after the k-group prefix, or 0 at the end.
func (sc *scanner) after(t *numTok, k int) (byte, byte) {
	e := t.groups[k-1].b
	var c, d byte
	if e < len(sc.s) {
		c = sc.s[e]
	}
	if e+1 < len(sc.s) {
		d = sc.s[e+1]
	}
	return c, d
}

func (sc *scanner) classify(t *numTok, k int) bool {
	c, d := sc.after(t, k)
	// a token glued to letters or continuing as a decimal is not a value
	if is(c, cAlnum) && !(k == 1 && t.groups[0].b-t.groups[0].a == 7) || c == '_' || (c == '.' || c == ',') && is(d, cDigit) {
		return false
	}
	digits := 0
	for g := 0; g < k; g++ {
		digits += t.groups[g].b - t.groups[g].a
	}
	start, end := t.groups[0].a, t.groups[k-1].b
	if k == 4 && allSeps(t, k, ".") {
		return sc.ipv4(start, end)
	}
	if k == 1 && digits == 7 && is(c, cUpper) {
		return sc.ppsn(start)
	}
	if is(c, cAlnum) {
		return false
	}
	if digits >= 12 && digits <= 19 && (k == 1 || allSeps(t, k, " ") || allSeps(t, k, "-")) && sc.card(t, k, digits) {
		return true
	}
	if digits == 9 && sc.ssn(t, k) {
		return true
	}
	if digits >= 7 && digits <= 15 && sc.phone(t, k, digits) {
		return true
	}
	return false
}

func allSeps(t *numTok, k int, sep string) bool {
	for g := 1; g < k; g++ {
		if t.seps[g] != sep {
			return false
		}
	}
	return true
}

// digitsOf returns the digits of the first k groups.
func (sc *scanner) digitsOf(t *numTok, k int, buf []byte) []byte {
	for g := 0; g < k; g++ {
		buf = append(buf, sc.s[t.groups[g].a:t.groups[g].b]...)
	}
	return buf
}

// versionWords precede a dotted number that is a version, not an address.
var versionWords = []string{"version", "ver", "v", "release", "rel", "build", "rev", "firmware", "kernel", "os"}

// ipv4 accepts a dotted quad that netip parses (so no leading zeros), is not
// part of an OID or a longer dotted number, is not after a version word or
// a product/ token (Chrome/1.2.3.4), and is not unspecified, loopback,
// multicast or 255.x (masks).
func (sc *scanner) ipv4(start, end int) bool {
	s := sc.s
	a, err := netip.ParseAddr(s[start:end])
	if err != nil || a.IsUnspecified() || a.IsLoopback() || a.IsMulticast() || strings.HasPrefix(s[start:end], "255.") {
		return false
	}
	if start > 0 && s[start-1] == '/' && start > 1 && is(s[start-2], cAlpha) {
		return false
	}
	// the word before, skipping " :=" and quotes
	p := start
	for p > 0 && p > start-4 && strings.IndexByte(" :=\"'", s[p-1]) >= 0 {
		p--
	}
	q := p
	for q > 0 && p-q < 10 && is(s[q-1], cAlpha) {
		q--
	}
	if q < p {
		w := strings.ToLower(s[q:p])
		for _, v := range versionWords {
			if w == v {
				return false
			}
		}
	}
	sc.add(TypeIPAddress, start, end, 0.8)
	return true
}

// luhn reports whether the digit string passes the Luhn check.
func luhn(d []byte) bool {
	sum := 0
	double := false
	for i := len(d) - 1; i >= 0; i-- {
		v := int(d[i] - '0')
		if double {
			v *= 2
			if v > 9 {
				v -= 9
			}
		}
		sum += v
		double = !double
	}
	return sum%10 == 0
}

// issuer reports whether a card number of this length has a known issuer
// prefix.
func issuer(d []byte) bool {
	n := len(d)
	pre := func(k int) int {
		v, _ := strconv.Atoi(string(d[:k]))
		return v
	}
	p1, p2, p3, p4, p6 := pre(1), pre(2), pre(3), pre(4), pre(6)
	switch {
	case p1 == 4:
		return n == 13 || n == 16 || n == 19 // Visa
	case p2 >= 51 && p2 <= 55, p4 >= 2221 && p4 <= 2720:
		return n == 16 // Mastercard
	case p2 == 34 || p2 == 37:
		return n == 15 // Amex
	case p4 == 6011, p3 >= 644 && p3 <= 649, p2 == 65, p6 >= 622126 && p6 <= 622925:
		return n >= 16 && n <= 19 // Discover
	case p4 >= 3528 && p4 <= 3589:
		return n >= 16 && n <= 19 // JCB
	case p3 >= 300 && p3 <= 305, p2 == 36, p2 == 38 || p2 == 39:
		return n >= 14 && n <= 19 // Diners
	case p2 == 62:
		return n >= 16 && n <= 19 // UnionPay
	case p2 == 50, p2 >= 56 && p2 <= 69:
		return n >= 12 && n <= 19 // Maestro
	}
	return false
}

// card accepts 12-19 digits, ungrouped or in groups of 3-6 joined by one
// kind of separator, with an issuer prefix and length and a valid Luhn.
// An ungrouped number close to a power-of-two sum (float and bit-mask
// constants like 4503601774854144 = 2^52+2^31) is not a card.
func (sc *scanner) card(t *numTok, k, digits int) bool {
	if t.plus || t.paren {
		return false
	}
	if k > 1 {
		for g := 0; g < k; g++ {
			if l := t.groups[g].b - t.groups[g].a; l < 3 || l > 6 {
				return false
			}
		}
	}
	var buf [24]byte
	d := sc.digitsOf(t, k, buf[:0])
	if !issuer(d) || !luhn(d) {
		return false
	}
	if k == 1 {
		v, err := strconv.ParseUint(string(d), 10, 64)
		if err == nil && (bits.OnesCount64(v) <= 6 || bits.OnesCount64(v-1) <= 6 || bits.OnesCount64(v+1) <= 6) {
			return false
		}
	}
	sc.add(TypeCreditCard, t.groups[0].a, t.groups[k-1].b, 0.9)
	return true
}

// ssnContext is how far before a bare 9-digit number a context word counts.
const ssnContext = 48

// ssn accepts AAA-GG-SSSS (one separator kind; spaces need a context word)
// or 9 bare digits after a context word, outside the invalid ranges.
func (sc *scanner) ssn(t *numTok, k int) bool {
	start := t.groups[0].a
	switch {
	case k == 3 && t.groups[0].b-t.groups[0].a == 3 && t.groups[1].b-t.groups[1].a == 2:
		if !(allSeps(t, 3, "-") || allSeps(t, 3, " ") && sc.ssnContext(start)) {
			return false
		}
	case k == 1:
		if !sc.ssnContext(start) {
			return false
		}
	default:
		return false
	}
	if t.plus || t.paren {
		return false
	}
	var buf [12]byte
	d := sc.digitsOf(t, k, buf[:0])
	if !ssnValid(d) {
		return false
	}
	sc.add(TypeSSN, start, t.groups[k-1].b, 0.85)
	return true
}

func (sc *scanner) ssnContext(start int) bool {
	lo := start - ssnContext
	if lo < 0 {
		lo = 0
	}
	w := strings.ToLower(sc.s[lo:start])
	return strings.Contains(w, "ssn") || strings.Contains(w, "social security") || strings.Contains(w, "ss#")
}

// ssnValid applies the SSA's invalid ranges to 9 digits.
func ssnValid(d []byte) bool {
	if len(d) != 9 {
		return false
	}
	area, _ := strconv.Atoi(string(d[:3]))
	group, _ := strconv.Atoi(string(d[3:5]))
	serial, _ := strconv.Atoi(string(d[5:]))
	if area == 0 || area == 666 || area >= 900 || group == 0 || serial == 0 {
		return false
	}
	if string(d) == "078051120" || string(d) == "219099999" {
		return false // advertising numbers
	}
	same := true
	for _, c := range d[1:] {
		same = same && c == d[0]
	}
	return !same
}

// ppsn accepts 7 digits, an uppercase check letter and an optional suffix
// (A, B, H, W, T, X), with a valid check letter.
func (sc *scanner) ppsn(i int) bool {
	s := sc.s
	e := i + 8
	if e > len(s) {
		return false
	}
	suffix := byte(0)
	if e < len(s) && strings.IndexByte("ABHWTX", s[e]) >= 0 {
		suffix = s[e]
		e++
	}
	if e < len(s) && is(s[e], cAlnum) || e < len(s) && s[e] == '_' {
		return false
	}
	if !ppsnValid(s[i:i+7], s[i+7], suffix) {
		return false
	}
	sc.add(TypePPSN, i, e, 0.9)
	return true
}

const ppsnLetters = "WABCDEFGHIJKLMNOPQRSTUV"

// ppsnCheck computes the check letter for 7 digits and a suffix (0: none).
func ppsnCheck(digits string, suffix byte) byte {
	sum := 0
	for k := 0; k < 7; k++ {
		sum += int(digits[k]-'0') * (8 - k)
	}
	if suffix >= 'A' && suffix <= 'I' {
		sum += 9 * int(suffix-'A'+1)
	}
	return ppsnLetters[sum%23]
}

func ppsnValid(digits string, check, suffix byte) bool {
	return ppsnCheck(digits, suffix) == check
}

// phone accepts a number with a '+' (or 00) country code, or a national
// number with phone-like grouping (2+ groups of at most 4 digits, or a
// parenthesized area code), that libphonenumber calls valid for one of the
// default regions. Dates (2024-01-15) and plain digit runs don't qualify.
func (sc *scanner) phone(t *numTok, k, digits int) bool {
	s := sc.s
	start, end := t.start, t.groups[k-1].b
	for g := 1; g < k; g++ {
		if strings.Contains(t.seps[g], "/") {
			return false
		}
	}
	intl := t.plus || strings.HasPrefix(s[t.groups[0].a:end], "00")
	if !intl {
		if k < 2 && !t.paren || k > 5 {
			return false
		}
		dots := 0
		for g := 0; g < k; g++ {
			l := t.groups[g].b - t.groups[g].a
			// "087 1234567": a long subscriber number after a trunk
			// prefix or a parenthesized area code
			long := k == 2 && g == 1 && l <= 8 && (s[t.groups[0].a] == '0' || t.paren)
			if l > 4 && !long || g > 0 && l < 2 {
				return false
			}
			if g > 0 && t.seps[g] == "." {
				dots++
			}
		}
		if dots > 0 && (dots != k-1 || digits < 10) {
			return false
		}
		if k >= 3 && t.groups[0].b-t.groups[0].a == 4 && t.groups[1].b-t.groups[1].a == 2 && t.groups[2].b-t.groups[2].a == 2 {
			return false // a date
		}
		if k >= 3 && t.groups[0].b-t.groups[0].a == 2 && t.groups[1].b-t.groups[1].a == 2 && t.groups[2].b-t.groups[2].a == 4 {
			return false // a date
		}
	}
	raw := s[start:end]
	if t.paren && start > 0 && s[start-1] == '+' {
		raw = s[start-1 : end]
	}
	if intl {
		if !t.plus {
			raw = "+" + strings.TrimPrefix(raw, "00") // 00 is the international prefix in most of the world
		}
		num, err := phonenumbers.Parse(raw, "US")
		if err != nil || !phonenumbers.IsValidNumber(num) {
			return false
		}
		sc.add(TypePhone, start, end, 0.85)
		return true
	}
	var buf [24]byte
	d := sc.digitsOf(t, k, buf[:0])
	for _, r := range sc.g.regions {
		if phonenumbers.IsNANPACountry(r) {
			if !(len(d) == 10 || len(d) == 11 && d[0] == '1') {
				continue
			}
		} else if ndd := phonenumbers.GetNddPrefixForRegion(r, true); ndd != "" && !strings.HasPrefix(string(d), ndd) {
			continue
		}
		num, err := phonenumbers.Parse(raw, r)
		if err == nil && phonenumbers.IsValidNumberForRegion(num, r) {
			sc.add(TypePhone, start, end, 0.7)
			return true
		}
	}
	return false
}
