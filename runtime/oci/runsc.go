package oci

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
