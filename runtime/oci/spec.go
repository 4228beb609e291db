package oci

import (
	"fmt"
	"os"
	"path"
	"sort"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/sandlot/sandlot/runtime"
	"github.com/sandlot/sandlot/runtime/oci/teardown"
)

// Annotation keys written to config.json.
const (
	annoPrefix  = "org.sandlot."
	annoRuntime = annoPrefix + "runtime"
	labelPrefix = annoPrefix + "label."

	annoSeccompBPF = "run.oci.seccomp_bpf_data" // crun: base64 BPF program
)

// cgroupParent groups every sandbox's cgroups: /sys/fs/cgroup/<ctl>/sandlot/<id>.
const cgroupParent = teardown.CgroupParent

// defaultEnv is the environment of the sandbox's init process. Matplotlib
// writes its cache under $HOME, which is the writable tmpfs.
var defaultEnv = map[string]string{
	"PATH":       "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
	"HOME":       HomeDir,
	"USER":       UserName,
	"LOGNAME":    UserName,
	"SHELL":      "/bin/bash",
	"LANG":       "C.UTF-8",
	"TERM":       "dumb",
	"MPLBACKEND": "Agg",
	"TMPDIR":     "/tmp",
}

// maskedPaths and readonlyPaths are the usual ones (as in runc's and
// containerd's defaults).
var maskedPaths = []string{
	"/proc/acpi", "/proc/asound", "/proc/kcore", "/proc/keys", "/proc/latency_stats",
	"/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug", "/proc/scsi",
	"/sys/firmware", "/sys/devices/virtual/powercap", "/sys/kernel",
}

var readonlyPaths = []string{
	"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger",
}

// SpecVersion is written to config.json. crun 1.8 rejects versions newer
// than it knows ("unknown version specified"); nothing here needs more.
const SpecVersion = "1.0.2"

