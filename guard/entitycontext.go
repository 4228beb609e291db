package guard

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// The context of a run: what the words before it, its key, its column
// and its line say about it.

// cueBefore reads the context before a run at a: a title or greeting, a
// key (JSON, YAML, key=value) or a column header naming what it holds.
func (sc *scanner) cueBefore(a int) string {
	s := sc.s
	j := a
	for j > 0 && (s[j-1] == '"' || s[j-1] == '\'' || s[j-1] == ' ' || s[j-1] == '\t') && a-j < 8 {
		j--
	}
	if j > 0 && (s[j-1] == ':' || s[j-1] == '=') {
		k := j - 1
		for k > 0 && (s[k-1] == ' ' || s[k-1] == '"' || s[k-1] == '\'') && j-k < 4 {
			k--
		}
		e := k
		for k > 0 && (is(s[k-1], cWord) || s[k-1] == ' ') && e-k < 32 {
			k--
		}
		if c := keyCue(strings.TrimSpace(s[k:e])); c != "" {
			return c
		}
	}
	// the word before: "Dear", "Mr.", "in"
	k := a
	for k > 0 && (s[k-1] == ' ') {
		k--
	}
	if k > 0 && (s[k-1] == '.' || s[k-1] == ',') {
		k-- // Dr. Ciarán; Signed, Fiachra
	}
	e := k
	for k > 0 && is(s[k-1], cAlpha) && e-k < 12 {
		k--
	}
	if w := s[k:e]; w != "" {
		if c := wordCues[w]; c != "" {
			return c
		}
		if openers[w] == cuePerson {
			return cuePerson // Mr. Tiernan Mulcahy
		}
	}
	return sc.columnCue(a)
}

// keyCue is what a key names: name, customer, employer, city, ...
func keyCue(key string) string {
	if len(key) < 2 || len(key) > 32 {
		return ""
	}
	key = strings.ToLower(keyFold.Replace(key))
	if c, ok := keyCues[key]; ok {
		return c
	}
	for _, suf := range []string{"_name", "name"} {
		if p, ok := strings.CutSuffix(key, suf); ok && personKeyPrefix[strings.TrimSuffix(p, "_")] {
			return cuePerson
		}
	}
	return ""
}

var keyFold = strings.NewReplacer(" ", "_", "-", "_")

// columnCue reads the column of a table the position a is in: a CSV
// field or a whitespace-aligned column (a DataFrame, a psql table) whose
// header, the first line of the block of lines a is in, names it.
func (sc *scanner) columnCue(a int) string {
	s := sc.s
	ls := strings.LastIndexByte(s[:a], '\n') + 1
	if ls == 0 {
		return ""
	}
	line := s[ls:]
	if nl := strings.IndexByte(line, '\n'); nl >= 0 {
		line = line[:nl]
	}
	col := a - ls
	if !tabular(line) {
		return ""
	}
	// A header found for a row above holds while the rows between are
	// table rows: a long CSV is read once, not 64 lines up for each row.
	if sc.hdrEnd > 0 && sc.tableFrom(sc.hdrReach, ls) {
		sc.hdrReach = ls + len(line)
		return headerCue(s[sc.hdrStart:sc.hdrEnd], line, col)
	}
	// the header: a line above in this block (no blank line between), at
	// most 64 lines and 8 KiB up, with a key at the value's column
	h := ls
	for k := 0; k < 64 && h > 0 && ls-h < 8<<10; k++ {
		p := strings.LastIndexByte(s[:h-1], '\n') + 1
		header := s[p : h-1]
		if ruleLine(header) {
			h = p
			continue // a rule under a header: ----+----
		}
		if strings.TrimSpace(header) == "" || !tabular(header) {
			break // a table's rows and header are contiguous tabular lines
		}
		h = p
		if c := headerCue(header, line, col); c != "" {
			sc.hdrStart, sc.hdrEnd, sc.hdrReach = p, p+len(header), ls+len(line)
			return c
		}
	}
	return ""
}

