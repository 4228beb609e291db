package oci

import (
	"slices"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/sandlot/sandlot/runtime"
)

func TestBuildSpec(t *testing.T) {
	s := runtime.Spec{
		ID:     "sb-0123456789ab",
		Args:   []string{AgentPath},
		Env:    map[string]string{"A": "1", "HOME": "/elsewhere"},
		Mounts: []runtime.Mount{{Source: "/x", Destination: "/data"}, {Source: "/a", Destination: AgentPath, ReadOnly: true}},
		Labels: map[string]string{"tenant": "t"},
	}
	ids := IDRange{Base: 3 << 20, Size: IDRangeSize}
	sp, err := buildSpec(s, "/rootfs", KindCrun, "", ids, "")
	if err != nil {
		t.Fatal(err)
	}
	if !sp.Root.Readonly || sp.Process.User.UID != UID || !sp.Process.NoNewPrivileges {
		t.Errorf("root/user/nnp: %+v %+v %v", sp.Root, sp.Process.User, sp.Process.NoNewPrivileges)
	}
	if len(sp.Process.Capabilities.Bounding) != 0 || len(sp.Process.Capabilities.Effective) != 0 {
		t.Errorf("capabilities: %+v", sp.Process.Capabilities)
	}
	if !slices.Contains(sp.Process.Env, "A=1") || !slices.Contains(sp.Process.Env, "HOME=/elsewhere") || !slices.Contains(sp.Process.Env, "MPLBACKEND=Agg") {
		t.Errorf("env: %v", sp.Process.Env)
	}
	var ns []specs.LinuxNamespaceType
	for _, n := range sp.Linux.Namespaces {
		ns = append(ns, n.Type)
	}
	for _, want := range []specs.LinuxNamespaceType{specs.UserNamespace, specs.PIDNamespace, specs.MountNamespace, specs.IPCNamespace, specs.UTSNamespace, specs.NetworkNamespace, specs.CgroupNamespace} {
		if !slices.Contains(ns, want) {
			t.Errorf("namespace %s missing", want)
		}
	}
	want := []specs.LinuxIDMapping{{ContainerID: 0, HostID: 3 << 20, Size: IDRangeSize}}
	if !slices.Equal(sp.Linux.UIDMappings, want) || !slices.Equal(sp.Linux.GIDMappings, want) {
		t.Errorf("id mappings: %+v %+v", sp.Linux.UIDMappings, sp.Linux.GIDMappings)
	}
	r := sp.Linux.Resources
	if *r.Memory.Limit != runtime.DefaultMemoryBytes || *r.Pids.Limit != runtime.DefaultPIDs || *r.CPU.Quota != 100000 || *r.CPU.Period != 100000 {
		t.Errorf("limits: mem %d pids %d cpu %d/%d", *r.Memory.Limit, *r.Pids.Limit, *r.CPU.Quota, *r.CPU.Period)
	}
	if sp.Linux.CgroupsPath != "/sandlot/sb-0123456789ab" || sp.Annotations[labelPrefix+"tenant"] != "t" {
		t.Errorf("cgroup %q annotations %v", sp.Linux.CgroupsPath, sp.Annotations)
	}
	mounts := map[string]specs.Mount{}
	for _, m := range sp.Mounts {
		mounts[m.Destination] = m
	}
	if !slices.Contains(mounts["/usr"].Options, "ro") || !slices.Contains(mounts[AgentPath].Options, "ro") || slices.Contains(mounts["/data"].Options, "ro") {
		t.Errorf("mount options: %+v", mounts)
	}
	if !slices.Contains(mounts[HomeDir].Options, "size=536870912") || !slices.Contains(mounts["/tmp"].Options, "size=536870912") {
		t.Errorf("tmpfs sizes: %v %v", mounts[HomeDir].Options, mounts["/tmp"].Options)
	}
	if sp.Linux.Seccomp == nil || sp.Linux.Seccomp.DefaultAction != specs.ActErrno {
		t.Fatalf("seccomp: %+v", sp.Linux.Seccomp)
	}
	for _, sc := range sp.Linux.Seccomp.Syscalls {
		if sc.Action != specs.ActAllow {
			continue
		}
		for _, n := range sc.Names {
			if slices.Contains([]string{"ptrace", "unshare", "mount", "setns", "process_vm_writev", "bpf", "clone3", "modify_ldt"}, n) {
				t.Errorf("seccomp allows %s", n)
			}
		}
	}

	// A precompiled filter replaces the profile (crun compiles it otherwise).
	sp, _ = buildSpec(s, "/rootfs", KindCrun, "AAAA", ids, "")
	if sp.Linux.Seccomp != nil || sp.Annotations[annoSeccompBPF] != "AAAA" {
		t.Errorf("bpf: %v %v", sp.Linux.Seccomp, sp.Annotations)
	}
	sp, _ = buildSpec(s, "/rootfs", KindRunsc, "", ids, "/chan")
	if *sp.Linux.Resources.Pids.Limit < runscMinPIDs || sp.Linux.Resources.Memory.Swap != nil {
		t.Errorf("runsc resources: %+v", sp.Linux.Resources)
	}
	if m := sp.Mounts[len(sp.Mounts)-1]; m.Source != "/chan" || m.Destination != "/run/sandlot" || !slices.Contains(m.Options, "noexec") {
		t.Errorf("runsc channel mount: %+v", m)
	}
	if !slices.Contains(sp.Process.Rlimits, specs.POSIXRlimit{Type: "RLIMIT_NPROC", Hard: 256, Soft: 256}) {
		t.Errorf("runsc rlimits (want NPROC = the pids limit, 256): %+v", sp.Process.Rlimits)
	}
	// runsc: clone3 allowed (gVisor turns every errno rule into EPERM and
	// glibc falls back to clone only on ENOSYS); the rest as for crun.
	allowed := map[string]bool{}
	for _, sc := range sp.Linux.Seccomp.Syscalls {
		for _, n := range sc.Names {
			if sc.Action == specs.ActAllow && len(sc.Args) == 0 {
				allowed[n] = true
			} else if n == "clone3" {
				t.Errorf("runsc profile: clone3 in a %s rule", sc.Action)
			}
		}
	}
	if !allowed["clone3"] || allowed["unshare"] || allowed["setns"] || allowed["ptrace"] || allowed["mount"] {
		t.Errorf("runsc profile allows clone3 %v, unshare %v, setns %v, ptrace %v, mount %v",
			allowed["clone3"], allowed["unshare"], allowed["setns"], allowed["ptrace"], allowed["mount"])
	}
	if _, err := buildSpec(runtime.Spec{ID: "x"}, "/rootfs", KindCrun, "", ids, ""); err == nil {
		t.Error("no args accepted")
	}
	if _, err := buildSpec(runtime.Spec{ID: "x", Args: []string{"a"}, Mounts: []runtime.Mount{{Source: "/a", Destination: "rel"}}}, "/rootfs", KindCrun, "", ids, ""); err == nil {
		t.Error("relative mount accepted")
	}
}

