package guard

import "strings"

// dobWords introduce a date of birth; each needs a non-letter before it.
var dobWords = []string{"born", "Born", "BORN", "dob", "DOB", "Dob", "D.O.B", "d.o.b", "birth", "Birth", "BIRTH"}

// datesOfBirth finds dates after a word that makes them one (born, DOB,
// date of birth, birth_date): the date within 40 bytes after it.
func (sc *scanner) datesOfBirth() {
	s := sc.s
	for _, w := range dobWords {
		for from := 0; ; {
			k := strings.Index(s[from:], w)
			if k < 0 {
				break
			}
			i := from + k
			from = i + len(w)
			if i > 0 && is(s[i-1], cAlpha) {
				continue
			}
			e := i + len(w)
			for e < len(s) && is(s[e], cLower) && e-i < len(w)+4 {
				e++ // birthday, birthdate, born's
			}
			if w == "born" || w == "Born" || w == "BORN" {
				if e > i+len(w) {
					continue // borne
				}
			}
			sc.dobColumn(i, e)
			for p := e; p < len(s) && p < e+40 && s[p] != '\n'; p++ {
				if !is(s[p], cAlnum) || p > 0 && is(s[p-1], cAlnum) {
					continue
				}
				if d := dateAt(s, p); d > 0 {
					sc.add(TypeDateOfBirth, p, d, 0.9)
					from = d
					break
				}
			}
		}
	}
}

// dobColumn finds the dates of birth in a table whose header names the
// column [i, e) (dob, date_of_birth, "Date of birth"): the date in that
// column of each line below, up to a blank line (at most 1000 lines). It
// reports whether the line at i was such a header.
func (sc *scanner) dobColumn(i, e int) bool {
	s := sc.s
	ls := strings.LastIndexByte(s[:i], '\n') + 1
	le := strings.IndexByte(s[i:], '\n')
	if le < 0 {
		return false
	}
	le += i
	header := s[ls:le]
	sep := byte(0)
	switch {
	case strings.Count(header, ",") >= 1:
		sep = ','
	case strings.Count(header, "|") >= 1:
		sep = '|'
	case strings.Contains(header, "  ") || strings.Contains(header, "\t"):
	default:
		return false
	}
	// the header's field must be the key alone: dob, date_of_birth, ...
	fa, fe := i, e
	stop := func(c byte) bool { return c == sep || sep == 0 && (c == ' ' || c == '\t') && s[fa-1] == ' ' }
	for fa > ls && !stop(s[fa-1]) {
		fa--
	}
	for fe < le && !(s[fe] == sep || sep == 0 && fe+1 < le && s[fe] == ' ' && s[fe+1] == ' ') {
		fe++
	}
	key := strings.ToLower(strings.Trim(strings.TrimSpace(s[fa:fe]), `"'`))
	switch strings.NewReplacer(" ", "_", "-", "_", ".", "").Replace(key) {
	case "dob", "date_of_birth", "birth_date", "birthdate", "born", "birthday":
	default:
		return false
	}
	field := strings.Count(s[ls:i], string(sep))
	p := le + 1
	for n := 0; n < 1000 && p < len(s); n++ {
		q := strings.IndexByte(s[p:], '\n')
		if q < 0 {
			q = len(s)
		} else {
			q += p
		}
		line := s[p:q]
		if strings.TrimSpace(line) == "" {
			break
		}
		a := -1
		if sep != 0 {
			k := 0
			for x := 0; x < len(line) && a < 0; x++ {
				if k == field {
					a = x
				}
				if line[x] == sep {
					k++
				}
			}
		} else if i-ls < len(line) {
			a = i - ls // aligned: the value's column overlaps the header's
			for a > 0 && line[a-1] != ' ' {
				a--
			}
		}
		if a >= 0 {
			for a < len(line) && (line[a] == ' ' || line[a] == '"' || line[a] == '\'') {
				a++
			}
			if a < len(line) && is(line[a], cDigit|cAlpha) {
				if d := dateAt(s, p+a); d > 0 {
					sc.add(TypeDateOfBirth, p+a, d, 0.85)
				}
			}
		}
		p = q + 1
	}
	return true
}

// dateAt matches a calendar date at p: 12/03/1984, 1984-03-12, 12.03.84,
// 12 March 1984, 12th of March 1984, March 12, 1984. It returns its end or 0.
func dateAt(s string, p int) int {
	num := func(q, min, max int) (int, int) {
		e := q
		for e < len(s) && is(s[e], cDigit) && e-q < max {
			e++
		}
		if e-q < min || e < len(s) && is(s[e], cDigit) {
			return q, -1
		}
		v := 0
		for k := q; k < e; k++ {
			v = v*10 + int(s[k]-'0')
		}
		return e, v
	}
	if is(s[p], cDigit) {
		e, a := num(p, 1, 4)
		if a < 0 || e >= len(s) {
			return 0
		}
		if sep := s[e]; sep == '/' || sep == '-' || sep == '.' {
			e2, b := num(e+1, 1, 2)
			if b < 1 || b > 31 || e2 >= len(s) || s[e2] != sep {
				return 0
			}
			e3, c := num(e2+1, 2, 4)
			if c < 0 || e3-e2-1 == 3 {
				return 0
			}
			if e-p == 4 && (b > 12 || c > 31) || e-p <= 2 && (a > 31 || a == 0) {
				return 0
			}
			return e3
		}
		if e-p > 2 || a < 1 || a > 31 {
			return 0
		}
		q := e
		for _, suf := range []string{"st", "nd", "rd", "th"} {
			if strings.HasPrefix(s[q:], suf) {
				q += 2
				break
			}
		}
		q = skip(s, q, " ")
		if strings.HasPrefix(s[q:], "of ") {
			q += 3
		}
		m := monthAt(s, q)
		if m <= q {
			return 0
		}
		q = skip(s, m, " ,")
		if y, v := num(q, 4, 4); v > 1800 {
			return y
		}
		return 0
	}
	m := monthAt(s, p)
	if m <= p {
		return 0
	}
	q := skip(s, m, " ")
	e, d := num(q, 1, 2)
	if d < 1 || d > 31 {
		return 0
	}
	for _, suf := range []string{"st", "nd", "rd", "th"} {
		if strings.HasPrefix(s[e:], suf) {
			e += 2
			break
		}
	}
	q = skip(s, e, " ,")
	if y, v := num(q, 4, 4); v > 1800 {
		return y
	}
	return 0
}

func skip(s string, q int, set string) int {
	for q < len(s) && strings.IndexByte(set, s[q]) >= 0 && q < len(s) {
		q++
	}
	return q
}

// monthAt matches a month's name or its three-letter form at p.
func monthAt(s string, p int) int {
	e := p
	for e < len(s) && is(s[e], cAlpha) && e-p < 10 {
		e++
	}
	w := s[p:e]
	if len(w) < 3 {
		return p
	}
	for _, m := range months {
		if strings.EqualFold(w, m) || len(w) == 3 && strings.EqualFold(w, m[:3]) || w == "Sept" {
			if e < len(s) && s[e] == '.' {
				e++
			}
			return e
		}
	}
	return p
}

var months = []string{"January", "February", "March", "April", "May", "June", "July", "August",
	"September", "October", "November", "December"}
