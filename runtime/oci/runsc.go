package oci

import "os"

// runscFlags are gVisor's global flags. systrap works without KVM; the
// agent listens on a unix socket in a bind-mounted host directory, which
// gVisor only allows with host-UDS enabled; network=none leaves only lo.
// overlay2=none keeps the read-only root read-only (no memory overlay).
var runscFlags = []string{
	"--platform=systrap",
	"--network=none",
	"--host-uds=all",
	"--overlay2=none",
}

// runscMinPIDs is the smallest pids limit gVisor's sentry runs with.
const runscMinPIDs = 512

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
