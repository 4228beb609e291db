package docs

import (
	"flag"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite the totals block of requirements.md from the rows of both requirements pages")

// root is the repository root, seen from this package's directory.
const root = ".."

// The requirements are two pages: the specifications' rows with the
// totals of both pages, then the earlier issues' rows. Their sections are
// read as one document.
const (
	requirementsFile = "requirements.md"
	issuesFile       = "requirements-issues.md"
)

// TestRequirements checks requirements.md and requirements-issues.md
// against themselves and the tree: the totals block (in requirements.md,
// and only there) is what the rows of both add up to; every row has a known
// status, a met row names a test and any other row says why; every path a
// row names exists, and every test it names is a function of a _test.go
// file under one of those paths; the specifications' rows stay in the
// order of their sections. With -update it rewrites the totals block
// (the rows' other faults still fail).
func TestRequirements(t *testing.T) {
	read := func(file string) *document {
		t.Helper()
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		d, err := parse(string(b))
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if len(d.sections) == 0 {
			t.Fatalf("%s has no sections", file)
		}
		return d
	}
	file := requirementsFile
	d, issues := read(file), read(issuesFile)
	if d.begin < 0 {
		t.Fatalf("%s has no totals block; put the two lines\n%s\n%s\nwhere it goes and run go generate ./docs", file, totalsBegin, totalsEnd)
	}
	if issues.begin >= 0 {
		t.Fatalf("%s has a totals block at line %d; the totals of both pages are in %s", issuesFile, issues.begin+1, file)
	}

	want := totals(&document{sections: slices.Concat(d.sections, issues.sections)})
	got := d.lines[d.begin : d.end+1]
	if diff := cmp.Diff(want, got); diff != "" {
		if *update {
			out := slices.Concat(d.lines[:d.begin], want, d.lines[d.end+1:])
			if err := os.WriteFile(file, []byte(strings.Join(out, "\n")), 0o644); err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: totals rewritten", file)
		} else {
			t.Errorf("%s: the totals block disagrees with the rows (-computed +written); run go generate ./docs:\n%s", file, diff)
		}
	}

	tests := testFunctions(t)
	for _, doc := range []struct {
		file string
		d    *document
	}{{file, d}, {issuesFile, issues}} {
		for _, s := range doc.d.sections {
			for _, p := range checkOrder(s) {
				t.Errorf("%s %s", doc.file, p)
			}
			for _, r := range s.rows {
				for _, p := range checkRow(r, tests) {
					t.Errorf("%s %s", doc.file, p)
				}
			}
		}
	}
}

// TestChecks: each fault a row can have is reported, and a sound row
// passes.
func TestChecks(t *testing.T) {
	tests := map[string][]string{"TestInContexts": {"contexts"}, "TestInTools": {"tools"}}
	for _, tc := range []struct {
		name string
		r    row
		want string // a substring of the one problem; "" for none
	}{
		{"sound", row{requirement: "r", status: "met", where: []string{"contexts"}, tests: []string{"TestInContexts"}}, ""},
		{"file stands for its directory", row{requirement: "r", status: "met", where: []string{"contexts/contexts.go"}, tests: []string{"TestInContexts"}}, ""},
		{"subdirectory", row{requirement: "r", status: "met", where: []string{"."}, tests: []string{"TestInTools"}}, ""},
		{"partly with a reason", row{requirement: "r", status: "partly", note: "why"}, ""},
		{"n/a with a reason", row{requirement: "r", status: "n/a", note: "the application's"}, ""},
		{"met without a test", row{requirement: "r", status: "met", where: []string{"contexts"}}, "names no test"},
		{"not without a reason", row{requirement: "r", status: "not"}, "does not say why"},
		{"unknown status", row{requirement: "r", status: "done", note: "x"}, `status "done"`},
		{"no requirement", row{status: "not", note: "x"}, "no requirement"},
		{"missing path", row{requirement: "r", status: "not", note: "x", where: []string{"no/such/dir"}}, "does not exist"},
		{"prose in the path", row{requirement: "r", status: "not", note: "x", where: []string{"cli (`--flag`)"}}, "not a clean path"},
		{"path outside", row{requirement: "r", status: "not", note: "x", where: []string{"../etc"}}, "not a clean path"},
		{"missing test", row{requirement: "r", status: "met", where: []string{"contexts"}, tests: []string{"TestNobodyWroteThis"}}, "no such test function"},
		{"test elsewhere", row{requirement: "r", status: "met", where: []string{"contexts"}, tests: []string{"TestInTools"}}, "under none of the row's paths"},
		{"tests without paths", row{requirement: "r", status: "partly", note: "x", tests: []string{"TestInTools"}}, "no path they live under"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := checkRow(tc.r, tests)
			switch {
			case tc.want == "" && len(got) > 0:
				t.Errorf("problems %q, want none", got)
			case tc.want != "" && (len(got) != 1 || !strings.Contains(got[0], tc.want)):
				t.Errorf("problems %q, want one saying %q", got, tc.want)
			}
		})
	}
}

