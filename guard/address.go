package guard

import "strings"

// address reports (and adds) a street address the run is the street of:
// a house number, the street's name and a street word (Road, Street,
// Avenue, ...), or a street word followed by a postal part, then the
// comma-separated parts that follow on the line: localities, "Dublin 6",
// "Co. Cork", Eircodes, UK postcodes, US states and ZIP codes.
func (sc *scanner) address(run entityRun) bool {
	s := sc.s
	ws := run.words
	k := -1
	for i, w := range ws {
		if streetWords[strings.TrimSuffix(w.text, ".")] && (i > 0 || run.start() > 0) {
			k = i
		}
	}
	keyed := run.cue == cueAddress
	if k < 0 && !keyed {
		return false
	}
	a := run.start()
	// the house number: "14 ", "221B ", "12-14 ", "Apt 3, 14 "
	h := a
	for h > 0 && s[h-1] == ' ' && a-h < 2 {
		h--
	}
	d := h
	if d > 0 && is(s[d-1], cUpper) && d > 1 && is(s[d-2], cDigit) {
		d-- // 221B
	}
	for d > 0 && h-d < 6 && (is(s[d-1], cDigit) || s[d-1] == '-' && d > 1 && is(s[d-2], cDigit)) {
		d--
	}
	numbered := d < h && is(s[d], cDigit) && (d == 0 || !is(s[d-1], cWord) && s[d-1] != '.' && s[d-1] != ':')
	if numbered {
		a = d
	}
	end, postal := sc.addressTail(run.end())
	if keyed {
		end = max(end, keyedEnd(s, run.end()))
	}
	if k < 0 {
		k = len(ws) - 1
	}
	if !numbered && !postal && !keyed {
		return false
	}
	if k < len(ws)-1 && !numbered && !keyed {
		return false
	}
	sc.add(TypeAddress, a, max(end, run.end()), 0.9)
	sc.entEnd = max(end, run.end())
	return true
}

// keyedEnd is the end of an address that is a key's value: the closing
// quote, or the end of the line (at most 200 bytes on).
func keyedEnd(s string, e int) int {
	for q := e; q < len(s) && q-e < 200; q++ {
		switch s[q] {
		case '"', '\n', '\r', '\t', ';', '|':
			return q
		}
	}
	return e
}

// addressTail reads the parts of an address after e on the same line and
// returns their end and whether one was a postal part (a postcode, a
// Dublin district, a county, a US state).
func (sc *scanner) addressTail(e int) (int, bool) {
	s := sc.s
	postal := false
	for part := 0; part < 5; part++ {
		p := e
		if p < len(s) && s[p] == ',' {
			p++
		}
		for p < len(s) && s[p] == ' ' && p-e < 3 {
			p++
		}
		if p == e || p >= len(s) {
			break
		}
		q, isPostal := sc.addressPart(p)
		if q <= p {
			break
		}
		postal = postal || isPostal
		e = q
	}
	return e, postal
}

// addressPart reads one part at p: a postcode, "Dublin 6", "Co. Cork",
// a US state (and ZIP), or one to three capitalised words.
func (sc *scanner) addressPart(p int) (int, bool) {
	s := sc.s
	if e := postcode(s, p); e > 0 {
		return e, true
	}
	if e := usState(s, p); e > 0 {
		return e, true
	}
	for _, co := range []string{"Co. ", "County ", "Co "} {
		if strings.HasPrefix(s[p:], co) {
			if e, ok := capWord(s, p+len(co)); ok && e > p+len(co) {
				return e, true
			}
		}
	}
	q := p
	// a house or flat number: "5", "14B", "12-14", then the street
	if is(s[q], cDigit) {
		r := q
		for r < len(s) && (is(s[r], cDigit) || s[r] == '-') && r-q < 6 {
			r++
		}
		if r < len(s) && is(s[r], cUpper) && (r+1 == len(s) || !is(s[r+1], cAlpha)) {
			r++
		}
		if r < len(s) && is(s[r], cAlpha) {
			return p, false
		}
		if r+1 >= len(s) || s[r] != ' ' {
			return r, false
		}
		q = r + 1
	}
	for n := 0; n < 4; n++ {
		e, ok := capWord(s, q)
		if !ok || e <= q || techWords[s[q:e]] {
			break
		}
		q = e
		// "Dublin 6", "Dublin 6W", "London NW1 6XE"
		if q+1 < len(s) && s[q] == ' ' && is(s[q+1], cDigit) {
			r := q + 1
			for r < len(s) && is(s[r], cDigit) && r-q < 3 {
				r++
			}
			if r < len(s) && (s[r] == 'W' || s[r] == 'w') {
				r++
			}
			if r-q <= 3 && (r == len(s) || !is(s[r], cWord)) {
				return r, true
			}
		}
		if q+1 < len(s) && s[q] == ' ' {
			if e := postcode(s, q+1); e > 0 {
				return e, true
			}
			if e, ok := capWord(s, q+1); ok && e > q+1 {
				q++
				continue
			}
		}
		break
	}
	if q == p {
		return p, false
	}
	return q, false
}