func TestSkeleton(t *testing.T) {
	s, err := newSkeleton("/")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	p1, err := s.materialize(dir)
	if err != nil {
		t.Fatal(err)
	}
	p2, err := s.materialize(dir)
	if err != nil || p1 != p2 {
		t.Fatalf("second materialize: %s %v", p2, err)
	}
	byPath := map[string]skelEntry{}
	for _, e := range s.files {
		byPath[e.path] = e
	}
	if byPath["bin"].data != "usr/bin" || byPath["etc/resolv.conf"].kind != 'f' || byPath["etc/resolv.conf"].data != NoNetworkResolvConf {
		t.Errorf("bin %+v resolv %+v", byPath["bin"], byPath["etc/resolv.conf"])
	}
	for p := range byPath {
		if p == "etc/shadow" || p == "etc/gshadow" || p == "etc/sudoers" || p == "etc/ssh" {
			t.Errorf("host secret %s copied", p)
		}
	}
}

func TestParseDFUsed(t *testing.T) {
	n, err := parseDFUsed([]byte(" Used\n 2932\n    0\n"), 2)
	if err != nil || n != 2932<<10 {
		t.Errorf("parse = %d, %v", n, err)
	}
	for _, bad := range []string{"", " Used\n 1\n", " Used\n x\n 1\n"} {
		if _, err := parseDFUsed([]byte(bad), 2); err == nil {
			t.Errorf("parse %q: no error", bad)
		}
	}
}