// TestParseAndTotals reads a small document: the sections, their rows
// and spec references, and the totals those rows give; then the ways a
// document is refused.
func TestParseAndTotals(t *testing.T) {
	doc := strings.Join([]string{
		"# Requirements",
		totalsBegin,
		"stale",
		totalsEnd,
		"## Specification 000: one",
		"",
		"| Spec | Requirement | Status | Where | Test | Note |",
		"|---|---|---|---|---|---|",
		"| 000 §2.1 | a | met | contexts | TestX |  |",
		"| 000 §10 | b \\| c | not | contexts |  | why |",
		"",
		"## Prose only",
		"",
		"Words.",
		"",
		"## Issue",
		"",
		"| Requirement | Status | Where | Test | Note |",
		"| --- | --- | --- | --- | --- |",
		"| d | n/a |  |  | the app's |",
		"| e | partly | tools, contexts | TestY, TestZ | half |",
	}, "\n")
	d, err := parse(doc)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.sections) != 3 || !d.sections[0].spec || d.sections[2].spec || len(d.sections[1].rows) != 0 {
		t.Fatalf("sections %+v", d.sections)
	}
	r := d.sections[0].rows[1]
	if r.spec != "000" || !slices.Equal(r.ref, []int{10}) || r.requirement != `b \| c` || r.status != "not" || r.line != 10 {
		t.Errorf("row %+v", r)
	}
	if e := d.sections[2].rows[1]; !slices.Equal(e.where, []string{"tools", "contexts"}) || !slices.Equal(e.tests, []string{"TestY", "TestZ"}) {
		t.Errorf("row %+v", e)
	}
	want := []string{
		totalsBegin,
		"**The specifications: 2 rows: 1 met, 0 partly, 1 not, 0 n/a. All rows: 4 rows: 1 met, 1 partly, 1 not, 1 n/a.**",
		"",
		"| Section | Rows | met | partly | not | n/a |",
		"| --- | ---: | ---: | ---: | ---: | ---: |",
		"| Specification 000: one | 2 | 1 | 0 | 1 | 0 |",
		"| **The specifications (000–004)** | 2 | 1 | 0 | 1 | 0 |",
		"| Issue | 2 | 0 | 1 | 0 | 1 |",
		"| **Earlier issues and the operator review** | 2 | 0 | 1 | 0 | 1 |",
		"| **All rows** | 4 | 1 | 1 | 1 | 1 |",
		totalsEnd,
	}
	if diff := cmp.Diff(want, totals(d)); diff != "" {
		t.Errorf("totals (-want +got):\n%s", diff)
	}
	if d.begin != 1 || d.end != 3 {
		t.Errorf("totals block at lines %d..%d, want 1..3", d.begin, d.end)
	}

	// Out of order, and another spec's row in the section.
	d.sections[0].rows[0].ref, d.sections[0].rows[1].spec = []int{11}, "001"
	if got := checkOrder(d.sections[0]); len(got) != 2 {
		t.Errorf("checkOrder = %q, want the order and the spec reported", got)
	}

	const head = "## S\n\n| Requirement | Status | Where | Test | Note |\n|---|---|---|---|---|\n"
	for _, tc := range []struct{ name, doc, want string }{
		{"table before a section", "| a | b |\n|---|---|\n", "before the first section"},
		{"header without separator", "## S\n| Requirement | Status | Where | Test | Note |\n| x | met | a | T | |\n", "without its separator"},
		{"missing column", "## S\n| Requirement | Status | Where | Test |\n|---|---|---|---|\n", `no column "note"`},
		{"cells short", head + "| a | met | b |\n", "3 cells, the header has 5"},
		{"a | not escaped", head + "| a | b | met | c | T | |\n", "6 cells"},
		{"bad spec reference", "## S\n| Spec | Requirement | Status | Where | Test | Note |\n|---|---|---|---|---|---|\n| 7.3 | a | met | b | T | |\n", "not of the form"},
		{"second table", head + "| a | met | b | T | |\n\n| Requirement | Status | Where | Test | Note |\n|---|---|---|---|---|\n", "a second table"},
		{"unterminated totals", totalsBegin + "\n| x |\n", "no end marker"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := parse(tc.doc); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("parse = %v, want an error saying %q", err, tc.want)
			}
		})
	}
}
