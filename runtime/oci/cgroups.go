package oci

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandlot/sandlot/internal/openat2"
	"github.com/sandlot/sandlot/runtime"
)

// cgroupRoot is where the v1 controllers are mounted.
const cgroupRoot = "/sys/fs/cgroup"

// unifiedOnly reports a pure cgroup v2 host.
func unifiedOnly() bool {
	_, err := os.Stat(filepath.Join(cgroupRoot, "cgroup.controllers"))
	return err == nil
}

// cgroupDirs returns the sandbox's cgroup directory in every mounted
// hierarchy (whether it exists or not).
func cgroupDirs(id string) []string {
	if unifiedOnly() {
		return []string{filepath.Join(cgroupRoot, cgroupParent, id)}
	}
	ents, err := os.ReadDir(cgroupRoot)
	if err != nil {
		return nil
	}
	var dirs []string
	for _, e := range ents {
		if e.IsDir() || e.Type()&fs.ModeSymlink == 0 {
			dirs = append(dirs, filepath.Join(cgroupRoot, e.Name(), cgroupParent, id))
		}
	}
	return dirs
}

// removeCgroups removes sandbox id's cgroups (dirs, cgroupDirs(id)),
// killing what is left in them: a cgroup can only be removed once its last
// task is gone. A removal that finds a cgroup busy sends SIGKILL to every
// process listed in it (killProcs) and waits for them to exit on their
// pidfds, then tries again; one still busy with none to kill is retried a
// little later each time. The rmdir is the check that
// none is left, in each hierarchy: a create cancelled while the runtime
// moved its child into the cgroups may leave a process in some of them
// only, and one forked between a read and the kill is met on the next try
// (the pids limit bounds each). Killing the init alone would end its pid
// namespace; this kills whatever the cgroups hold.
func removeCgroups(ctx context.Context, id string, dirs []string) error {
	deadline := time.Now().Add(5 * time.Second)
	wait := 250 * time.Microsecond
	for _, d := range dirs {
		for {
			err := unix.Rmdir(d)
			if err == nil || errors.Is(err, unix.ENOENT) {
				break
			}
			if time.Now().After(deadline) || ctx.Err() != nil {
				return fmt.Errorf("remove cgroup %s: %w", d, err)
			}
			if errors.Is(err, unix.EBUSY) {
				if fds := killProcs(d, id); len(fds) > 0 {
					// Woken as they exit; one slow to die is met again
					// (and signalled again) on the next try.
					until := time.Now().Add(time.Second)
					if until.After(deadline) {
						until = deadline
					}
					waitExited(fds, until)
					continue
				}
			}
			time.Sleep(wait)
			wait = min(2*wait, 5*time.Millisecond)
		}
	}
	return nil
}

// removeEmptyCgroups removes those of dirs that are empty, for a sandbox
// whose bundle is gone: a daemon run as a container's PID 1 takes its
// sandboxes' processes with its pid namespace when it stops, and their
// cgroups stay on the host (--cgroupns host) while the bundles went with
// the container. Nothing is killed: a cgroup still busy (EBUSY) is left
// alone, and so is one reached through a link (ELOOP: a v1 alias such as
// cpu -> cpu,cpuacct, whose real directory is also in dirs).
func removeEmptyCgroups(dirs []string) error {
	var errs []error
	for _, d := range dirs {
		err := openat2.Rmdir(d)
		switch {
		case err == nil, errors.Is(err, unix.ENOENT), errors.Is(err, unix.EBUSY),
			errors.Is(err, unix.ENOTEMPTY), errors.Is(err, unix.ELOOP):
		default:
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func readInt(p string) (int64, error) {
	b, err := os.ReadFile(p)
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
}

// readStats samples the memory, cpu and pids controllers.
func readStats(id string) (*runtime.Stats, error) {
	if unifiedOnly() {
		return readStatsV2(filepath.Join(cgroupRoot, cgroupParent, id))
	}
	dir := func(ctl string) string { return filepath.Join(cgroupRoot, ctl, cgroupParent, id) }
	mem, err := readInt(filepath.Join(dir("memory"), "memory.usage_in_bytes"))
	if err != nil {
		return nil, fmt.Errorf("sandbox %s stats: %w", id, err)
	}
	st := &runtime.Stats{MemoryBytes: mem, CacheBytes: statField(filepath.Join(dir("memory"), "memory.stat"), "total_cache")}
	if ns, err := readInt(filepath.Join(dir("cpuacct"), "cpuacct.usage")); err == nil {
		st.CPUTime = time.Duration(ns)
	}
	if n, err := readInt(filepath.Join(dir("pids"), "pids.current")); err == nil {
		st.PIDs = n
	}
	return st, nil
}

// statField reads one "name value" line of a cgroup stat file; 0 when
// absent.
func statField(file, name string) int64 {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, name+" "); ok {
			n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return n
		}
	}
	return 0
}

func readStatsV2(dir string) (*runtime.Stats, error) {
	mem, err := readInt(filepath.Join(dir, "memory.current"))
	if err != nil {
		return nil, fmt.Errorf("cgroup stats: %w", err)
	}
	st := &runtime.Stats{MemoryBytes: mem, CacheBytes: statField(filepath.Join(dir, "memory.stat"), "file")}
	if n, err := readInt(filepath.Join(dir, "pids.current")); err == nil {
		st.PIDs = n
	}
	if b, err := os.ReadFile(filepath.Join(dir, "cpu.stat")); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "usage_usec "); ok {
				us, _ := strconv.ParseInt(v, 10, 64)
				st.CPUTime = time.Duration(us) * time.Microsecond
			}
		}
	}
	return st, nil
}
