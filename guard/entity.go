package guard

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Entity types: people, places and organisations (docs/guard.md, "People,
// places and organisations"). Unlike the pattern types they are judged, not
// validated: rules find candidates and read their context, and a model
// (Config.Model) decides what the rules leave open.
const (
	TypePerson       = "PERSON"
	TypeAddress      = "ADDRESS"
	TypeOrganization = "ORGANIZATION"
	TypeLocation     = "LOCATION"
	TypeDateOfBirth  = "DATE_OF_BIRTH"
)

// EntityTypes lists the entity types, the values Config.Entities and
// Config.EntitiesFor choose from.
var EntityTypes = []string{TypePerson, TypeAddress, TypeOrganization, TypeLocation, TypeDateOfBirth}

// entitySet is a set of entity types, one bit each.
type entitySet uint8

const (
	entPerson entitySet = 1 << iota
	entAddress
	entOrg
	entLocation
	entDOB

	entAll = entPerson | entAddress | entOrg | entLocation | entDOB
)

func entityBit(typ string) entitySet {
	switch typ {
	case TypePerson:
		return entPerson
	case TypeAddress:
		return entAddress
	case TypeOrganization:
		return entOrg
	case TypeLocation:
		return entLocation
	case TypeDateOfBirth:
		return entDOB
	}
	return 0
}

// entityWord is one capitalised word (or joining particle) of a run.
type entityWord struct {
	start, end int
	text       string
	particle   bool // Ó, Ní, Mac, de, of, and, &: joins capitalised words
}

// entityRun is a run of capitalised words on one line: a candidate.
type entityRun struct {
	words []entityWord
	cue   string // what the context says the run is ("" nothing)
}

func (r entityRun) start() int { return r.words[0].start }
func (r entityRun) end() int   { return r.words[len(r.words)-1].end }

// entities finds people, addresses, organisations, locations and dates of
// birth, the types in sc.ents. One pass finds capitalised words; only runs
// of them (or one after a cue word, a name key or a name column) are
// judged, and only what the rules leave open goes to the model, one line
// window at a time.
func (sc *scanner) entities() {
	if sc.ents&entDOB != 0 {
		sc.datesOfBirth()
	}
	if sc.ents&^entDOB == 0 {
		return
	}
	s := sc.s
	n := len(s)
	var words []entityWord
	for i := 0; i < n; {
		// Skip to the next capital (or non-ASCII byte): most text has none.
		for i < n && !wordStart[s[i]] {
			i++
		}
		if i >= n {
			break
		}
		if i > 0 && (is(s[i-1], cAlnum) || s[i-1] >= 0x80 || strings.IndexByte("_.$@/\\#", s[i-1]) >= 0) {
			i++ // inside a word, an identifier or a path
			continue
		}
		if s[i] < 0x80 && i+2 < n && (is(s[i+1], cDigit) || is(s[i+1], cUpper) && is(s[i+2], cDigit)) {
			if e := postcode(s, i); e > 0 {
				if sc.ents&entAddress != 0 && i >= sc.entEnd {
					sc.add(TypeAddress, i, e, 0.85)
				}
				i = e
				continue
			}
		}
		// A run: capitalised words separated by one space, joined by
		// particles (Ó, Ní, of, and, &).
		words = words[:0]
		j := i
		for {
			e, ok := capWord(s, j)
			if !ok {
				if e <= j {
					e = j + 1
				}
				if len(words) == 0 {
					j = e
				}
				break
			}
			words = append(words, entityWord{start: j, end: e, text: s[j:e], particle: particles[s[j:e]]})
			j = e
			if j+1 >= n || s[j] != ' ' {
				break
			}
			k := j + 1
			if wordStart[s[k]] {
				j = k
				continue
			}
			// a lower-case particle between capitalised words
			q := k
			for q < n && q-k < 4 && (is(s[q], cLower) || s[q] == '&') {
				q++
			}
			if q > k && q+1 < n && s[q] == ' ' && particles[s[k:q]] && wordStart[s[q+1]] {
				words = append(words, entityWord{start: k, end: q, text: s[k:q], particle: true})
				j = q + 1
				continue
			}
			if q > k && legalWords[s[k:q]] && (q == n || !is(s[q], cAlnum)) {
				words = append(words, entityWord{start: k, end: q, text: s[k:q]}) // Kerry Group plc
				j = q
			}
			break
		}
		if len(words) > 0 {
			sc.judge(words)
			words = words[:0]
		}
		if j <= i {
			j = i + 1
		}
		i = j
	}
}

// wordStart marks the bytes that may start a capitalised word: ASCII
// capitals and the lead bytes of non-ASCII letters (Ó, Á).
var wordStart = func() (t [256]bool) {
	for c := 'A'; c <= 'Z'; c++ {
		t[c] = true
	}
	for c := 0xc0; c < 0x100; c++ {
		t[c] = true
	}
	return
}()

// capWord parses a capitalised word at i: an upper-case letter, then
// letters (Irish forms: O'Brien, Ó, McCarthy, MacNamara, Ní, hyphens), or
// an initial ("J."). It returns the word's end and whether it is one; a
// word of capitals (INFO, EUR) or with digits or inner capitals in code
// style (ValueError, getName) is not.
func capWord(s string, i int) (int, bool) {
	r, size := rune(s[i]), 1
	if r >= 0x80 {
		r, size = utf8.DecodeRuneInString(s[i:])
	}
	if !unicode.IsUpper(r) {
		for i+size < len(s) && (s[i+size] >= 0x80 || is(s[i+size], cAlnum)) {
			size++
		}
		return i + size, false
	}
	j := i + size
	lower, upper := 0, 1
	inner := 0 // capitals after the first in code style
	for j < len(s) {
		c := s[j]
		if c == '\'' || c == '-' || c == 0xe2 && strings.HasPrefix(s[j:], "’") {
			k := j + 1
			if c == 0xe2 {
				k = j + len("’")
			}
			if k < len(s) && (s[k] >= 0x80 || is(s[k], cAlpha)) {
				j = k
				continue
			}
			break
		}
		if c < 0x80 {
			switch {
			case is(c, cLower):
				lower++
			case is(c, cUpper):
				upper++
				prev := s[i:j]
				if !(prev == "Mc" || prev == "Mac" || strings.HasSuffix(prev, "'") || strings.HasSuffix(prev, "-") || strings.HasSuffix(prev, "’")) {
					inner++
				}
			case is(c, cDigit) || c == '_':
				for j < len(s) && (s[j] >= 0x80 || is(s[j], cWord)) {
					j++
				}
				return j, false
			default:
				goto done
			}
			j++
			continue
		}
		r, sz := utf8.DecodeRuneInString(s[j:])
		if !unicode.IsLetter(r) {
			break
		}
		if unicode.IsUpper(r) {
			upper++
		} else {
			lower++
		}
		j += sz
	}
done:
	if lower == 0 {
		// an initial: "J." (one capital and a full stop)
		if upper == 1 && j < len(s) && s[j] == '.' && j-i == size {
			return j + 1, true
		}
		return j, upper == 1 && j-i == size && particles[s[i:j]]
	}
	return j, inner == 0
}

// judge decides what a run of capitalised words is.
func (sc *scanner) judge(words []entityWord) {
	// particles only join: drop them at the ends
	for len(words) > 0 && words[len(words)-1].particle && !nameParticles[words[len(words)-1].text] {
		words = words[:len(words)-1]
	}
	for len(words) > 0 && words[0].particle && !nameParticles[words[0].text] {
		words = words[1:]
	}
	if len(words) == 0 || words[0].start < sc.entEnd {
		return
	}
	plain := true // only words of code, tools and the calendar: no entity
	for _, w := range words {
		if t := strings.TrimSuffix(w.text, "."); !w.particle && !techWords[t] && !calendar[t] && !streetWords[t] {
			plain = false
			break
		}
	}
	if plain {
		return
	}
	// Leading words that open sentences or greet (The, In, Dear) are cues
	// or nothing, not part of the run.
	cue := sc.cueBefore(words[0].start)
	for len(words) > 0 {
		w := strings.TrimSuffix(words[0].text, ".")
		if c, ok := openers[w]; ok {
			if c != "" {
				cue = c
			}
			words = words[1:]
			continue
		}
		break
	}
	if len(words) == 0 {
		return
	}
	run := entityRun{words: words, cue: cue}
	if sc.ents&entAddress != 0 && sc.address(run) {
		return
	}
	// "and", "of", "the" join the words of an organisation's name; else
	// they separate names: Patrick Murphy and Aoife Ní Bhriain.
	if !orgName(words) {
		for k := 1; k < len(words)-1; k++ {
			if words[k].particle && !nameParticles[words[k].text] {
				sc.judge(words[:k])
				sc.judge(words[k+1:])
				return
			}
		}
	}
	typ, conf := sc.entityType(run)
	if typ == "" || sc.ents&entityBit(typ) == 0 {
		return
	}
	start, end := run.start(), run.end()
	for end > start && sc.s[end-1] == '.' && !initial(sc.s[start:end]) {
		end--
	}
	sc.add(typ, start, end, conf)
}

// initial reports a run that ends in an initial ("John F.").
func initial(s string) bool {
	return len(s) >= 2 && s[len(s)-1] == '.' && (len(s) == 2 || s[len(s)-3] == ' ')
}

// entityType is the rules then the model: what the run is and how sure.
func (sc *scanner) entityType(run entityRun) (string, float64) {
	ws := run.words
	last := strings.TrimSuffix(ws[len(ws)-1].text, ".")
	first := ws[0].text
	caps := 0 // capitalised words, not particles
	tech := false
	for _, w := range ws {
		if !w.particle {
			caps++
		}
		if !w.particle && techWords[strings.TrimSuffix(w.text, ".")] {
			tech = true
		}
	}
	heading := sc.titleCase(run.start())
	if orgName(ws) && (!heading || legal(ws) || orgHeads[first] && hasParticle(ws, "of")) {
		return TypeOrganization, 0.9
	}
	if tech || calendar[first] || calendar[last] {
		return "", 0
	}
	switch run.cue {
	case cuePerson:
		return TypePerson, 0.9
	case cueOrg:
		return TypeOrganization, 0.85
	case cueLocation:
		if caps >= 1 {
			return TypeLocation, 0.85
		}
	}
	if caps >= 2 && givenNames[first] {
		return TypePerson, 0.85
	}
	if caps == 1 && run.cue != cuePlace {
		return "", 0 // one word needs a cue: Will, May, Grant, Bill stay
	}
	if heading {
		return "", 0 // a heading or a log message in title case: no judgement
	}
	if places[first] && caps == 1 || places[strings.Join(words(ws), " ")] {
		return TypeLocation, 0.8
	}
	return sc.model(run)
}

// orgName reports an organisation's name by its legal or institutional
// word: Allied Irish Banks, Trinity College Dublin, Bank of Ireland.
func orgName(ws []entityWord) bool {
	caps := 0
	org := false
	for i, w := range ws {
		if w.particle {
			continue
		}
		caps++
		if i > 0 && orgWords[strings.TrimSuffix(w.text, ".")] {
			org = true
		}
	}
	return caps >= 2 && (org || orgHeads[ws[0].text] && hasParticle(ws, "of"))
}

// legal reports a run with a company's legal word (Ltd, plc, Co).
func legal(ws []entityWord) bool {
	for _, w := range ws[1:] {
		if legalWords[strings.TrimSuffix(w.text, ".")] {
			return true
		}
	}
	return false
}

func hasParticle(ws []entityWord, p string) bool {
	for _, w := range ws {
		if w.particle && w.text == p {
			return true
		}
	}
	return false
}

func words(ws []entityWord) []string {
	out := make([]string, len(ws))
	for i, w := range ws {
		out[i] = w.text
	}
	return out
}

// model asks the recogniser about the run, in the window of its line: the
// type most of the run's bytes got, if any.
func (sc *scanner) model(run entityRun) (string, float64) {
	m := sc.g.model
	if m == nil {
		return "", 0
	}
	a, b := run.start(), run.end()
	ls := strings.LastIndexByte(sc.s[:a], '\n') + 1
	le := strings.IndexByte(sc.s[b:], '\n')
	if le < 0 {
		le = len(sc.s)
	} else {
		le += b
	}
	if le-ls > 2*modelContext {
		// a long line: the run and its neighbourhood (a short line is one
		// window, so the runs on it share one call)
		ls = max(ls, a-modelContext)
		le = min(le, b+modelContext)
	}
	if sc.win == nil || sc.winStart != ls || sc.winEnd != le {
		sc.win, sc.winStart, sc.winEnd = sc.g.recognize(sc.s[ls:le]), ls, le
	}
	cover := map[string]int{}
	for _, sp := range sc.win {
		lo, hi := max(sp.Start+ls, a), min(sp.End+ls, b)
		if hi > lo {
			cover[sp.Type] += hi - lo
		}
	}
	best, most := "", 0
	for t, k := range cover {
		if k > most || k == most && t < best {
			best, most = t, k
		}
	}
	if run.cue == cuePlace && best == TypeLocation {
		return TypeLocation, 0.8
	}
	if len(run.words) < 2 || 2*most < b-a {
		return "", 0
	}
	return best, 0.7
}

// modelContext is how far either side of a run its model window reaches.
const modelContext = 96

// Cues: what the words before a run say it is.
const (
	cuePerson   = "person"   // Dear, Mr, a name key or column
	cueOrg      = "org"      // a company key or column
	cueLocation = "location" // a city or country key or column
	cuePlace    = "place"    // in, from, near: the model decides
)
