package oci

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"

	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/runtime"
)

// runscFlags are gVisor's global flags. systrap works without KVM; the
// agent listens on a unix socket in a bind-mounted host directory, which
// gVisor only allows with host-UDS: "create" (bind and listen) is all the
// agent needs, so sandboxed code cannot connect to host sockets it may
// find in a mount; network=none leaves only lo.
// overlay2=none keeps the read-only root read-only (no memory overlay).
// oci-seccomp applies the config's seccomp profile to the sandboxed
// processes inside gVisor (without it runsc ignores the profile and user
// code could, e.g., unshare a user namespace, which the sandbox contract
// refuses); gVisor's own host filter guards the sentry in any case.
// gofer-network-namespace=new gives each gofer its own empty network
// namespace; the default shares one that runsc bind-mounts at
// <root>/null-netns in the host's mount namespace and never unmounts (a
// mount left on the host, and a state dir that cannot be removed).
var runscFlags = []string{
	"--oci-seccomp",
	"--gofer-network-namespace=new",
	"--platform=systrap",
	"--network=none",
	"--host-uds=create",
	"--overlay2=none",
}

// RunscFlags are the global flags sandlot gives runsc (runscFlags), for
// measurements of runsc beside sandlot's sandboxes.
func RunscFlags() []string { return slices.Clone(runscFlags) }

// runscNetwork, after runscFlags, gives a sandbox that joins a network
// namespace (runtime.Spec.Network) gVisor's own network stack on that
// namespace's devices: runsc reads eth0's address and routes there and
// moves its packets through a packet socket, so the host's rules on the
// veth apply as they do to crun and runc.
const runscNetwork = "--network=sandbox"

// runscMinPIDs is the smallest pids limit gVisor's sentry runs with.
const runscMinPIDs = 512

// runscLimitTasks moves the task limit into gVisor. Sandboxed tasks are
// not host processes under gVisor: the host pids cgroup counts the
// sentry's threads and systrap's stub processes, and a fork bomb that ran
// it out made the sentry fail and took the whole sandbox down (the
// containment test's "same sandbox answers the next call" failed). The
// sentry enforces RLIMIT_NPROC per uid in its own kernel, so set to the
// sandbox's pids limit it refuses fork with EAGAIN inside the sandbox
// (every process there runs as the sandbox user). The host limit becomes
// a backstop with room for the sentry: twice the tasks plus 256, at
// least runscMinPIDs.
func runscLimitTasks(sp *specs.Spec, pids int64) {
	sp.Process.Rlimits = append(sp.Process.Rlimits, specs.POSIXRlimit{Type: "RLIMIT_NPROC", Hard: uint64(pids), Soft: uint64(pids)})
	host := max(2*pids+256, runscMinPIDs)
	sp.Linux.Resources.Pids.Limit = &host
}

// AgentMode is the file mode the agent binary needs under this runtime.
// 0711 (execute-only) everywhere the host kernel loads it: a process
// started from a binary its user cannot read is non-dumpable, so user code
// of the same uid can neither ptrace it nor open /proc/1/mem. gVisor's
// loader reads the binary with the caller's credentials and refuses an
// unreadable one (gvisor.dev/issue/160), so under runsc it is 0755; there
// the agent's own prctl(PR_SET_DUMPABLE, 0) at start, which gVisor honours
// for ptrace and /proc/<pid>/mem, is what protects it (no user code runs
// before the agent).
func (r *Runtime) AgentMode() os.FileMode {
	if r.kind == KindRunsc {
		return 0o755
	}
	return 0o711
}

var (
	runscProfileOnce sync.Once
	runscProfile     *specs.LinuxSeccomp
	runscProfileErr  error
)

// seccompProfileRunsc is seccompProfile with clone3 allowed. gVisor's OCI
// seccomp returns EPERM for every errno rule (it ignores errnoRet), so
// moby's "clone3 -> ENOSYS" became EPERM, and glibc falls back to clone
// only on ENOSYS: every pthread_create failed ("pthread_create failed:
// Operation not permitted"). clone3's flags live in a struct a filter
// cannot read, so this lets a namespace-creating clone3 through; such a
// namespace exists only inside gVisor's sentry, and unshare(2), setns and
// clone with namespace flags stay refused.
func seccompProfileRunsc() (*specs.LinuxSeccomp, error) {
	runscProfileOnce.Do(func() {
		p, err := seccompProfile()
		if err != nil {
			runscProfileErr = err
			return
		}
		out := *p
		out.Syscalls = nil
		for _, sc := range p.Syscalls {
			if sc.Action != specs.ActAllow && slices.Contains(sc.Names, "clone3") {
				sc.Names = slices.DeleteFunc(slices.Clone(sc.Names), func(n string) bool { return n == "clone3" })
				if len(sc.Names) == 0 {
					continue
				}
			}
			out.Syscalls = append(out.Syscalls, sc)
		}
		out.Syscalls = append(out.Syscalls, specs.LinuxSyscall{Names: []string{"clone3"}, Action: specs.ActAllow})
		runscProfile = &out
	})
	return runscProfile, runscProfileErr
}

// DiskUsage returns the bytes used in the sandbox's filesystems mounted at
// paths (its tmpfs mounts). With crun and runc they are host tmpfs mounts
// in the container's mount namespace, read with statfs through
// /proc/<init>/root. Under gVisor they live in the sentry's memory and the
// host sees only the sentry's empty chroot there, so df runs inside the
// sandbox (runsc exec, ~50 ms).
func (r *Runtime) DiskUsage(ctx context.Context, id string, paths ...string) (int64, error) {
	if n, ok := r.imageRootUsage(id); ok {
		return n, nil // an image root writes to one layer, whatever the path
	}
	st, err := r.State(ctx, id)
	if err != nil {
		return 0, err
	}
	if st.Status != runtime.StatusRunning || st.PID <= 0 {
		return 0, fmt.Errorf("sandbox %s is not running: %w", id, errdefs.ErrFailedPrecondition)
	}
	d := r.driverFor(id)
	if d.kind != KindRunsc {
		var total int64
		for _, m := range paths {
			var sfs unix.Statfs_t
			if err := unix.Statfs(fmt.Sprintf("/proc/%d/root%s", st.PID, m), &sfs); err != nil {
				return 0, fmt.Errorf("sandbox %s: statfs %s: %w", id, m, err)
			}
			total += int64(sfs.Blocks-sfs.Bfree) * sfs.Bsize
		}
		return total, nil
	}
	args := append([]string{"exec", "--user", fmt.Sprintf("%d:%d", UID, GID), id, "/usr/bin/df", "-k", "--output=used"}, paths...)
	out, err := d.output(ctx, args...)
	if err != nil {
		return 0, err
	}
	return parseDFUsed(out, len(paths))
}

// parseDFUsed sums `df -k --output=used`: a header, then one KiB count a line.
func parseDFUsed(out []byte, n int) (int64, error) {
	lines := strings.Split(string(bytes.TrimSpace(out)), "\n")
	if len(lines) != n+1 {
		return 0, fmt.Errorf("df: unexpected output %q", out)
	}
	var total int64
	for _, l := range lines[1:] {
		k, err := strconv.ParseInt(strings.TrimSpace(l), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("df: unexpected output %q", out)
		}
		total += k << 10
	}
	return total, nil
}
