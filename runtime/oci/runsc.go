package oci

// runscFlags are gVisor's global flags. systrap works without KVM; the
// agent listens on a unix socket in a bind-mounted host directory, which
// gVisor only allows with host-UDS enabled; network=none leaves only lo.
var runscFlags = []string{
	"--platform=systrap",
	"--network=none",
	"--host-uds=all",
}
