package testenv

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// ChildPIDs returns the pids of host process pid's children, read from
// each /proc/<pid>/stat ("pid (comm) state ppid ..."; comm may hold spaces
// and parentheses, so the fields are read after its last ')').
func ChildPIDs(pid int) []string {
	var out []string
	want := strconv.Itoa(pid)
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, p := range stats {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		i := strings.LastIndexByte(string(b), ')')
		if i < 0 {
			continue
		}
		if f := strings.Fields(string(b[i+1:])); len(f) > 1 && f[1] == want {
			out = append(out, filepath.Base(filepath.Dir(p)))
		}
	}
	return out
}
