package kubetest

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// bins are the paths of everything the cluster runs: the components
// scripts/k8s.sh builds into its cache, and the host's runc, runsc and
// netfilter tools (scripts/deps.sh).
type bins struct {
	apiserver, controllerManager, scheduler, kubelet, kubeProxy, kubectl string
	etcd, containerd, shimRunc, shimRunsc                                string
	bridge, hostLocal, loopback, portmap                                 string
	agentSandbox, crds, kubeRouter                                       string
	runc, runsc                                                          string
	version                                                              string
}

// ErrNotBuilt means scripts/k8s.sh has not built the cluster's binaries on
// this machine (or the host lacks a tool the cluster needs).
var ErrNotBuilt = errors.New("kubetest: cluster binaries missing")

// findBins asks scripts/k8s.sh where its cache holds this tree's versions,
// so the versions are written in one place.
func findBins() (*bins, error) {
	root, err := moduleRoot()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command("bash", filepath.Join(root, "scripts", "k8s.sh"), "env")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%w: %s", ErrNotBuilt, strings.TrimSpace(stderr.String()))
	}
	env := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), "="); ok {
			env[k] = v
		}
	}
	b := &bins{}
	for k, dst := range map[string]*string{
		"KUBE_APISERVER": &b.apiserver, "KUBE_CONTROLLER_MANAGER": &b.controllerManager,
		"KUBE_SCHEDULER": &b.scheduler, "KUBELET": &b.kubelet, "KUBE_PROXY": &b.kubeProxy, "KUBECTL": &b.kubectl,
		"ETCD": &b.etcd, "CONTAINERD": &b.containerd, "CONTAINERD_SHIM_RUNC_V2": &b.shimRunc,
		"CONTAINERD_SHIM_RUNSC_V1": &b.shimRunsc, "BRIDGE": &b.bridge, "HOST_LOCAL": &b.hostLocal,
		"LOOPBACK": &b.loopback, "PORTMAP": &b.portmap, "AGENT_SANDBOX_CONTROLLER": &b.agentSandbox,
		"AGENT_SANDBOX_CRDS": &b.crds, "KUBE_ROUTER": &b.kubeRouter, "KUBERNETES_VERSION": &b.version,
	} {
		if env[k] == "" {
			return nil, fmt.Errorf("%w: scripts/k8s.sh env names no %s", ErrNotBuilt, k)
		}
		*dst = env[k]
	}
	// The CNI plugins are found by directory: they must share one.
	for _, p := range []string{b.hostLocal, b.loopback, b.portmap} {
		if filepath.Dir(p) != filepath.Dir(b.bridge) {
			return nil, fmt.Errorf("kubetest: CNI plugins in different directories: %s, %s", p, b.bridge)
		}
	}
	for _, tool := range []struct {
		dst  *string
		name string
	}{{&b.runc, "runc"}, {&b.runsc, "runsc"}} {
		p, err := exec.LookPath(tool.name)
		if err != nil {
			return nil, fmt.Errorf("%w: %s not on PATH (scripts/deps.sh test)", ErrNotBuilt, tool.name)
		}
		*tool.dst = p
	}
	// kube-proxy, kube-router and the portmap plugin run these.
	for _, tool := range []string{"iptables", "iptables-save", "iptables-restore", "ipset", "nft"} {
		if _, err := exec.LookPath(tool); err != nil {
			return nil, fmt.Errorf("%w: %s not on PATH (scripts/deps.sh test)", ErrNotBuilt, tool)
		}
	}
	return b, nil
}

// moduleRoot finds the directory of sandlot's go.mod above the working
// directory (tests run in their package's directory).
func moduleRoot() (string, error) {
	if d := os.Getenv("SANDLOT_SOURCE_DIR"); d != "" {
		return d, nil
	}
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && bytes.HasPrefix(b, []byte("module github.com/sandlot/sandlot\n")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("kubetest: not inside sandlot's source tree (set SANDLOT_SOURCE_DIR)")
		}
		dir = parent
	}
}

// SourceDir is sandlot's source tree: $SANDLOT_SOURCE_DIR, else the module
// root above the working directory.
func SourceDir() (string, error) { return moduleRoot() }
