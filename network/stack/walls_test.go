package stack

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandlot/sandlot/network/policy"
)

// hostNetDirs are where this host's sysfs keeps its network interfaces
// (name, MAC address, counters): /sys/class/net's entries resolved into
// /sys/devices, the hardware ones included.
func hostNetDirs(t *testing.T) []string {
	t.Helper()
	ents, err := os.ReadDir("/sys/class/net")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		p, err := filepath.EvalSymlinks(filepath.Join("/sys/class/net", e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, p)
	}
	if len(out) == 0 {
		t.Fatal("this host's /sys/class/net is empty: nothing to attack")
	}
	return out
}

// TestWallSysNet attacks what a network sandbox learns of the host from
// the host's /sys, which crun and runc sandboxes with a network get
// (read-only, docs/network.md "The runtime"): the host's network cards
// (name, MAC address, traffic counters) under /sys/devices, the hardware
// ones included, and under /sys/class/net. gVisor's /sys is its own.
func TestWallSysNet(t *testing.T) {
	e := newEnv(t, 0)
	dirs := hostNetDirs(t)
	var cmd strings.Builder
	for _, d := range dirs {
		cmd.WriteString("ls " + d + " 2>/dev/null; ls " + filepath.Dir(d) + " 2>/dev/null; cat " + d + "/address 2>/dev/null; ")
	}
	cmd.WriteString("ls /sys/class/net 2>/dev/null; find /sys/devices -maxdepth 7 -path '*/net/*' -name address 2>/dev/null; echo end")
	for _, kind := range kinds {
		t.Run(kind, func(t *testing.T) {
			p := newProvider(t, kind, e.st)
			sb := create(t, p, "t1", &policy.Policy{})
			out, code := sh(t, sb, cmd.String())
			if code != 0 || strings.TrimSpace(out) != "end" {
				t.Errorf("the sandbox saw the host's network interfaces (%v):\n%s", dirs, out)
			}
		})
	}
}