// buildSpec turns a sandbox spec into an OCI config. rootfs is the shared
// skeleton; kind tunes the few runtime-specific bits; ids is the sandbox's
// host id range; chanDir, when set, is the host directory bind-mounted at
// the channel's directory (runsc).
func buildSpec(s runtime.Spec, rootfs, kind, seccompBPF string, ids IDRange, chanDir string) (*specs.Spec, error) {
	if len(s.Args) == 0 {
		return nil, fmt.Errorf("spec %s: no args", s.ID)
	}
	lim := s.Limits.WithDefaults()
	env := make(map[string]string, len(defaultEnv)+len(s.Env))
	for k, v := range defaultEnv {
		env[k] = v
	}
	for k, v := range s.Env {
		env[k] = v
	}
	envList := make([]string, 0, len(env))
	for k, v := range env {
		envList = append(envList, k+"="+v)
	}
	sort.Strings(envList)

	profile := seccompProfile
	if kind == KindRunsc {
		profile = seccompProfileRunsc
	}
	sc, err := profile()
	if err != nil {
		return nil, err
	}
	tmpfsSize := fmt.Sprintf("size=%d", lim.DiskBytes)
	mounts := []specs.Mount{
		{Destination: "/proc", Type: "proc", Source: "proc", Options: []string{"nosuid", "noexec", "nodev"}},
		{Destination: "/dev", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "strictatime", "mode=755", "size=65536k"}},
		{Destination: "/dev/pts", Type: "devpts", Source: "devpts", Options: []string{"nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620"}},
		{Destination: "/dev/shm", Type: "tmpfs", Source: "shm", Options: []string{"nosuid", "noexec", "nodev", "mode=1777", "size=67108864"}},
		{Destination: "/dev/mqueue", Type: "mqueue", Source: "mqueue", Options: []string{"nosuid", "noexec", "nodev"}},
		{Destination: "/sys", Type: "sysfs", Source: "sysfs", Options: []string{"nosuid", "noexec", "nodev", "ro"}},
	}
	if s.Root == nil {
		// The host template: the host's /usr and two writable tmpfs. An
		// image root has its own /usr, and its home and /tmp are in its
		// writable layer (imgroot.go).
		mounts = append(mounts,
			specs.Mount{Destination: "/usr", Type: "bind", Source: "/usr", Options: []string{"rbind", "ro", "nosuid", "nodev"}},
			specs.Mount{Destination: HomeDir, Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "nodev", "mode=700", fmt.Sprintf("uid=%d", UID), fmt.Sprintf("gid=%d", GID), tmpfsSize}},
			specs.Mount{Destination: "/tmp", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "nodev", "mode=1777", tmpfsSize}},
		)
		if fi, err := os.Stat("/usr/local"); err == nil && fi.IsDir() {
			// The host's /usr/local is the host's own software and
			// settings (an npmrc, tools), never part of a sandbox.
			mounts = append(mounts, specs.Mount{Destination: "/usr/local", Type: "tmpfs", Source: "tmpfs", Options: []string{"ro", "nosuid", "nodev", "noexec", "mode=755", "size=4k"}})
		}
	}
	if s.Root != nil && kind == KindRunsc {
		// gVisor mounts a tmpfs of its own, unbounded but by memory, on an
		// image's empty /tmp unless the spec has one: give it this one.
		mounts = append(mounts, specs.Mount{Destination: "/tmp", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "nodev", "mode=1777", tmpfsSize}})
	}
	for _, m := range s.Mounts {
		if !path.IsAbs(m.Destination) {
			return nil, fmt.Errorf("mount destination %q is not absolute", m.Destination)
		}
		opts := []string{"bind", "nosuid", "nodev"}
		if m.ReadOnly {
			opts = append(opts, "ro")
		} else {
			opts = append(opts, "rw")
		}
		mounts = append(mounts, specs.Mount{Destination: m.Destination, Type: "bind", Source: m.Source, Options: opts})
	}
	if chanDir != "" {
		mounts = append(mounts, specs.Mount{Destination: path.Dir(runscChannel), Type: "bind", Source: chanDir, Options: []string{"bind", "nosuid", "nodev", "noexec", "rw"}})
	}

	anno := map[string]string{annoRuntime: kind}
	for k, v := range s.Labels {
		anno[labelPrefix+k] = v
	}
	memory := lim.MemoryBytes
	pids := lim.PIDs
	period := uint64(100000)
	quota := int64(lim.CPUs * float64(period))
	swappiness := uint64(0)
	noFile := uint64(4096)

	user := runtime.User{UID: UID, GID: GID}
	if s.User != nil {
		user = *s.User
	}
	if user.UID >= ids.Size || user.GID >= ids.Size {
		return nil, fmt.Errorf("spec %s: user %d:%d outside the sandbox's ids", s.ID, user.UID, user.GID)
	}
	caps := []string{}
	if user.UID == 0 {
		caps = runtime.RootCaps
	}
	cwd := HomeDir
	if s.Cwd != "" {
		if !path.IsAbs(s.Cwd) {
			return nil, fmt.Errorf("spec %s: working directory %q is not absolute", s.ID, s.Cwd)
		}
		cwd = s.Cwd
	}
	sp := &specs.Spec{
		Version:  SpecVersion,
		Hostname: "sandbox",
		// An image root is writable: its writable layer is the sandbox's.
		Root: &specs.Root{Path: rootfs, Readonly: s.Root == nil},
		Process: &specs.Process{
			Terminal: false,
			User:     specs.User{UID: user.UID, GID: user.GID, AdditionalGids: []uint32{user.GID}},
			Args:     s.Args,
			Env:      envList,
			Cwd:      cwd,
			Capabilities: &specs.LinuxCapabilities{
				Bounding: caps, Effective: caps, Permitted: caps, Inheritable: []string{}, Ambient: []string{},
			},
			// Off only where the image's sudo must work (Root.Sudo): the
			// one set-id file a sandbox has (image/layer strips the rest).
			NoNewPrivileges: s.Root == nil || !s.Root.Sudo,
			Rlimits: []specs.POSIXRlimit{
				{Type: "RLIMIT_NOFILE", Hard: noFile, Soft: noFile},
				{Type: "RLIMIT_CORE", Hard: 0, Soft: 0},
			},
		},
		Mounts:      mounts,
		Annotations: anno,
		Linux: &specs.Linux{
			CgroupsPath: cgroupParent + "/" + s.ID,
			// A user namespace of its own (idmap.go), and a cgroup
			// namespace so /proc/self/cgroup shows "/" instead of the
			// host's path and the sandbox's id.
			Namespaces: []specs.LinuxNamespace{
				{Type: specs.UserNamespace}, {Type: specs.PIDNamespace}, {Type: specs.MountNamespace},
				{Type: specs.IPCNamespace}, {Type: specs.UTSNamespace}, {Type: specs.NetworkNamespace},
				{Type: specs.CgroupNamespace},
			},
			UIDMappings: []specs.LinuxIDMapping{{ContainerID: 0, HostID: ids.Base, Size: ids.Size}},
			GIDMappings: []specs.LinuxIDMapping{{ContainerID: 0, HostID: ids.Base, Size: ids.Size}},
			Resources: &specs.LinuxResources{
				Memory: &specs.LinuxMemory{Limit: &memory, Swap: &memory, Swappiness: &swappiness},
				CPU:    &specs.LinuxCPU{Period: &period, Quota: &quota},
				Pids:   &specs.LinuxPids{Limit: &pids},
				Devices: []specs.LinuxDeviceCgroup{
					{Allow: false, Access: "rwm"},
				},
			},
			Seccomp:       sc,
			MaskedPaths:   maskedPaths,
			ReadonlyPaths: readonlyPaths,
		},
	}
	// The runtimes create /dev/null, zero, full, random, urandom, tty and
	// allow them in the device cgroup themselves.
	for _, d := range []struct {
		major, minor int64
	}{{1, 3}, {1, 5}, {1, 7}, {1, 8}, {1, 9}, {5, 0}, {5, 2}, {136, -1}} {
		maj, min := d.major, d.minor
		dc := specs.LinuxDeviceCgroup{Allow: true, Type: "c", Major: &maj, Access: "rwm"}
		if min >= 0 {
			dc.Minor = &min
		}
		sp.Linux.Resources.Devices = append(sp.Linux.Resources.Devices, dc)
	}
	if seccompBPF != "" {
		// crun loads this precompiled filter instead of compiling the
		// profile with libseccomp, which costs ~14 ms per container.
		sp.Annotations[annoSeccompBPF] = seccompBPF
		// With the profile also present crun compiles it anyway.
		sp.Linux.Seccomp = nil
	}
	if kind == KindRunsc {
		// gVisor rejects a swap limit on v1 hosts without swap accounting,
		// and its own threads count against the pids limit (DESIGN.md:
		// it needs at least 512).
		sp.Linux.Resources.Memory.Swap = nil
		runscLimitTasks(sp, lim.PIDs)
	}
	return sp, nil
}