// tableFrom reports whether the lines from the one holding from to the
// one starting at ls are all rows of one table (tabular or rules, no
// blank line). Rows are judged in order, so each gap is read once.
func (sc *scanner) tableFrom(from, ls int) bool {
	s := sc.s
	if from >= ls {
		return from-ls <= len(s) && strings.LastIndexByte(s[:from], '\n')+1 <= ls
	}
	if from < len(s) && s[from] == '\n' {
		from++
	}
	for p := from; p < ls; {
		q := strings.IndexByte(s[p:], '\n')
		if q < 0 {
			return false
		}
		if l := s[p : p+q]; strings.TrimSpace(l) == "" || !tabular(l) && !ruleLine(l) {
			return false
		}
		p += q + 1
	}
	return true
}

// ruleLine reports a rule under a header: ----+----, ===, |---|---|.
func ruleLine(l string) bool {
	return strings.Trim(l, " -+=|:\t") == "" && strings.TrimSpace(l) != ""
}

// tabular reports a line that may be a table's row: fields separated by
// commas, bars, tabs or runs of spaces.
func tabular(line string) bool {
	t := strings.TrimLeft(line, " \t")
	return strings.IndexByte(t, ',') >= 0 || strings.IndexByte(t, '|') >= 0 ||
		strings.IndexByte(t, '\t') >= 0 || strings.Contains(t, "  ")
}

// row reports a line that is a table's row more surely than tabular:
// bars, tabs, two commas, or two gaps of spaces between values.
func row(line string) bool {
	t := strings.TrimSpace(line)
	return strings.IndexByte(t, '|') >= 0 || strings.IndexByte(t, '\t') >= 0 ||
		strings.Count(t, ",") >= 2 || gaps(t) >= 2
}

// gaps counts the runs of two or more spaces in t.
func gaps(t string) int {
	n := 0
	for i := 0; i+1 < len(t); i++ {
		if t[i] == ' ' && t[i+1] == ' ' && (i == 0 || t[i-1] != ' ') {
			n++
		}
	}
	return n
}

// headerCue is what the column of header that holds line[col:] names.
func headerCue(header, line string, col int) string {
	if !tabular(header) {
		return ""
	}
	if strings.Count(header, ",") >= 1 {
		if strings.Count(line[:col], ",") > strings.Count(header, ",") {
			return ""
		}
		fields := strings.Split(header, ",")
		return keyCue(strings.Trim(strings.TrimSpace(fields[strings.Count(line[:col], ",")]), `"'`))
	}
	if strings.Count(header, "|") >= 1 {
		fields := strings.Split(header, "|")
		if k := strings.Count(line[:col], "|"); k < len(fields) {
			return keyCue(strings.TrimSpace(fields[k]))
		}
		return ""
	}
	if t := strings.TrimLeft(header, " \t"); !strings.Contains(t, "  ") && !strings.Contains(t, "\t") {
		return "" // not a header of aligned columns
	}
	// aligned columns: the header word whose span overlaps the value's
	end := col
	for end < len(line) && line[end] != ' ' && line[end] != '\t' || end+1 < len(line) && line[end] == ' ' && line[end+1] != ' ' {
		end++
	}
	for i := 0; i < len(header); {
		if header[i] == ' ' || header[i] == '\t' {
			i++
			continue
		}
		j := i
		for j < len(header) && header[j] != ' ' && header[j] != '\t' {
			j++
		}
		if i < end && j > col {
			if c := keyCue(header[i:j]); c != "" {
				return c
			}
		}
		i = j
	}
	return ""
}

// titleCase reports a line in which most words are capitalised (a
// heading, "Running Unit Tests on Pull Requests", an exception message):
// capitals there say nothing, so only cues and given names count.
func (sc *scanner) titleCase(a int) bool {
	s := sc.s
	ls := strings.LastIndexByte(s[:a], '\n') + 1
	le := strings.IndexByte(s[a:], '\n')
	if le < 0 {
		le = len(s)
	} else {
		le += a
	}
	if le-ls > 400 {
		ls, le = max(ls, a-200), min(le, a+200)
	}
	if row(s[ls:le]) {
		return false // a table's row: its capitals are its values
	}
	words, caps := 0, 0
	for _, w := range strings.Fields(s[ls:le]) {
		w = strings.Trim(w, `"'(),.:;!?[]{}`)
		if w == "" || !is(w[0], cAlpha) && w[0] < 0x80 {
			continue
		}
		words++
		if r, _ := utf8.DecodeRuneInString(w); unicode.IsUpper(r) {
			caps++
		}
	}
	return words >= 6 && caps*4 >= words*3
}
