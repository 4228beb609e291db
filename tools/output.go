package tools

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"
)

// Output types reported in results.
const (
	OutputJSON  = "json"
	OutputTable = "table"
	OutputText  = "text"
	// OutputError is the output type of a run that failed (success
	// false), whatever its output: the specs' ExecutionResult shape.
	OutputError = "error"
)

// truncate keeps the first max characters (runes) of s and reports whether
// anything was cut. A marker line tells the model how much was dropped.
func truncate(s string, max int) (string, bool) {
	if len(s) <= max { // bytes >= runes: fast path
		return s, false
	}
	n := utf8.RuneCountInString(s)
	if n <= max {
		return s, false
	}
	i, count := 0, 0
	for i = range s {
		if count == max {
			break
		}
		count++
	}
	return s[:i] + fmt.Sprintf("\n... [truncated: %d of %d characters shown]", max, n), true
}

// DetectOutputType classifies program output: json when it parses as a JSON
// object or array, table when it looks like CSV/TSV, a markdown table or a
// column-aligned table, else text.
func DetectOutputType(s string) string {
	t := strings.TrimSpace(s)
	if t == "" {
		return OutputText
	}
	if (t[0] == '{' || t[0] == '[') && json.Valid([]byte(t)) {
		return OutputJSON
	}
	lines := nonEmptyLines(t)
	if len(lines) < 2 {
		return OutputText
	}
	if isTable(lines) {
		return OutputTable
	}
	// A caption line ("Results:") before a table.
	if len(lines) >= 3 && isTable(lines[1:]) {
		return OutputTable
	}
	return OutputText
}

func isTable(lines []string) bool {
	return isMarkdownTable(lines) || isDelimited(lines, '\t') || isDelimited(lines, ',') || isAligned(lines)
}

func nonEmptyLines(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		l = strings.TrimRight(l, "\r")
		if strings.TrimSpace(l) != "" {
			out = append(out, l)
		}
	}
	return out
}

var mdSeparator = regexp.MustCompile(`^\s*\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)*\|?\s*$`)

func isMarkdownTable(lines []string) bool {
	if len(lines) < 2 || !strings.Contains(lines[0], "|") || !mdSeparator.MatchString(lines[1]) {
		return false
	}
	for _, l := range lines {
		if !strings.Contains(l, "|") {
			return false
		}
	}
	return true
}

// isDelimited reports whether every line parses as a record of the same
// width (at least two fields) with delimiter d.
func isDelimited(lines []string, d rune) bool {
	r := csv.NewReader(strings.NewReader(strings.Join(lines, "\n")))
	r.Comma = d
	r.FieldsPerRecord = 0 // all records as wide as the first
	recs, err := r.ReadAll()
	if err != nil || len(recs) < 2 || len(recs[0]) < 2 {
		return false
	}
	// Prose with one comma per line is not a table: require that no field
	// of the header is long prose.
	for _, f := range recs[0] {
		if len(f) > 64 {
			return false
		}
	}
	return true
}

var (
	columnGap = regexp.MustCompile(`\s{2,}\S`)        // a gap, then a column starts
	columnEnd = regexp.MustCompile(`\S(\s{2,}|\s*$)`) // a column ends at a gap or the line end
)

// isAligned reports whether the lines are columns separated by runs of two
// or more spaces (pandas' to_string and describe, ps, ls -l style): every
// line has a gap, and some column starts (left-aligned) or ends
// (right-aligned) at the same position in every line.
func isAligned(lines []string) bool {
	starts := make([]map[int]bool, 0, len(lines))
	ends := make([]map[int]bool, 0, len(lines))
	for _, l := range lines {
		if strings.Contains(l, "\t") {
			return false
		}
		s := map[int]bool{}
		for _, m := range columnGap.FindAllStringIndex(l, -1) {
			s[m[1]-1] = true
		}
		if len(s) == 0 {
			return false
		}
		e := map[int]bool{}
		for _, m := range columnEnd.FindAllStringIndex(l, -1) {
			e[m[0]] = true
		}
		starts, ends = append(starts, s), append(ends, e)
	}
	return shareKey(starts) || shareKey(ends)
}

// shareKey reports whether some key is in every set.
func shareKey(sets []map[int]bool) bool {
	if len(sets) == 0 {
		return false
	}
next:
	for k := range sets[0] {
		for _, s := range sets[1:] {
			if !s[k] {
				continue next
			}
		}
		return true
	}
	return false
}

// parseOutput parses program output in format (json, csv or text). For text
// it returns nil. A parse failure is returned as a message, never panics.
func parseOutput(format, s string) (any, string) {
	switch format {
	case "json":
		t := strings.TrimSpace(s)
		if t == "" {
			return nil, "output is empty; expected JSON"
		}
		dec := json.NewDecoder(strings.NewReader(t))
		dec.UseNumber()
		var v any
		if err := dec.Decode(&v); err != nil {
			return nil, fmt.Sprintf("output is not valid JSON: %v", err)
		}
		if dec.More() {
			return nil, "output is not valid JSON: more than one JSON value"
		}
		return v, ""
	case "csv":
		t := strings.TrimSpace(s)
		if t == "" {
			return nil, "output is empty; expected CSV"
		}
		r := csv.NewReader(bytes.NewReader([]byte(t)))
		recs, err := r.ReadAll()
		if err != nil {
			return nil, fmt.Sprintf("output is not valid CSV: %v", err)
		}
		header := recs[0]
		rows := make([]map[string]string, 0, len(recs)-1)
		for _, rec := range recs[1:] {
			row := make(map[string]string, len(header))
			for i, h := range header {
				row[h] = rec[i]
			}
			rows = append(rows, row)
		}
		return rows, ""
	}
	return nil, ""
}
