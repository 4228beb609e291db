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

// removeCgroups removes whatever the runtime left of the sandbox's
// cgroups. A cgroup can only be removed once its last task is gone, which
// after SIGKILL takes a moment, so it retries briefly.
func removeCgroups(ctx context.Context, id string) error {
	deadline := time.Now().Add(5 * time.Second)
	for _, d := range cgroupDirs(id) {
		for {
			err := os.Remove(d)
			if err == nil || errors.Is(err, fs.ErrNotExist) {
				break
			}
			if time.Now().After(deadline) || ctx.Err() != nil {
				return fmt.Errorf("remove cgroup %s: %w", d, err)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	return nil
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
