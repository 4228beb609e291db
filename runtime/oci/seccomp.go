package oci

import (
	"fmt"
	"slices"
	"sync"

	"github.com/moby/profiles/seccomp"
	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// denied are syscalls that moby's default profile allows to a process with
// no capabilities but sandlot does not: ptrace and cross-process memory
// access would let user code take over the agent (same uid, PID 1), and
// modify_ldt (16-bit segments; nothing in a sandbox needs them) is old,
// rarely used kernel code with a history of bugs.
var denied = []string{"ptrace", "process_vm_readv", "process_vm_writev", "modify_ldt"}

var (
	profileOnce sync.Once
	profile     *specs.LinuxSeccomp
	profileErr  error
)

// seccompProfile returns moby's default profile resolved for a process
// with no capabilities (so unshare, clone with namespace flags, clone3,
// mount, setns, bpf, ... are refused), minus denied, for the native
// architecture only. moby also lists the compatibility ABIs (on x86-64:
// x86 through int 0x80, and x32), whose system call tables are a second and
// third way into the kernel that no sandbox program needs; a call made
// through an architecture the filter does not list fails (libseccomp's
// bad-architecture action kills the calling thread), and on x86-64 an x32
// call (system call number with bit 30 set) counts as one. The result is
// shared; callers must not modify it.
func seccompProfile() (*specs.LinuxSeccomp, error) {
	profileOnce.Do(func() {
		noCaps := &specs.Spec{Process: &specs.Process{Capabilities: &specs.LinuxCapabilities{}}}
		p, err := seccomp.GetDefaultProfile(noCaps)
		if err != nil {
			profileErr = fmt.Errorf("seccomp default profile: %w", err)
			return
		}
		out := *p
		// GetDefaultProfile lists the native architecture first, then its
		// compatibility ABIs.
		out.Architectures = p.Architectures[:1]
		out.Syscalls = nil
		for _, sc := range p.Syscalls {
			if sc.Action == specs.ActAllow {
				sc.Names = slices.DeleteFunc(slices.Clone(sc.Names), func(n string) bool { return slices.Contains(denied, n) })
				if len(sc.Names) == 0 {
					continue
				}
			}
			out.Syscalls = append(out.Syscalls, sc)
		}
		profile = &out
	})
	return profile, profileErr
}
