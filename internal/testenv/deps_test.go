package testenv

import (
	"bufio"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// installedOutsideTable are binaries scripts/deps.sh provides by other means
// than a Debian package row: the Go toolchain CI puts on PATH, and runsc,
// which deps.sh builds with go install.
var installedOutsideTable = map[string]bool{"cmd:go": true, "cmd:runsc": true}

// TestDepsCoverTestPreconditions keeps scripts/deps.sh honest: every
// binary a test asks for through RequireBinary, and every host file through
// RequireFile, has a row in the test mode of the deps table, so a fresh
// machine installs it and `deps.sh test` verifies it. A new precondition
// without a row fails here, not on somebody's new machine.
func TestDepsCoverTestPreconditions(t *testing.T) {
	root := moduleRoot(t)
	rows := depsRows(t, filepath.Join(root, "scripts", "deps.sh"))
	call := regexp.MustCompile(`Require(Binary|File)\([^,]+,\s*"([^"]+)"\)`)
	used := map[string][]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "node_modules" || d.Name() == ".git" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, m := range call.FindAllSubmatch(b, -1) {
			rel, _ := filepath.Rel(root, p)
			key := "cmd:" + string(m[2])
			if string(m[1]) == "File" {
				key = "file:" + string(m[2])
			}
			used[key] = append(used[key], rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(used) == 0 {
		t.Fatal("found no RequireBinary/RequireFile call: the scan is broken")
	}
	for key, files := range used {
		if installedOutsideTable[key] {
			continue
		}
		kind, name, _ := strings.Cut(key, ":")
		if !rows[key] && !(kind == "cmd" && rows["cmd:"+filepath.Base(name)]) {
			t.Errorf("%s is required by %v but scripts/deps.sh has no test-mode row %s", name, files, key)
		}
	}
}

// depsRows returns the checks of deps.sh's table that apply in test mode.
func depsRows(t *testing.T, path string) map[string]bool {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows := map[string]bool{}
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "rows() {"):
			in = true
		case in && line == "EOF":
			in = false
		case in:
			fields := strings.Fields(line)
			if len(fields) == 3 && strings.Contains(fields[0], "t") {
				rows[fields[1]] = true
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(rows) == 0 {
		t.Fatal("no rows parsed from scripts/deps.sh")
	}
	return rows
}

func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("go.mod not found")
		}
		dir = parent
	}
}
