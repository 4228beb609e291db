package oci

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/sandlot/sandlot/runtime"
)

// TestIdentity: a sandbox, on the host root or on an image, reads a boot
// id and a machine id of its own, and cannot change them. The host's
// boot_id in every sandbox told a tenant which sandboxes share a host with
// it (and when the host last booted), and without a machine id D-Bus and
// systemd's tools complain or fail.
func TestIdentity(t *testing.T) {
	hostBoot, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		t.Fatal(err)
	}
	hostMachine, _ := os.ReadFile("/etc/machine-id")
	uuid := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}\n$`)
	hex32 := regexp.MustCompile(`^[0-9a-f]{32}\n$`)
	for _, kind := range testKinds {
		t.Run(kind, func(t *testing.T) {
			r := newRuntime(t, kind)
			layers, _ := imageLayers(t)
			seen := map[string]bool{}
			for _, root := range []string{"host", "image", "host", "image as root"} {
				var p *probeConn
				switch root {
				case "host":
					_, p = startProbe(t, r, runtime.Limits{})
				case "image":
					_, p = startImageProbe(t, r, layers, nil, 0)
				default: // root of the sandbox (sudo): its capabilities, its seccomp filter
					_, p = startImageProbe(t, r, layers, &runtime.User{UID: 0, GID: 0}, 0)
				}
				boot := p.sh(t, "cat /proc/sys/kernel/random/boot_id").Out
				machine := p.sh(t, "cat /etc/machine-id").Out
				switch {
				case kind == KindRunc: // runc mounts nothing inside /proc: masked
					if boot != "" {
						t.Errorf("%s root: boot_id %q, want it masked (empty)", root, boot)
					}
				case !uuid.MatchString(boot) || boot == string(hostBoot) || seen[boot]:
					t.Errorf("%s root: boot_id %q (host %q, seen %v)", root, boot, hostBoot, seen)
				}
				if !hex32.MatchString(machine) || strings.TrimSpace(machine) == strings.TrimSpace(string(hostMachine)) || seen[machine] {
					t.Errorf("%s root: machine-id %q (host %q, seen %v)", root, machine, hostMachine, seen)
				}
				seen[boot], seen[machine] = kind != KindRunc, true
				if got := p.sh(t, "(echo 00000000-0000-4000-8000-000000000000 > /proc/sys/kernel/random/boot_id; echo 0 > /etc/machine-id; rm -f /etc/machine-id; umount /proc/sys/kernel/random/boot_id; umount -l /etc/machine-id) 2>/dev/null; cat /proc/sys/kernel/random/boot_id /etc/machine-id").Out; got != boot+machine {
					t.Errorf("%s root: ids changed by the sandbox: %q, were %q", root, got, boot+machine)
				}
			}
		})
	}
}

// TestIdentityFilesRemoved: a sandbox's id files go with it.
func TestIdentityFilesRemoved(t *testing.T) {
	r := newRuntime(t, KindCrun)
	ctx := context.Background()
	id := createProbe(t, ctx, r)
	b, err := os.ReadFile(filepath.Join(r.bundle(id), "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	var sp specs.Spec
	if err := json.Unmarshal(b, &sp); err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, m := range sp.Mounts {
		if strings.HasPrefix(m.Source, filepath.Join(r.ShareDir(), identityDir)+"/") {
			files = append(files, m.Source)
		}
	}
	if len(files) != 2 {
		t.Fatalf("id files %v, want the boot id's and the machine id's", files)
	}
	if err := r.Delete(ctx, id); err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if _, err := os.Stat(f); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s left after delete: %v", f, err)
		}
	}
}
