package oci

import (
	"errors"
	"os"
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

// TestNetworkFiles: a network file is bound read-only at its path when the
// root has its When directory, and not otherwise; a path that is not
// absolute and clean is refused.
func TestNetworkFiles(t *testing.T) {
	r := &Runtime{share: t.TempDir()}
	withDir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(withDir, "etc/prog.d"), 0o755); err != nil {
		t.Fatal(err)
	}
	f := runtime.File{Path: "/etc/prog.d/rule", When: "/etc/prog.d", Data: []byte("rule\n")}
	n := &runtime.Network{ResolvConf: []byte("nameserver 10.254.0.1\n"), Files: []runtime.File{f}}

	mounts, err := r.networkMounts(withDir, n)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(mounts, func(m specs.Mount) bool { return m.Destination == f.Path })
	if i < 0 || !slices.Contains(mounts[i].Options, "ro") {
		t.Fatalf("no read-only %s among %+v", f.Path, mounts)
	}
	if b, err := os.ReadFile(mounts[i].Source); err != nil || string(b) != "rule\n" {
		t.Errorf("the file holds %q, %v", b, err)
	}

	mounts, err = r.networkMounts(t.TempDir(), n)
	if err != nil || slices.ContainsFunc(mounts, func(m specs.Mount) bool { return m.Destination == f.Path }) {
		t.Errorf("a root without %s: %+v, %v", f.When, mounts, err)
	}
	for _, bad := range []string{"etc/x", "/etc/../x", "/", ""} {
		bn := *n
		bn.Files = []runtime.File{{Path: bad, Data: []byte("x")}}
		if _, err := r.networkMounts(withDir, &bn); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("path %q: %v", bad, err)
		}
	}
}
