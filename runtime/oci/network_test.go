package oci

import (
	"errors"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/runtime"
)

// TestJoinNetwork: a sandbox that joins a host-built namespace gets its
// path; crun and runc replace the sysfs mount (which the kernel refuses
// there) by the host's /sys read-only with its network, cgroup and block
// parts masked; runsc keeps its own /sys.
func TestJoinNetwork(t *testing.T) {
	for _, kind := range []string{KindCrun, KindRunc, KindRunsc} {
		t.Run(kind, func(t *testing.T) {
			sp, err := buildSpec(runtime.Spec{ID: "sb-1", Args: []string{"/bin/true"}}, "/root", kind, "", IDRange{Base: 100000, Size: 65536}, "")
			if err != nil {
				t.Fatal(err)
			}
			extra := specs.Mount{Destination: ResolvConfPath, Type: "bind", Source: "/x/resolv", Options: []string{"bind", "ro"}}
			joinNetwork(sp, kind, "/run/sandlot/netns/sb-1", []specs.Mount{extra})
			var nsPath string
			for _, ns := range sp.Linux.Namespaces {
				if ns.Type == specs.NetworkNamespace {
					nsPath = ns.Path
				}
			}
			if nsPath != "/run/sandlot/netns/sb-1" {
				t.Errorf("network namespace path %q", nsPath)
			}
			var sys specs.Mount
			for _, m := range sp.Mounts {
				if m.Destination == "/sys" {
					sys = m
				}
			}
			masked := slices.Contains(sp.Linux.MaskedPaths, "/sys/class/net")
			if kind == KindRunsc {
				if sys.Type != "sysfs" || masked {
					t.Errorf("runsc: /sys %+v, masked %v", sys, masked)
				}
			} else if sys.Type != "bind" || sys.Source != "/sys" || !slices.Contains(sys.Options, "ro") || !masked {
				t.Errorf("%s: /sys %+v, /sys/class/net masked %v", kind, sys, masked)
			}
			if !slices.ContainsFunc(sp.Mounts, func(m specs.Mount) bool { return m.Destination == ResolvConfPath }) {
				t.Error("resolv.conf not mounted")
			}
			if slices.Contains(maskedPaths, "/sys/class/net") {
				t.Error("joinNetwork changed the shared masked paths")
			}
		})
	}
}

// BenchmarkNetworkMounts is what a network adds to a bundle: the trust
// store (the root's bundle plus the sandbox's CA, hashed and written
// once) and resolv.conf.
func BenchmarkNetworkMounts(b *testing.B) {
	r := &Runtime{share: b.TempDir()}
	n := &runtime.Network{ResolvConf: []byte("nameserver 10.254.0.1\n"), CACerts: []byte("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")}
	for b.Loop() {
		n.CACerts = append(n.CACerts[:len(n.CACerts)-1], 'x', '\n') // a new CA each time, as per sandbox
		if _, err := r.networkMounts("/", n); err != nil {
			b.Fatal(err)
		}
	}
}

// TestChromiumRules: a root with Debian's Chromium (/etc/chromium.d) gets
// the ports route's host-resolver rule as a read-only file the wrapper
// sources, which sh turns into one argument, first, before the caller's;
// a root without it gets nothing; a domain that is not a DNS name never
// reaches the shell file.
func TestChromiumRules(t *testing.T) {
	r := &Runtime{share: t.TempDir()}
	gw := netip.MustParseAddr("10.254.0.1")
	withChromium := t.TempDir()
	if err := os.MkdirAll(filepath.Join(withChromium, "etc/chromium.d"), 0o755); err != nil {
		t.Fatal(err)
	}
	n := &runtime.Network{ResolvConf: []byte("nameserver 10.254.0.1\n"), PortsDomain: "sandlot.localhost", PortsAddr: gw}

	mounts, err := r.networkMounts(withChromium, n)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(mounts, func(m specs.Mount) bool { return m.Destination == ChromiumRulesPath })
	if i < 0 || !slices.Contains(mounts[i].Options, "ro") {
		t.Fatalf("no read-only %s among %+v", ChromiumRulesPath, mounts)
	}
	out, err := exec.Command("sh", "-c", `. "$0"; printf '%s\n' "$@"`, mounts[i].Source, "--", "http://8000-x.sandlot.localhost/").Output()
	if err != nil {
		t.Fatal(err)
	}
	want := "--host-resolver-rules=MAP *.sandlot.localhost 10.254.0.1\n--\nhttp://8000-x.sandlot.localhost/\n"
	if string(out) != want {
		t.Errorf("the wrapper's arguments:\n%s\nwant:\n%s", out, want)
	}

	mounts, err = r.networkMounts(t.TempDir(), n)
	if err != nil || slices.ContainsFunc(mounts, func(m specs.Mount) bool { return m.Destination == ChromiumRulesPath }) {
		t.Errorf("a root without Chromium: %+v, %v", mounts, err)
	}
	for _, bad := range []string{`x" "--remote-debugging-port=1`, "a b", "$(reboot)", "a..b", ""} {
		bn := *n
		bn.PortsDomain = bad
		if _, err := r.networkMounts(withChromium, &bn); bad != "" && !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("domain %q: %v", bad, err)
		}
	}
}
