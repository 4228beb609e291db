package guard

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
)

// hostPrefixes are host directories whose paths never leave the daemon.
// Sandbox paths (/home/user, /tmp, /workspace) stay: users need them.
var hostPrefixes = []string{
	"/run/sandlot", "/var/run/sandlot", "/var/lib/sandlot", "/var/cache/sandlot", "/etc/sandlot",
	"/tmp/sandlot", "/sys/fs/cgroup", "/proc/", "/root/", "/var/lib/containers", "/run/runc", "/run/crun",
}

var (
	pathsOnce  sync.Once
	localPaths []string // the daemon's own paths: executable dir, build dirs, GOROOT
	defGuard   *Guard
)

func initPaths() {
	add := func(p string) {
		if p = filepath.Clean(p); len(p) > 1 && p != "/" && p != "/tmp" && p != "/home" {
			localPaths = append(localPaths, p+"/")
		}
	}
	if exe, err := os.Executable(); err == nil {
		add(filepath.Dir(exe))
	}
	if _, file, _, ok := runtime.Caller(0); ok {
		add(filepath.Dir(filepath.Dir(file))) // the module root at build time
	}
	if r := runtime.GOROOT(); r != "" {
		add(r)
	}
	if home, err := os.UserHomeDir(); err == nil && home != "/" {
		add(filepath.Join(home, "go"))
	}
	defGuard, _ = New(Config{Mode: ModeEnforce})
}

// Internal is what replaces a host path or a stack frame.
const Internal = "[internal]"

// SanitizeError strips host details from an error message (host paths
// such as /run/sandlot/..., the daemon's own file paths, Go stack traces
// "goroutine N [...]" and source positions "file.go:123") and then redacts
// it in enforce mode with the default regions.
func SanitizeError(s string) string {
	pathsOnce.Do(initPaths)
	lines := strings.Split(s, "\n")
	out := lines[:0]
	inTrace := false
	for _, line := range lines {
		t := strings.TrimSpace(line)
		if goroutineHeader(t) {
			inTrace = true
			continue
		}
		if inTrace {
			if t == "" {
				inTrace = false
			}
			continue // frames and "created by" lines
		}
		if goPos(t) && (strings.HasPrefix(line, "\t") || strings.HasPrefix(t, "/")) {
			continue // a bare frame line
		}
		out = append(out, scrubPaths(line))
	}
	return defGuard.Text(context.Background(), "", strings.Join(out, "\n"))
}

func goroutineHeader(t string) bool {
	rest, ok := strings.CutPrefix(t, "goroutine ")
	if !ok {
		return false
	}
	i := 0
	for i < len(rest) && rest[i] >= '0' && rest[i] <= '9' {
		i++
	}
	return i > 0 && strings.HasPrefix(rest[i:], " [")
}

// goPos reports whether t contains "something.go:123".
func goPos(t string) bool {
	for from := 0; ; {
		k := strings.Index(t[from:], ".go:")
		if k < 0 {
			return false
		}
		p := from + k + 4
		if p < len(t) && t[p] >= '0' && t[p] <= '9' {
			return true
		}
		from = p
	}
}

// scrubPaths replaces each whitespace-separated token that is or contains a
// host path or a Go source position.
func scrubPaths(line string) string {
	if !strings.Contains(line, "/") && !strings.Contains(line, ".go:") {
		return line
	}
	var b strings.Builder
	i := 0
	for i < len(line) {
		if isSpace(line[i]) {
			b.WriteByte(line[i])
			i++
			continue
		}
		j := i
		for j < len(line) && !isSpace(line[j]) {
			j++
		}
		b.WriteString(scrubToken(line[i:j]))
		i = j
	}
	return b.String()
}

func scrubToken(tok string) string {
	if goPos(tok) {
		return Internal
	}
	for _, set := range [][]string{hostPrefixes, localPaths} {
		for _, p := range set {
			if k := strings.Index(tok, p); k >= 0 && (k == 0 || !is(tok[k-1], cAlnum)) {
				return tok[:k] + Internal + trailing(tok[k:])
			} else if k < 0 && strings.HasSuffix(p, "/") && strings.HasSuffix(tok, p[:len(p)-1]) {
				k = len(tok) - len(p) + 1
				if k == 0 || !is(tok[k-1], cAlnum) {
					return tok[:k] + Internal
				}
			}
		}
	}
	return tok
}

// trailing keeps closing punctuation after a path ("open /x/y: no such").
func trailing(p string) string {
	e := len(p)
	for e > 0 && strings.IndexByte(":,;)]}'\"", p[e-1]) >= 0 {
		e--
	}
	return p[e:]
}
