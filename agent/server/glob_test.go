package server

import "testing"

func TestGlobMatch(t *testing.T) {
	cases := []struct {
		pattern, path string
		match, under  bool
	}{
		{"*.py", "a.py", true, false},
		{"*.py", "d/a.py", false, false},
		{"**/*.py", "a.py", true, true},
		{"**/*.py", "d/e/a.py", true, true},
		{"src/**", "src/a/b", true, true},
		{"src/**/x.go", "src/x.go", true, true},
		{"src/**/x.go", "src/a/b/x.go", true, true},
		{"src/*/x.go", "src/a", false, true},
		{"src/*/x.go", "lib", false, false},
		{"a/b", "a", false, true},
		{"[ab].txt", "b.txt", true, false},
	}
	for _, tc := range cases {
		m, err := compileGlob(tc.pattern)
		if err != nil {
			t.Fatal(err)
		}
		if got := m.match(tc.path); got != tc.match {
			t.Errorf("match(%q, %q) = %v", tc.pattern, tc.path, got)
		}
		if got := m.couldMatchUnder(tc.path); got != tc.under {
			t.Errorf("couldMatchUnder(%q, %q) = %v", tc.pattern, tc.path, got)
		}
	}
	if _, err := compileGlob("[bad"); err == nil {
		t.Error("bad pattern compiled")
	}
	if p := (&globMatcher{segs: []string{"src", "pkg", "*.go"}}).prefix(); p != "src/pkg" {
		t.Errorf("prefix = %q", p)
	}
}
