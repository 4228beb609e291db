package doctor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandlot/sandlot/internal/openat2"
	"github.com/sandlot/sandlot/runtime"
)

// strayName is a sandbox's cgroup name (runtime.NewID's "sb-" ids, within
// runtime.ValidID): nothing else under a sandlot parent is ever removed.
var strayName = regexp.MustCompile(`^` + runtime.IDPrefix + `[a-z0-9][a-z0-9-]{0,59}$`)

// strayMinAge spares a cgroup made this recently: a runtime makes the
// sandbox's cgroups before it moves the first process in, so a young
// empty one may be a create under way (of a daemon on another state dir).
const strayMinAge = time.Minute

// cgroupParents are the sandlot cgroup parents under cfg.Root: the v2
// one (/sys/fs/cgroup/sandlot) and each v1 hierarchy's (and a hybrid
// host's unified one), host paths under Root. Links (v1's cpu ->
// cpu,cpuacct) are not followed: the hierarchy is listed under its name.
func (cfg Config) cgroupParents() []string {
	base := cfg.host("/sys/fs/cgroup")
	var out []string
	if isDir(filepath.Join(base, "sandlot")) {
		out = append(out, filepath.Join(base, "sandlot"))
	}
	ents, _ := os.ReadDir(base)
	for _, e := range ents {
		if e.Type().IsDir() && isDir(filepath.Join(base, e.Name(), "sandlot")) {
			out = append(out, filepath.Join(base, e.Name(), "sandlot"))
		}
	}
	return out
}

// isDir is a directory, not a link to one.
func isDir(p string) bool {
	fi, err := os.Lstat(p)
	return err == nil && fi.IsDir()
}

// StrayCgroups lists the sandbox cgroups (host paths under cfg.Root) that
// hold no process and no child cgroup, belong to no sandbox of
// cfg.StateDir or cfg.MoreStateDirs (their bundles/<id>), and were first
// seen over a minute ago (stray's age): what a daemon killed before its
// teardown leaves behind.
func StrayCgroups(cfg Config) []string {
	cfg = cfg.withDefaults()
	var out []string
	for _, parent := range cfg.cgroupParents() {
		ents, err := os.ReadDir(parent)
		if err != nil {
			continue
		}
		for _, e := range ents {
			if cfg.stray(parent, e.Name(), cfg.now()) {
				out = append(out, filepath.Join(parent, e.Name()))
			}
		}
	}
	return out
}

// stray judges one entry of a cgroup parent (StrayCgroups).
func (cfg Config) stray(parent, name string, now time.Time) bool {
	if !strayName.MatchString(name) || cfg.only != nil && !cfg.only(name) {
		return false
	}
	p := filepath.Join(parent, name)
	// The age is the directory's mtime, which on cgroupfs is when its
	// inode was first looked up, not when the cgroup was made: "first
	// seen over a minute ago".
	fi, err := os.Lstat(p)
	if err != nil || !fi.IsDir() || now.Sub(fi.ModTime()) < strayMinAge {
		return false
	}
	for _, dir := range cfg.stateDirs() {
		if _, err := os.Lstat(filepath.Join(dir, "bundles", name)); !errors.Is(err, os.ErrNotExist) {
			return false // a state dir knows it (or cannot say)
		}
	}
	ents, err := os.ReadDir(p)
	if err != nil {
		return false
	}
	for _, e := range ents {
		switch {
		case e.IsDir():
			return false // a child cgroup
		case e.Name() == "cgroup.procs" && !e.Type().IsRegular():
			return false
		case e.Name() == "cgroup.procs":
			b, err := os.ReadFile(filepath.Join(p, e.Name()))
			if err != nil || strings.TrimSpace(string(b)) != "" {
				return false // a process, or no way to know
			}
		}
	}
	return true
}

// RemoveStrayCgroups removes the cgroups StrayCgroups lists, each judged
// again at its removal: rmdir only (the kernel refuses a cgroup with a
// process or a child), through its parent opened without following any
// link. It returns the paths removed; failures are joined in the error.
func RemoveStrayCgroups(cfg Config) ([]string, error) {
	cfg = cfg.withDefaults()
	var removed []string
	var errs []error
	for _, p := range StrayCgroups(cfg) {
		if !cfg.stray(filepath.Dir(p), filepath.Base(p), cfg.now()) {
			continue
		}
		if err := openat2.Rmdir(p); err != nil && !errors.Is(err, unix.ENOENT) {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, p)
	}
	return removed, errors.Join(errs...)
}

// checkCgroupLeftovers counts the stray sandbox cgroups (StrayCgroups).
// They hold nothing but a name each, so they are a warning: many of them
// slow every listing of the hierarchy.
func checkCgroupLeftovers(_ context.Context, cfg Config) []Result {
	r := Result{Name: "sandbox cgroups", Status: OK}
	parents := cfg.cgroupParents()
	if len(parents) == 0 {
		r.Detail = "no sandlot cgroups on this host yet"
		return []Result{r}
	}
	stray := StrayCgroups(cfg)
	if len(stray) == 0 {
		r.Detail = "none left over under " + cfg.parentsText(parents)
		return []Result{r}
	}
	r.Status = Warn
	dirs := cfg.stateDirs()
	r.Detail = fmt.Sprintf("%d empty sandbox cgroups under %s belong to no sandbox of %s (left by a daemon killed before it removed them)",
		len(stray), cfg.parentsText(parents), strings.Join(dirs, ", "))
	fix := "sandlot doctor --fix --state-dir " + cfg.StateDir
	for _, d := range dirs[1:] {
		fix += " --more-state-dir " + d
	}
	r.Fix = fix + " removes them (rmdir of empty sandbox cgroups only; name every daemon's state dir on this host)"
	return []Result{r}
}

// parentsText names the parents in a line: /sys/fs/cgroup/{memory,pids}/sandlot.
func (cfg Config) parentsText(parents []string) string {
	if len(parents) == 1 {
		return parents[0]
	}
	base := cfg.host("/sys/fs/cgroup")
	var ctls []string
	for _, p := range parents {
		rel, err := filepath.Rel(base, filepath.Dir(p))
		if err != nil || rel == "." {
			return strings.Join(parents, ", ")
		}
		ctls = append(ctls, rel)
	}
	return filepath.Join(base, "{"+strings.Join(ctls, ",")+"}", "sandlot")
}

// WriteRemoved prints what RemoveStrayCgroups removed.
func WriteRemoved(w io.Writer, removed []string) error {
	for _, p := range removed {
		if _, err := fmt.Fprintf(w, "removed %s\n", p); err != nil {
			return err
		}
	}
	_, err := fmt.Fprintf(w, "removed %d stray sandbox cgroups\n\n", len(removed))
	return err
}

// stateDirs are the state dirs whose sandboxes own their cgroups: serve's
// and the other daemons' on this host.
func (cfg Config) stateDirs() []string {
	return append([]string{cfg.StateDir}, cfg.MoreStateDirs...)
}
