package kubetest

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// The cluster's address ranges: apart from sandlot's own sandbox pool
// (10.254.0.0/16) and the ranges its tests use.
const (
	clusterCIDR = "10.245.0.0/16"
	podCIDR     = "10.245.0.0/24"
	serviceCIDR = "10.246.0.0/24"
	apiService  = "10.246.0.1"
	bridgeName  = "kubetest0"
	nodeName    = "kubetest"
	cgroupRoot  = "/kubetest"
)

func (c *Cluster) path(elem ...string) string {
	return filepath.Join(append([]string{c.Dir}, elem...)...)
}

func writeFile(path, content string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, []byte(content), 0o600)
}

// writeKubeconfig writes a kubeconfig for the named client certificate.
func (c *Cluster) writeKubeconfig(path, cert string) error {
	return writeFile(path, fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: kubetest
  cluster:
    server: https://%s:%d
    certificate-authority: %s
users:
- name: %s
  user:
    client-certificate: %s
    client-key: %s
contexts:
- name: kubetest
  context: {cluster: kubetest, user: %s}
current-context: kubetest
`, c.nodeIP, c.ports.apiserver, c.pki.path("ca.crt"), cert, c.pki.path(cert+".crt"), c.pki.path(cert+".key"), cert))
}

// containerdConfig keeps every path of containerd, its shims and runtimes
// under the cluster's directory (network namespaces too), so a stop finds
// all of it, and points image pulls for the harness's registry at plain HTTP.
// restrict_oom_score_adj keeps containers' OOM scores at or above
// containerd's own: the kubelet asks -998 for pod sandboxes, which takes
// CAP_SYS_RESOURCE, and machines that run the tests may lack it.
func (c *Cluster) containerdConfig() error {
	hosts := fmt.Sprintf("server = \"http://%s\"\n\n[host.\"http://%s\"]\n  capabilities = [\"pull\", \"resolve\"]\n  skip_verify = true\n",
		c.Registry, c.Registry)
	if err := writeFile(c.path("containerd", "certs.d", c.Registry, "hosts.toml"), hosts); err != nil {
		return err
	}
	runsc := fmt.Sprintf(`binary_name = %q
root = %q
[runsc_config]
  platform = "systrap"
  gofer-network-namespace = "new"
`, c.bins.runsc, c.path("runsc"))
	if err := writeFile(c.path("containerd", "runsc.toml"), runsc); err != nil {
		return err
	}
	cfg := fmt.Sprintf(`version = 3
root = %[1]q
state = %[2]q

[grpc]
  address = %[3]q

[ttrpc]
  address = %[4]q

[plugins."io.containerd.cri.v1.images"]
  snapshotter = "overlayfs"
  [plugins."io.containerd.cri.v1.images".pinned_images]
    sandbox = %[5]q
  [plugins."io.containerd.cri.v1.images".registry]
    config_path = %[6]q

[plugins."io.containerd.cri.v1.runtime"]
  netns_mounts_under_state_dir = true
  restrict_oom_score_adj = true
  enable_unprivileged_ports = false
  [plugins."io.containerd.cri.v1.runtime".cni]
    bin_dirs = [%[7]q]
    conf_dir = %[8]q
  [plugins."io.containerd.cri.v1.runtime".containerd]
    default_runtime_name = "runc"
    [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
        BinaryName = %[9]q
        Root = %[10]q
        SystemdCgroup = false
    [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runsc]
      runtime_type = "io.containerd.runsc.v1"
      [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runsc.options]
        TypeUrl = "io.containerd.runsc.v1.options"
        ConfigPath = %[11]q

[plugins."io.containerd.grpc.v1.cri"]
  disable_tcp_service = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
`, c.path("containerd", "root"), c.path("containerd", "state"), c.containerdSock(), c.path("containerd", "ttrpc.sock"),
		c.pauseImage, c.path("containerd", "certs.d"), filepath.Dir(c.bins.bridge), c.path("cni", "net.d"),
		c.bins.runc, c.path("runc"), c.path("containerd", "runsc.toml"))
	return writeFile(c.path("containerd", "config.toml"), cfg)
}

func (c *Cluster) containerdSock() string { return c.path("containerd", "containerd.sock") }

// cniConfig: one bridge with host-local addresses from the node's pod range;
// the bridge is the pods' gateway so they reach the node and, through
// kube-proxy, the API server's service address.
func (c *Cluster) cniConfig() error {
	return writeFile(c.path("cni", "net.d", "10-kubetest.conflist"), fmt.Sprintf(`{
  "cniVersion": "1.0.0",
  "name": "kubetest",
  "plugins": [
    {
      "type": "bridge",
      "bridge": %q,
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "dataDir": %q,
        "ranges": [[{"subnet": %q}]],
        "routes": [{"dst": "0.0.0.0/0"}]
      }
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
`, bridgeName, c.path("cni", "ipam"), podCIDR))
}

// kubeletConfig: cgroupfs on this machine's cgroup v1 (failCgroupV1 off),
// every directory under the cluster's, eviction thresholds low enough that a
// shared build machine's disk does not taint the node.
func (c *Cluster) kubeletConfig() error {
	return writeFile(c.path("kubelet", "config.yaml"), fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: %s
port: %d
healthzBindAddress: 127.0.0.1
healthzPort: %d
readOnlyPort: 0
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: %s}
authorization: {mode: Webhook}
tlsCertFile: %s
tlsPrivateKeyFile: %s
cgroupDriver: cgroupfs
cgroupRoot: %s
failCgroupV1: false
failSwapOn: false
containerRuntimeEndpoint: unix://%s
podLogsDir: %s
resolvConf: /etc/resolv.conf
hairpinMode: hairpin-veth
serializeImagePulls: false
maxPods: 110
imageGCHighThresholdPercent: 99
imageGCLowThresholdPercent: 98
evictionHard:
  memory.available: "100Mi"
  nodefs.available: "1%%"
  nodefs.inodesFree: "1%%"
  imagefs.available: "1%%"
  imagefs.inodesFree: "1%%"
protectKernelDefaults: false
localStorageCapacityIsolation: true
shutdownGracePeriod: 0s
`, c.nodeIP, c.ports.kubelet, c.ports.kubeletHealthz, c.pki.path("ca.crt"), c.pki.path("kubelet-serving.crt"),
		c.pki.path("kubelet-serving.key"), cgroupRoot, c.containerdSock(), c.path("pod-logs")))
}

func (c *Cluster) kubeProxyConfig() error {
	return writeFile(c.path("kube-proxy", "config.yaml"), fmt.Sprintf(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: iptables
clientConnection: {kubeconfig: %s}
hostnameOverride: %s
clusterCIDR: %s
healthzBindAddress: 127.0.0.1:%d
metricsBindAddress: 127.0.0.1:%d
iptables:
  localhostNodePorts: false
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
`, c.Kubeconfig, nodeName, clusterCIDR, c.ports.proxyHealthz, c.ports.proxyMetrics))
}

// crdFiles lists the agent-sandbox CRD manifests.
func crdFiles(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".yaml") {
			out = append(out, filepath.Join(dir, e.Name()))
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("kubetest: no CRD manifests in %s", dir)
	}
	return out, nil
}
