package docs

import (
	"bufio"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// checkRow returns what is wrong with one row; tests indexes the
// repository's test functions (testFunctions).
func checkRow(r row, tests map[string][]string) []string {
	var out []string
	at := func(format string, args ...any) {
		out = append(out, fmt.Sprintf("line %d: "+format, append([]any{r.line}, args...)...))
	}
	if r.requirement == "" {
		at("no requirement")
	}
	switch r.status {
	case "met":
		if len(r.tests) == 0 {
			at("met, but names no test")
		}
	case "partly", "not", "n/a":
		if r.note == "" {
			at("%s, but the note does not say why", r.status)
		}
	default:
		at("status %q; want one of %s", r.status, strings.Join(statuses, ", "))
	}
	if len(r.tests) > 0 && len(r.where) == 0 {
		at("names tests but no path they live under")
	}
	for _, w := range r.where {
		if w != path.Clean(w) || path.IsAbs(w) || strings.HasPrefix(w, "../") || strings.ContainsAny(w, " *`()") {
			at("Where entry %q is not a clean path relative to the repository root", w)
			continue
		}
		if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(w))); err != nil {
			at("Where entry %q does not exist", w)
		}
	}
	for _, name := range r.tests {
		dirs, ok := tests[name]
		if !ok {
			at("test %q: no such test function in the repository", name)
			continue
		}
		if len(r.where) > 0 && !slices.ContainsFunc(dirs, func(d string) bool { return under(d, r.where) }) {
			at("test %q lives in %s, under none of the row's paths %v", name, strings.Join(dirs, ", "), r.where)
		}
	}
	return out
}

// under reports whether directory dir is one of where's entries (a
// file's entry stands for its directory) or below one.
func under(dir string, where []string) bool {
	for _, w := range where {
		base := w
		if fi, err := os.Stat(filepath.Join(root, filepath.FromSlash(w))); err == nil && !fi.IsDir() {
			base = path.Dir(w)
		}
		if base == "." || dir == base || strings.HasPrefix(dir, base+"/") {
			return true
		}
	}
	return false
}

// checkOrder returns the faults of a specification's section: rows of
// another spec, or rows out of the order of the spec's sections.
func checkOrder(s *section) []string {
	if !s.spec || len(s.rows) == 0 {
		return nil
	}
	var out []string
	first := s.rows[0].spec
	for i, r := range s.rows {
		if r.spec != first {
			out = append(out, fmt.Sprintf("line %d: spec %s in the section of spec %s", r.line, r.spec, first))
		}
		if i > 0 && slices.Compare(r.ref, s.rows[i-1].ref) < 0 {
			out = append(out, fmt.Sprintf("line %d: §%s after §%s: keep a spec's rows in the order of its sections", r.line, refString(r.ref), refString(s.rows[i-1].ref)))
		}
	}
	return out
}

func refString(ref []int) string {
	parts := make([]string, len(ref))
	for i, n := range ref {
		parts[i] = strconv.Itoa(n)
	}
	return strings.Join(parts, ".")
}

var testFunc = regexp.MustCompile(`^func ((?:Test|Benchmark|Fuzz)[A-Za-z0-9_]*)\(`)

// testFunctions indexes the test, benchmark and fuzz functions of every
// _test.go file in the repository (the nested test modules too, which
// `make test` runs) by name: the directories, relative to the root, that
// declare one of that name.
func testFunctions(t *testing.T) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	err := filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if e.IsDir() {
			if n := e.Name(); p != root && (strings.HasPrefix(n, ".") || n == "node_modules" || n == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, "_test.go") {
			return nil
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		rel, err := filepath.Rel(root, filepath.Dir(p))
		if err != nil {
			return err
		}
		dir := filepath.ToSlash(rel)
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			if m := testFunc.FindStringSubmatch(sc.Text()); m != nil && !slices.Contains(out[m[1]], dir) {
				out[m[1]] = append(out[m[1]], dir)
			}
		}
		return sc.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) == 0 {
		t.Fatal("no test functions found under the repository root")
	}
	return out
}
