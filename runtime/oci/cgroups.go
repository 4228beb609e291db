package oci

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandlot/sandlot/internal/openat2"
	"github.com/sandlot/sandlot/runtime"
	"github.com/sandlot/sandlot/runtime/oci/teardown"
)

// cgroupRoot is where the cgroup hierarchies are mounted.
const cgroupRoot = teardown.CgroupRoot

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
	if teardown.UnifiedOnly() {
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
