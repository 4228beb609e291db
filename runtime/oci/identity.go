package oci

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// Every sandbox has a boot id and a machine id of its own. The host's
// boot_id, readable in every crun or runc sandbox, told a tenant which of
// its sandboxes share a host (with each other and, by timing, with other
// tenants') and when the host booted; and with no /etc/machine-id D-Bus
// and systemd's tools warn or fail. gVisor's procfs makes up a boot id per
// sandbox, so under runsc only the machine id is mounted; runc refuses a
// mount inside /proc, so under runc the boot id is masked (it reads
// empty).
const (
	BootIDPath    = "/proc/sys/kernel/random/boot_id"
	MachineIDPath = "/etc/machine-id"
	// identityDir holds, in the share, the sandboxes' id files: named by
	// a hash of their random content, so unguessable, and removed with
	// their sandbox.
	identityDir = "identity"
)

// identity writes a new boot id (a version 4 UUID, as the kernel's) and
// machine id (32 hex digits, as systemd's) into the share and adds their
// read-only mounts to sp; it returns the files it wrote.
func (r *Runtime) identity(sp *specs.Spec) ([]string, error) {
	dir := filepath.Join(r.share, identityDir)
	if err := os.MkdirAll(dir, 0o711); err != nil {
		return nil, fmt.Errorf("identity files: %w", err)
	}
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, err
	}
	ro := []string{"bind", "ro", "nosuid", "nodev", "noexec"}
	machine, err := shareFile(dir, "machine-", []byte(hex.EncodeToString(b[:16])+"\n"))
	if err != nil {
		return nil, err
	}
	sp.Mounts = append(sp.Mounts, specs.Mount{Destination: MachineIDPath, Type: "bind", Source: machine, Options: ro})
	files := []string{machine}
	switch r.kind {
	case KindRunsc:
	case KindRunc:
		sp.Linux.MaskedPaths = append(sp.Linux.MaskedPaths, BootIDPath)
	default:
		u := b[16:]
		u[6] = u[6]&0x0f | 0x40 // version 4
		u[8] = u[8]&0x3f | 0x80 // RFC 4122 variant
		id := fmt.Sprintf("%x-%x-%x-%x-%x\n", u[0:4], u[4:6], u[6:8], u[8:10], u[10:16])
		boot, err := shareFile(dir, "boot-", []byte(id))
		if err != nil {
			_ = os.Remove(machine)
			return nil, err
		}
		sp.Mounts = append(sp.Mounts, specs.Mount{Destination: BootIDPath, Type: "bind", Source: boot, Options: ro})
		files = append(files, boot)
	}
	return files, nil
}
