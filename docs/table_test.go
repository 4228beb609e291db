package docs

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// The reader of requirements.md and requirements-issues.md. A document is a list of sections
// ("## " headings), each holding one table whose header names its
// columns; the columns are found by name, so a section may add one (the
// specifications' sections have "Spec"). A generated block between
// totalsBegin and totalsEnd holds the totals and is not a section's table.

const (
	totalsBegin = "<!-- totals: computed from the rows by docs/requirements_test.go; `go generate ./docs` rewrites this block -->"
	totalsEnd   = "<!-- /totals -->"
)

// Statuses a row may have, in the order the totals show them.
var statuses = []string{"met", "partly", "not", "n/a"}

// row is one requirement.
type row struct {
	line        int    // 1-based line in the document
	spec        string // "000".."004" in a specification's section, else ""
	ref         []int  // the spec's section number, 7.3 = [7 3]
	requirement string
	status      string
	where       []string // paths relative to the repository root
	tests       []string // Go test, benchmark or fuzz function names
	note        string
}

// section is one "## " heading and its table.
type section struct {
	name string
	spec bool // its table has a Spec column
	rows []row
}

// document is a requirements page, read.
type document struct {
	sections []*section
	// lines of the file, and the totals block's first and last line
	// (0-based, the markers themselves); begin < 0 when absent.
	lines      []string
	begin, end int
}

var specRef = regexp.MustCompile(`^(00[0-4]) §([0-9]+(?:\.[0-9]+)*)$`)

// parse reads a requirements document. It fails on what it cannot read:
// a table outside a section, a row whose cells do not match its header, a
// header without the required columns, a malformed Spec cell.
func parse(text string) (*document, error) {
	d := &document{lines: strings.Split(text, "\n"), begin: -1, end: -1}
	var cur *section
	var cols map[string]int // column index by lower-case name; nil outside a table
	ncols := 0
	for i := 0; i < len(d.lines); i++ {
		l := d.lines[i]
		switch {
		case l == totalsBegin:
			if d.begin >= 0 {
				return nil, fmt.Errorf("line %d: a second totals block", i+1)
			}
			d.begin = i
			for i++; i < len(d.lines) && d.lines[i] != totalsEnd; i++ {
			}
			if i == len(d.lines) {
				return nil, fmt.Errorf("line %d: the totals block has no end marker %q", d.begin+1, totalsEnd)
			}
			d.end = i
			cols = nil
			continue
		case strings.HasPrefix(l, "## "):
			cur = &section{name: strings.TrimSpace(strings.TrimPrefix(l, "## "))}
			d.sections = append(d.sections, cur)
			cols = nil
			continue
		case !strings.HasPrefix(l, "|"):
			cols = nil
			continue
		}
		cells := splitRow(l)
		if cols == nil { // a header, then its separator
			if cur == nil {
				return nil, fmt.Errorf("line %d: a table before the first section", i+1)
			}
			if len(cur.rows) > 0 {
				return nil, fmt.Errorf("line %d: a second table in section %q", i+1, cur.name)
			}
			if i+1 >= len(d.lines) || !strings.HasPrefix(d.lines[i+1], "|--") && !strings.HasPrefix(d.lines[i+1], "| --") {
				return nil, fmt.Errorf("line %d: a table header without its separator line", i+1)
			}
			cols = map[string]int{}
			for j, c := range cells {
				cols[strings.ToLower(c)] = j
			}
			for _, want := range []string{"requirement", "status", "where", "test", "note"} {
				if _, ok := cols[want]; !ok {
					return nil, fmt.Errorf("line %d: the table of %q has no column %q", i+1, cur.name, want)
				}
			}
			_, cur.spec = cols["spec"]
			ncols = len(cells)
			i++ // the separator
			continue
		}
		if len(cells) != ncols {
			return nil, fmt.Errorf("line %d: %d cells, the header has %d (a | inside a cell must be written \\|)", i+1, len(cells), ncols)
		}
		r := row{
			line:        i + 1,
			requirement: cells[cols["requirement"]],
			status:      cells[cols["status"]],
			where:       list(cells[cols["where"]]),
			tests:       list(cells[cols["test"]]),
			note:        cells[cols["note"]],
		}
		if cur.spec {
			m := specRef.FindStringSubmatch(cells[cols["spec"]])
			if m == nil {
				return nil, fmt.Errorf("line %d: Spec %q is not of the form \"000 §7.3\"", i+1, cells[cols["spec"]])
			}
			r.spec = m[1]
			for _, p := range strings.Split(m[2], ".") {
				n, _ := strconv.Atoi(p)
				r.ref = append(r.ref, n)
			}
		}
		cur.rows = append(cur.rows, r)
	}
	return d, nil
}

// splitRow returns the trimmed cells of a table line; \| is a | inside a
// cell.
func splitRow(l string) []string {
	l = strings.TrimSpace(l)
	l = strings.TrimPrefix(l, "|")
	l = strings.TrimSuffix(l, "|")
	var cells []string
	var b strings.Builder
	for i := 0; i < len(l); i++ {
		switch {
		case l[i] == '\\' && i+1 < len(l) && l[i+1] == '|':
			b.WriteString(`\|`)
			i++
		case l[i] == '|':
			cells = append(cells, strings.TrimSpace(b.String()))
			b.Reset()
		default:
			b.WriteByte(l[i])
		}
	}
	return append(cells, strings.TrimSpace(b.String()))
}

// list splits a cell of comma-separated entries.
func list(cell string) []string {
	var out []string
	for _, s := range strings.Split(cell, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// counts are a section's rows by status.
type counts map[string]int

func (c counts) total() int {
	n := 0
	for _, v := range c {
		n += v
	}
	return n
}

func (c counts) add(o counts) {
	for k, v := range o {
		c[k] += v
	}
}

func countRows(rows []row) counts {
	c := counts{}
	for _, r := range rows {
		c[r.status]++
	}
	return c
}

// totals renders the totals block (markers included) for d's rows.
func totals(d *document) []string {
	specs, others, all := counts{}, counts{}, counts{}
	var table []string
	line := func(name string, c counts) {
		cells := []string{name, strconv.Itoa(c.total())}
		for _, s := range statuses {
			cells = append(cells, strconv.Itoa(c[s]))
		}
		table = append(table, "| "+strings.Join(cells, " | ")+" |")
	}
	sum := func(c counts) string {
		return fmt.Sprintf("%d rows: %d met, %d partly, %d not, %d n/a", c.total(), c["met"], c["partly"], c["not"], c["n/a"])
	}
	for _, spec := range []bool{true, false} {
		for _, s := range d.sections {
			if s.spec != spec {
				continue
			}
			if len(s.rows) == 0 {
				continue // prose only
			}
			c := countRows(s.rows)
			line(s.name, c)
			all.add(c)
			if spec {
				specs.add(c)
			} else {
				others.add(c)
			}
		}
		if spec {
			line("**The specifications (000–004)**", specs)
		} else {
			line("**Earlier issues and the operator review**", others)
		}
	}
	line("**All rows**", all)
	out := []string{
		totalsBegin,
		"**The specifications: " + sum(specs) + ". All rows: " + sum(all) + ".**",
		"",
		"| Section | Rows | met | partly | not | n/a |",
		"| --- | ---: | ---: | ---: | ---: | ---: |",
	}
	out = append(out, table...)
	return append(out, totalsEnd)
}
