package deptest

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestArchitectureListsEveryPackage: docs/architecture.md's package table
// has a row for every package of the module, and names no package that is
// gone, so the map of the code stays true to it.
func TestArchitectureListsEveryPackage(t *testing.T) {
	b, err := os.ReadFile("../../docs/architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := tableNames(t, string(b), "## Packages")
	var pkgs []string
	for _, p := range Packages(t) {
		pkgs = append(pkgs, p.ImportPath)
		if !rows[p.ImportPath] {
			t.Errorf("docs/architecture.md has no row for the package %s", p.ImportPath)
		}
	}
	for name := range rows {
		// Nested modules (a go.mod of their own) are listed by hand;
		// go list of this module does not see them.
		if !slices.Contains(pkgs, name) && !inNestedModule(name) {
			t.Errorf("docs/architecture.md has a row for %s, which is no package of the module", name)
		}
	}
}

// inNestedModule reports whether the directory name (relative to the
// module root) exists inside a nested module: it or a parent holds a go.mod.
func inNestedModule(name string) bool {
	if _, err := os.Stat(filepath.Join("../..", name)); err != nil {
		return false
	}
	for dir := name; dir != "." && dir != "/"; dir = filepath.Dir(dir) {
		if _, err := os.Stat(filepath.Join("../..", dir, "go.mod")); err == nil {
			return true
		}
	}
	return false
}

// tableNames returns the names in backquotes of the first column of the
// table under heading.
func tableNames(t *testing.T, doc, heading string) map[string]bool {
	t.Helper()
	_, rest, ok := strings.Cut(doc, "\n"+heading+"\n")
	if !ok {
		t.Fatalf("no %q section", heading)
	}
	if i := strings.Index(rest, "\n## "); i >= 0 {
		rest = rest[:i]
	}
	quoted := regexp.MustCompile("`([^`]+)`")
	names := map[string]bool{}
	for _, line := range strings.Split(rest, "\n") {
		cells := strings.Split(line, "|")
		if !strings.HasPrefix(line, "|") || len(cells) < 3 {
			continue
		}
		for _, m := range quoted.FindAllStringSubmatch(cells[1], -1) {
			names[m[1]] = true
		}
	}
	if len(names) == 0 {
		t.Fatalf("no package names in the %q table", heading)
	}
	return names
}