// postcode matches an Eircode (D06 F2X4, A65F4E2) or a UK postcode
// (NW1 6XE, SW1A 1AA) at p, standing alone; it returns its end or 0.
func postcode(s string, p int) int {
	if p > 0 && is(s[p-1], cWord) {
		return 0
	}
	if e := eircode(s, p); e > 0 {
		return e
	}
	return ukPostcode(s, p)
}

// eircodeChars are the characters of an Eircode's unique identifier.
const eircodeChars = "0123456789ACDEFHKNPRTVWXY"

func eircode(s string, p int) int {
	if p+7 > len(s) {
		return 0
	}
	q := p
	switch {
	case strings.HasPrefix(s[p:], "D6W"):
		q += 3
	case strings.IndexByte("ACDEFHKNPRTVWXY", s[p]) >= 0 && is(s[p+1], cDigit) && is(s[p+2], cDigit):
		q += 3
	default:
		return 0
	}
	if q < len(s) && s[q] == ' ' {
		q++
	}
	if q+4 > len(s) {
		return 0
	}
	letter, digit := false, false
	for k := q; k < q+4; k++ {
		if strings.IndexByte(eircodeChars, s[k]) < 0 {
			return 0
		}
		letter = letter || is(s[k], cUpper)
		digit = digit || is(s[k], cDigit)
	}
	e := q + 4
	if !letter || !digit || e < len(s) && is(s[e], cWord) {
		return 0
	}
	return e
}

// ukPostcode matches A9 9AA, A99 9AA, A9A 9AA, AA9 9AA, AA99 9AA, AA9A 9AA.
func ukPostcode(s string, p int) int {
	q := p
	for q < len(s) && q-p < 2 && is(s[q], cUpper) {
		q++
	}
	if q == p || q >= len(s) || !is(s[q], cDigit) {
		return 0
	}
	q++
	if q < len(s) && (is(s[q], cDigit) || is(s[q], cUpper)) {
		q++
	}
	if q+4 > len(s) || s[q] != ' ' || !is(s[q+1], cDigit) {
		return 0
	}
	for k := q + 2; k < q+4; k++ {
		if !is(s[k], cUpper) || strings.IndexByte("CIKMOV", s[k]) >= 0 {
			return 0
		}
	}
	e := q + 4
	if e < len(s) && is(s[e], cWord) {
		return 0
	}
	return e
}

// usState matches a US state's code and a ZIP code: "IL 62704", "NY 10001-1234".
func usState(s string, p int) int {
	if p+8 > len(s) || !usStates[s[p:p+2]] || s[p+2] != ' ' {
		return 0
	}
	q := p + 3
	for k := 0; k < 5; k++ {
		if !is(s[q+k], cDigit) {
			return 0
		}
	}
	q += 5
	if q+5 <= len(s) && s[q] == '-' && allDigits(s[q+1:q+5]) {
		q += 5
	}
	if q < len(s) && is(s[q], cWord) {
		return 0
	}
	return q
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if !is(s[i], cDigit) {
			return false
		}
	}
	return s != ""
}
