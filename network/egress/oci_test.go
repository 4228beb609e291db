package egress

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandlot/sandlot/internal/testenv"
	"github.com/sandlot/sandlot/network/policy"
	"github.com/sandlot/sandlot/network/secret"
)

// TestOCIRuntimeJoinsByPath runs a real container (runc) in a sandbox's
// network the way the runtime will: the namespace joined by path, the
// resolver in /etc/resolv.conf, the sandbox CA in the system trust store.
// curl inside reaches an allowed host, its secret placeholder becomes the
// value on the way out and stays a placeholder on the way back. With a
// user namespace, root inside cannot change its network even with
// CAP_NET_ADMIN: the namespace belongs to the host's user namespace.
func TestOCIRuntimeJoinsByPath(t *testing.T) {
	runc := testenv.RequireBinary(t, "runc")
	testenv.RequireBinary(t, "ip") // runs inside the container, from the host's /usr
	e := newEnv(t)
	const value = "oci-real-value-42"
	sec := secret.Secret{ID: "oci", Hosts: []string{"api.example.test"}, Value: value}
	sb := e.sandbox(t, "oci", "t1", policy.Policy{Mode: policy.Allowlist, Allow: rules("*.example.test")}, sec)
	script := fmt.Sprintf(`ip -4 -o addr show dev eth0; ip addr add 10.254.255.99/32 dev eth0 && echo CHANGED-NETWORK; curl -sS -H 'Authorization: Bearer %s' https://api.example.test/oci`, sec.Placeholder())
	for _, userns := range []bool{false, true} {
		t.Run(fmt.Sprintf("userns=%v", userns), func(t *testing.T) {
			dir := t.TempDir()
			os.Chmod(dir, 0o755)
			os.Chmod(filepath.Dir(dir), 0o755)
			rootfs := filepath.Join(dir, "rootfs")
			for _, d := range []string{"usr", "etc/ssl/certs", "proc", "dev", "tmp"} {
				os.MkdirAll(filepath.Join(rootfs, d), 0o755)
			}
			for _, l := range []string{"bin", "lib", "lib64", "sbin"} {
				os.Symlink("usr/"+l, filepath.Join(rootfs, l))
			}
			os.WriteFile(filepath.Join(rootfs, "etc/resolv.conf"), sb.ResolvConf(), 0o644)
			os.WriteFile(filepath.Join(rootfs, "etc/nsswitch.conf"), []byte("hosts: files dns\n"), 0o644)
			// The system bundle: the public roots (the world's CA here) plus the sandbox's own.
			os.WriteFile(filepath.Join(rootfs, "etc/ssl/certs/ca-certificates.crt"), append(append([]byte{}, e.world.CAPEM...), sb.CA.CertPEM()...), 0o644)
			caps := []string{"CAP_NET_ADMIN"}
			linux := map[string]any{"namespaces": []map[string]string{
				{"type": "pid"}, {"type": "mount"}, {"type": "ipc"}, {"type": "uts"},
				{"type": "network", "path": sb.Path},
			}}
			if userns {
				ns := linux["namespaces"].([]map[string]string)
				linux["namespaces"] = append(ns, map[string]string{"type": "user"})
				linux["uidMappings"] = []map[string]int{{"containerID": 0, "hostID": 300000, "size": 65536}}
				linux["gidMappings"] = []map[string]int{{"containerID": 0, "hostID": 300000, "size": 65536}}
				if out, err := exec.Command("chown", "-R", "300000:300000", rootfs).CombinedOutput(); err != nil {
					t.Fatalf("chown: %v %s", err, out)
				}
			} else {
				caps = nil // no capabilities, as the runtime runs sandboxes today
			}
			spec := map[string]any{
				"SpecVersion": "1.0.2",
				"process": map[string]any{
					"user": map[string]int{"uid": 0, "gid": 0}, "cwd": "/",
					"args":         []string{"sh", "-c", script},
					"env":          []string{"PATH=/usr/bin:/usr/sbin:/bin"},
					"capabilities": map[string][]string{"bounding": caps, "effective": caps, "permitted": caps},
				},
				"root": map[string]any{"path": rootfs},
				"mounts": []map[string]any{
					{"destination": "/proc", "type": "proc", "source": "proc"},
					{"destination": "/usr", "type": "bind", "source": "/usr", "options": []string{"rbind", "ro"}},
				},
				"linux": linux,
			}
			b, _ := json.Marshal(spec)
			if err := os.WriteFile(filepath.Join(dir, "config.json"), b, 0o644); err != nil {
				t.Fatal(err)
			}
			out, err := exec.Command(runc, "--root", filepath.Join(dir, "state"), "run", "--bundle", dir, "oci-net-test").CombinedOutput()
			if err != nil {
				t.Fatalf("runc: %v\n%s", err, out)
			}
			s := string(out)
			if !strings.Contains(s, "inet "+sb.Addr.String()+"/32") {
				t.Errorf("the container does not see its address %s:\n%s", sb.Addr, s)
			}
			if strings.Contains(s, "CHANGED-NETWORK") {
				t.Errorf("root in the container changed its network:\n%s", s)
			}
			if !strings.Contains(s, `"Auth":"Bearer `+sec.Placeholder()+`"`) || strings.Contains(s, value) {
				t.Errorf("curl's echo should carry the placeholder and never the value:\n%s", s)
			}
			if seen := e.world.Last("web:443"); seen.Path != "/oci" || seen.Auth != "Bearer "+value {
				t.Errorf("the server saw %+v, want the value", seen)
			}
		})
	}
}
