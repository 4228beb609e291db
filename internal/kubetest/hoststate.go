package kubetest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

// hostSysctls are the host's settings the cluster changes: the bridge
// plugin turns on forwarding, and the kubelet sets its kernel tunables
// (overcommit, panic on oops, keyring quotas) unless told to fail instead.
// Stop puts back what they were; the values are also saved in the
// cluster's directory, so the cleanup after a crash restores them too.
var hostSysctls = []string{
	"net/ipv4/ip_forward",
	"vm/overcommit_memory",
	"vm/panic_on_oom",
	"kernel/panic",
	"kernel/panic_on_oops",
	"kernel/keys/root_maxkeys",
	"kernel/keys/root_maxbytes",
	"net/ipv4/conf/all/route_localnet",
}

// hostState holds the host's sysctl values from before the cluster.
type hostState map[string]string

const hostStateFile = "host-sysctls"

func snapshotHost() hostState {
	h := hostState{}
	for _, k := range hostSysctls {
		if b, err := os.ReadFile(filepath.Join("/proc/sys", k)); err == nil {
			h[k] = strings.TrimSpace(string(b))
		}
	}
	return h
}

// save writes the values into dir, for a cleanup after a crash.
func (h hostState) save(dir string) error {
	var b strings.Builder
	for k, v := range h {
		fmt.Fprintf(&b, "%s=%s\n", k, v)
	}
	return os.WriteFile(filepath.Join(dir, hostStateFile), []byte(b.String()), 0o600)
}

func loadHostState(dir string) hostState {
	b, err := os.ReadFile(filepath.Join(dir, hostStateFile))
	if err != nil {
		return nil
	}
	h := hostState{}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok && slices.Contains(hostSysctls, k) {
			h[k] = v
		}
	}
	return h
}

func (h hostState) enableForwarding() error {
	return os.WriteFile("/proc/sys/net/ipv4/ip_forward", []byte("1"), 0o644)
}

func (h hostState) restore() error {
	var errs []error
	for k, v := range h {
		if err := os.WriteFile(filepath.Join("/proc/sys", k), []byte(v), 0o644); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// changed lists the settings that differ from h now.
func (h hostState) changed() []string {
	var out []string
	for k, v := range snapshotHost() {
		if old, ok := h[k]; ok && old != v {
			out = append(out, fmt.Sprintf("%s=%s (was %s)", k, v, old))
		}
	}
	sort.Strings(out)
	return out
}

// hostPaths are the paths outside the cluster's directory that its
// components write whatever their configuration says: libcni's result
// cache (one file per pod network, named by the network: ours and
// containerd's loopback), the kubelet's device plugin socket, and the
// directories that hold them, the kubelet's log links and the shims'
// sockets (/run/containerd/s, whatever containerd's state directory). Only a cluster
// holding the machine lock runs, so what matches is ours.
var (
	hostFileGlobs = []string{
		"/var/lib/cni/results/kubetest-*",
		"/var/lib/cni/results/cni-loopback-*",
		"/var/lib/kubelet/device-plugins/kubelet.sock",
		"/var/lib/kubelet/device-plugins/kubelet_internal_checkpoint",
	}
	// hostDirs are removed when empty, children first.
	hostDirs = []string{
		"/var/lib/cni/results", "/var/lib/cni",
		"/var/lib/kubelet/device-plugins", "/var/lib/kubelet",
		"/var/log/containers", "/var/log/pods",
		"/run/containerd/s", "/run/containerd",
	}
)

func removeHostPaths() {
	for _, g := range hostFileGlobs {
		matches, _ := filepath.Glob(g)
		for _, m := range matches {
			_ = os.Remove(m)
		}
	}
	for _, d := range hostDirs {
		_ = os.Remove(d) // fails, as it should, when not empty
	}
}
