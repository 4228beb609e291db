package doctor

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandlot/sandlot/guard"
)

// fakeHost is a root and PATH of a host as sandlot needs it; a test case
// changes one file to break one thing.
type fakeHost struct {
	root, path string
}

func newFakeHost(t *testing.T) fakeHost {
	t.Helper()
	h := fakeHost{root: t.TempDir(), path: t.TempDir()}
	for p, s := range map[string]string{
		"proc/sys/kernel/osrelease":             "6.13.2-amd64\n",
		"proc/sys/user/max_user_namespaces":     "15000\n",
		"proc/sys/kernel/seccomp/actions_avail": "kill_process kill_thread trap errno user_notif trace log allow\n",
		"proc/filesystems":                      "nodev\tsysfs\nnodev\ttmpfs\n\text4\nnodev\toverlay\n",
		"proc/self/mounts":                      "cgroup2 /sys/fs/cgroup cgroup2 rw,nosuid 0 0\n",
		"sys/fs/cgroup/cgroup.controllers":      "cpuset cpu io memory hugetlb pids rdma misc\n",
	} {
		h.write(t, p, s)
	}
	for _, rt := range []string{"crun", "runc", "runsc", "mmdebstrap"} {
		h.tool(t, rt)
	}
	return h
}

func (h fakeHost) write(t *testing.T, p, s string) {
	t.Helper()
	p = filepath.Join(h.root, p)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

func (h fakeHost) tool(t *testing.T, name string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(h.path, name), []byte("#!/bin/sh\necho "+name+" version 1.0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
}

func (h fakeHost) config(t *testing.T) Config {
	return Config{
		Root: h.root, Path: h.path, DataDir: t.TempDir(),
		Probes: Probes{
			Userns:   func(context.Context) error { return nil },
			Nftables: func(context.Context) error { return nil },
			Version: func(_ context.Context, bin string) (string, error) {
				return filepath.Base(bin) + " version 1.0", nil
			},
			EntityModel: func() (guard.ModelInfo, error) {
				return guard.ModelInfo{Name: "prose/v2.0.0 en", Bytes: 40 << 20, LoadTime: 700 * time.Millisecond}, nil
			},
		},
	}
}

func find(r Report, name string) Result {
	for _, c := range r.Checks {
		if c.Name == name {
			return c
		}
	}
	return Result{}
}

func TestFakeHost(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(t *testing.T, h fakeHost, cfg *Config)
		check  string // the check that turns
		status Status
		ok     bool   // the report's verdict
		words  string // in the check's detail or fix
	}{
		{"all there", func(*testing.T, fakeHost, *Config) {}, "kernel", OK, true, "6.13.2"},
		{"entity model loaded", func(*testing.T, fakeHost, *Config) {}, "guard entity model", OK, true, "42 MB of heap"},
		{"entity model missing", func(_ *testing.T, _ fakeHost, c *Config) {
			c.Probes.EntityModel = func() (guard.ModelInfo, error) { return guard.ModelInfo{}, errors.New("weights did not decode") }
		}, "guard entity model", Warn, true, "patterns and entity rules alone"},
		{"old kernel", func(t *testing.T, h fakeHost, _ *Config) { h.write(t, "proc/sys/kernel/osrelease", "5.10.0-28-amd64") },
			"kernel", Fail, false, "older than 5.12"},
		{"kernel too old for images", func(t *testing.T, h fakeHost, _ *Config) { h.write(t, "proc/sys/kernel/osrelease", "6.1.0-18-amd64") },
			"kernel", Fail, false, "--default-image none --host-template"},
		{"kernel too old for images, none asked", func(t *testing.T, h fakeHost, c *Config) {
			h.write(t, "proc/sys/kernel/osrelease", "6.1.0-18-amd64")
			c.DefaultImage = "none"
		}, "kernel", Warn, true, "need 6.13"},
		{"user namespaces off", func(t *testing.T, h fakeHost, _ *Config) { h.write(t, "proc/sys/user/max_user_namespaces", "0") },
			"user namespaces", Fail, false, "sysctl -w user.max_user_namespaces"},
		{"unshare refused", func(_ *testing.T, _ fakeHost, c *Config) {
			c.Probes.Userns = func(context.Context) error { return errors.New("operation not permitted") }
		}, "user namespaces", Fail, false, "operation not permitted"},
		{"cgroup v1", func(t *testing.T, h fakeHost, _ *Config) {
			h.write(t, "proc/self/mounts", "cgroup /sys/fs/cgroup/cpu cgroup rw,cpu 0 0\ncgroup /sys/fs/cgroup/memory cgroup rw,memory 0 0\ncgroup /sys/fs/cgroup/pids cgroup rw,pids 0 0\n")
		}, "cgroups", OK, true, "cgroup v1 with memory, cpu, pids"},
		{"hybrid", func(t *testing.T, h fakeHost, _ *Config) {
			h.write(t, "proc/self/mounts", "cgroup /sys/fs/cgroup/cpu cgroup rw,cpu 0 0\ncgroup /sys/fs/cgroup/memory cgroup rw,memory 0 0\ncgroup /sys/fs/cgroup/pids cgroup rw,pids 0 0\ncgroup2 /sys/fs/cgroup/unified cgroup2 rw 0 0\n")
		}, "cgroups", OK, true, "hybrid"},
		{"v2 without pids", func(t *testing.T, h fakeHost, _ *Config) {
			h.write(t, "sys/fs/cgroup/cgroup.controllers", "cpu memory io")
		},
			"cgroups", Fail, false, "lacks the controllers pids"},
		{"no cgroups", func(t *testing.T, h fakeHost, _ *Config) { h.write(t, "proc/self/mounts", "proc /proc proc rw 0 0\n") },
			"cgroups", Fail, false, "no cgroup file system"},
		{"no overlay", func(t *testing.T, h fakeHost, _ *Config) { h.write(t, "proc/filesystems", "nodev\ttmpfs\n\text4\n") },
			"overlayfs", Fail, false, "modprobe overlay"},
		{"no seccomp", func(t *testing.T, h fakeHost, _ *Config) {
			os.Remove(filepath.Join(h.root, "proc/sys/kernel/seccomp/actions_avail"))
		},
			"seccomp", Fail, false, "CONFIG_SECCOMP_FILTER"},
		{"no nftables, no network", func(_ *testing.T, _ fakeHost, c *Config) {
			c.Probes.Nftables = func(context.Context) error { return errors.New("protocol not supported") }
		}, "nftables", Warn, true, "only --network needs it"},
		{"no nftables, network", func(_ *testing.T, _ fakeHost, c *Config) {
			c.Network = true
			c.Probes.Nftables = func(context.Context) error { return errors.New("protocol not supported") }
		}, "nftables", Fail, false, "modprobe nf_tables"},
		{"no runsc", func(t *testing.T, h fakeHost, _ *Config) { os.Remove(filepath.Join(h.path, "runsc")) },
			"runtime runsc", Warn, true, "runsc is not in PATH"},
		{"no runsc, runsc asked", func(t *testing.T, h fakeHost, c *Config) {
			os.Remove(filepath.Join(h.path, "runsc"))
			c.Runtime = "runsc"
		}, "runtime runsc", Fail, false, "--runtime runsc needs it"},
		{"crun only", func(t *testing.T, h fakeHost, _ *Config) { os.Remove(filepath.Join(h.path, "runc")) },
			"runtime runc", Warn, true, "apt-get install runc"},
		{"neither crun nor runc", func(t *testing.T, h fakeHost, _ *Config) {
			os.Remove(filepath.Join(h.path, "runc"))
			os.Remove(filepath.Join(h.path, "crun"))
		}, "runtime crun", Fail, false, "--runtime auto needs crun or runc"},
		{"not executable", func(t *testing.T, h fakeHost, c *Config) {
			os.Chmod(filepath.Join(h.path, "runc"), 0o644)
			c.Runtime = "runc"
		}, "runtime runc", Fail, false, "runc is not in PATH"},
		{"runtime broken", func(_ *testing.T, _ fakeHost, c *Config) {
			c.Runtime = "crun"
			c.Probes.Version = func(context.Context, string) (string, error) { return "", errors.New("exit status 127") }
		}, "runtime crun", Fail, false, "reinstall crun"},
		{"too little space", func(_ *testing.T, _ fakeHost, c *Config) { c.MinFreeBytes = 1 << 60 },
			"disk", Fail, false, "move --data-dir"},
		{"template buildable", func(*testing.T, fakeHost, *Config) {}, "default template", Warn, true, "mmdebstrap"},
		{"template neither built nor buildable", func(t *testing.T, h fakeHost, _ *Config) { os.Remove(filepath.Join(h.path, "mmdebstrap")) },
			"default template", Fail, false, "apt-get install mmdebstrap"},
		{"no default template asked", func(t *testing.T, h fakeHost, c *Config) {
			os.Remove(filepath.Join(h.path, "mmdebstrap"))
			c.DefaultImage = "none"
		}, "default template", OK, true, "--default-image none"},
		{"volumes", func(t *testing.T, h fakeHost, _ *Config) {
			h.tool(t, "mkfs.ext4")
			h.write(t, "dev/loop-control", "")
		}, "volumes", OK, true, "mkfs.ext4, ext4 and loop devices"},
		{"no mkfs.ext4", func(t *testing.T, h fakeHost, _ *Config) { h.write(t, "dev/loop-control", "") },
			"volumes", Warn, true, "apt-get install e2fsprogs"},
		{"no loop devices", func(t *testing.T, h fakeHost, _ *Config) { h.tool(t, "mkfs.ext4") },
			"volumes", Warn, true, "modprobe loop"},
		{"store not made yet", func(*testing.T, fakeHost, *Config) {}, "store", OK, true, "does not exist yet"},
		{"store unreadable", func(t *testing.T, _ fakeHost, c *Config) {
			os.WriteFile(filepath.Join(c.DataDir, "sandlot.db"), []byte("this is not a database, and longer than a header of one"), 0o600)
		}, "store", Fail, false, "cannot open"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newFakeHost(t)
			cfg := h.config(t)
			tc.change(t, h, &cfg)
			rep := Run(context.Background(), cfg)
			got := find(rep, tc.check)
			if got.Status != tc.status || rep.OK != tc.ok || !strings.Contains(got.Detail+" "+got.Fix, tc.words) {
				t.Fatalf("%s: %s (%s; fix: %s), report ok %v; want %s with %q, report ok %v",
					tc.check, got.Status, got.Detail, got.Fix, rep.OK, tc.status, tc.words, tc.ok)
			}
			if tc.status != OK && got.Fix == "" {
				t.Errorf("%s is %s without a fix", tc.check, got.Status)
			}
		})
	}
}

func TestParseKernel(t *testing.T) {
	for rel, want := range map[string][2]int{"6.18.44-fc-v595": {6, 18}, "5.10.0-28-amd64": {5, 10}, "6.1": {6, 1}, "6.13rc1": {6, 13}} {
		if got, ok := parseKernel(rel); !ok || got != want {
			t.Errorf("parseKernel(%q) = %v, %v; want %v", rel, got, ok, want)
		}
	}
	if _, ok := parseKernel("weird"); ok {
		t.Error("parseKernel(weird) ok")
	}
}
