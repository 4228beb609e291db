package kubetest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// DefaultBaseDir holds the clusters' directories. Short, because unix socket
// paths under it must stay within 108 bytes.
const DefaultBaseDir = "/var/lib/sandlot-kubetest"

// Options tune Start. The zero value is what tests use.
type Options struct {
	// BaseDir is where the cluster's directory is made (DefaultBaseDir).
	BaseDir string
	// Logf receives progress lines (none when nil).
	Logf func(format string, args ...any)
	// ReadyTimeout bounds the start, from the first process to a Ready node
	// with the agent-sandbox controller serving (default 4 minutes).
	ReadyTimeout time.Duration
	// LockWait bounds the wait for another cluster on this machine to stop
	// (default 30 minutes).
	LockWait time.Duration
}

// Cluster is a running single-node cluster. Its fields are read-only.
type Cluster struct {
	// Kubeconfig is the path of an admin kubeconfig (system:masters).
	Kubeconfig string
	// REST is the admin client configuration.
	REST *rest.Config
	// Registry is host:port of the plain-HTTP registry the node pulls from.
	Registry string
	// Node is the node's name.
	Node string
	// Dir is the cluster's directory: state, certificates, logs.
	Dir string

	nodeIP     string
	ports      ports
	pki        *pki
	bins       *bins
	pauseImage string
	probeImage string
	probeBin   []byte
	procs      []*proc
	registry   *http.Server
	lock       *os.File
	logf       func(format string, args ...any)
	client     kubernetes.Interface
	dyn        dynamic.Interface
	host       hostState
	stopped    bool
}

type ports struct {
	etcd, etcdPeer, apiserver, controllerManager, scheduler int
	kubelet, kubeletHealthz, proxyHealthz, proxyMetrics     int
	routerHealth, sandboxProbe                              int
}

// NodeIP is the node's address: where the API server, the kubelet and the
// registry's pulls are, and what a pod dials to reach the node.
func (c *Cluster) NodeIP() string { return c.nodeIP }

// APIServiceAddr is the API server's service address (the kubernetes
// Service in default), which kube-proxy forwards to the node.
func (c *Cluster) APIServiceAddr() string { return net.JoinHostPort(apiService, "443") }

// PodGateway is the node's address on the pods' bridge (their default
// route): the node as pods see it next to NodeIP.
func (c *Cluster) PodGateway() string { return podGateway }

// Kubectl is the path of the kubectl built with the cluster's version.
func (c *Cluster) Kubectl() string { return c.bins.kubectl }

// Client is an admin clientset.
func (c *Cluster) Client() kubernetes.Interface { return c.client }

// Dynamic is an admin dynamic client (for agent-sandbox's resources).
func (c *Cluster) Dynamic() dynamic.Interface { return c.dyn }

// ProbeImage is the reference of the probe image (internal/kubetest/probe)
// in the cluster's registry, with `/probe serve` as its entrypoint.
func (c *Cluster) ProbeImage() string { return c.probeImage }

// ProbeBinary is the static probe binary the probe image holds.
func (c *Cluster) ProbeBinary() []byte { return c.probeBin }

// Start brings up a cluster: etcd, the API server, controller-manager and
// scheduler, containerd with runc and gVisor, the kubelet, kube-proxy,
// kube-router's NetworkPolicy controller, a gvisor RuntimeClass and the
// agent-sandbox CRDs and controller. It returns once the node is Ready. It
// holds a machine-wide lock until Stop: one cluster per machine.
func Start(ctx context.Context, opts Options) (c *Cluster, err error) {
	if os.Geteuid() != 0 {
		return nil, fmt.Errorf("%w: a cluster needs root", ErrNotBuilt)
	}
	b, err := findBins()
	if err != nil {
		return nil, err
	}
	if opts.BaseDir == "" {
		opts.BaseDir = DefaultBaseDir
	}
	if opts.Logf == nil {
		opts.Logf = func(string, ...any) {}
	}
	if opts.ReadyTimeout == 0 {
		opts.ReadyTimeout = 4 * time.Minute
	}
	if opts.LockWait == 0 {
		opts.LockWait = 30 * time.Minute
	}
	lock, err := machineLock(ctx, opts.LockWait, opts.Logf)
	if err != nil {
		return nil, err
	}
	// Holding the lock, whatever an earlier cluster left (a test binary
	// killed by its timeout) is stale: remove it before starting.
	if err := cleanStale(opts.BaseDir, b, opts.Logf); err != nil {
		unlock(lock)
		return nil, err
	}
	c = &Cluster{bins: b, lock: lock, logf: opts.Logf, Node: nodeName}
	defer func() {
		if err != nil {
			err = c.failed(err)
			if serr := c.Stop(); serr != nil {
				err = fmt.Errorf("%w (and stopping: %v)", err, serr)
			}
		}
	}()
	ctx, cancel := context.WithTimeout(ctx, opts.ReadyTimeout)
	defer cancel()
	if err := c.prepare(ctx, opts.BaseDir); err != nil {
		return c, err
	}
	if err := c.startControlPlane(ctx); err != nil {
		return c, err
	}
	if err := c.startNode(ctx); err != nil {
		return c, err
	}
	if err := c.startAddons(ctx); err != nil {
		return c, err
	}
	if err := c.waitReady(ctx); err != nil {
		return c, err
	}
	c.logf("cluster ready: %s", c.Kubeconfig)
	return c, nil
}

// failed adds to a start error the end of the logs of the components that
// exited (of all of them when none did), and keeps the logs, since Stop
// removes the cluster's directory.
func (c *Cluster) failed(err error) error {
	var b strings.Builder
	b.WriteString(err.Error())
	exited := 0
	for _, p := range c.procs {
		if ok, perr := p.exited(); ok {
			exited++
			fmt.Fprintf(&b, "\n--- %s exited (%v); its log ends:\n%s", p.name, perr, p.tail(15))
		}
	}
	if exited == 0 {
		for _, p := range c.procs {
			fmt.Fprintf(&b, "\n--- %s's log ends:\n%s", p.name, p.tail(5))
		}
	}
	if c.Dir != "" {
		if kept, kerr := keepLogs(c.path("logs")); kerr == nil {
			fmt.Fprintf(&b, "\n(all logs kept in %s)", kept)
		}
	}
	return errors.New(b.String())
}

// keepLogs copies the logs directory to a new directory under the system's
// temporary directory.
func keepLogs(dir string) (string, error) {
	dst, err := os.MkdirTemp("", "sandlot-kubetest-logs-")
	if err != nil {
		return "", err
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return "", err
	}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			continue
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), b, 0o600); err != nil {
			return "", err
		}
	}
	return dst, nil
}

// prepare makes the directory, certificates, registry, images and configs.
func (c *Cluster) prepare(ctx context.Context, base string) error {
	if err := os.MkdirAll(base, 0o700); err != nil {
		return err
	}
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	c.Dir = filepath.Join(base, "c-"+hex.EncodeToString(rnd[:]))
	if err := os.MkdirAll(c.path("logs"), 0o700); err != nil {
		return err
	}
	c.host = snapshotHost()
	if err := c.host.save(c.Dir); err != nil {
		return err
	}
	ip, err := nodeIP()
	if err != nil {
		return err
	}
	c.nodeIP = ip
	pp := []*int{&c.ports.etcd, &c.ports.etcdPeer, &c.ports.apiserver, &c.ports.controllerManager,
		&c.ports.scheduler, &c.ports.kubelet, &c.ports.kubeletHealthz, &c.ports.proxyHealthz,
		&c.ports.proxyMetrics, &c.ports.routerHealth, &c.ports.sandboxProbe}
	if err := freePorts(pp); err != nil {
		return err
	}
	if c.pki, err = newPKI(c.path("pki")); err != nil {
		return err
	}
	ips := []net.IP{net.ParseIP(c.nodeIP), net.ParseIP("127.0.0.1"), net.ParseIP(apiService)}
	names := []string{"kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local", "localhost"}
	for _, cert := range []struct {
		name, cn string
		orgs     []string
		ips      []net.IP
		dns      []string
	}{
		{"apiserver", "kube-apiserver", nil, ips, names},
		{"admin", "kubetest-admin", []string{"system:masters"}, nil, nil},
		{"apiserver-kubelet-client", "kube-apiserver-kubelet-client", []string{"system:masters"}, nil, nil},
		{"kubelet", "system:node:" + nodeName, []string{"system:nodes"}, nil, nil},
		{"kubelet-serving", "system:node:" + nodeName, []string{"system:nodes"}, []net.IP{net.ParseIP(c.nodeIP)}, []string{nodeName}},
	} {
		if err := c.pki.issue(cert.name, cert.cn, cert.orgs, cert.ips, cert.dns); err != nil {
			return err
		}
	}
	if err := c.pki.serviceAccountKey(); err != nil {
		return err
	}
	c.Kubeconfig = c.path("admin.kubeconfig")
	if err := c.writeKubeconfig(c.Kubeconfig, "admin"); err != nil {
		return err
	}
	if err := c.writeKubeconfig(c.path("kubelet", "kubeconfig"), "kubelet"); err != nil {
		return err
	}
	if c.REST, err = clientcmd.BuildConfigFromFlags("", c.Kubeconfig); err != nil {
		return err
	}
	c.REST.QPS, c.REST.Burst = 100, 200
	if c.client, err = kubernetes.NewForConfig(c.REST); err != nil {
		return err
	}
	if c.dyn, err = dynamic.NewForConfig(c.REST); err != nil {
		return err
	}
	if err := c.startRegistry(); err != nil {
		return err
	}
	if err := c.pushImages(ctx); err != nil {
		return err
	}
	for _, f := range []func() error{c.containerdConfig, c.cniConfig, c.kubeletConfig, c.kubeProxyConfig} {
		if err := f(); err != nil {
			return err
		}
	}
	return nil
}

func (c *Cluster) startControlPlane(ctx context.Context) error {
	etcdURL := "http://127.0.0.1:" + strconv.Itoa(c.ports.etcd)
	peerURL := "http://127.0.0.1:" + strconv.Itoa(c.ports.etcdPeer)
	etcd, err := c.startProc("etcd", c.bins.etcd, []string{
		"--name=kubetest", "--data-dir=" + c.path("etcd"),
		"--listen-client-urls=" + etcdURL, "--advertise-client-urls=" + etcdURL,
		"--listen-peer-urls=" + peerURL, "--initial-advertise-peer-urls=" + peerURL,
		"--initial-cluster=kubetest=" + peerURL,
		// A test cluster's data dies with it: no fsync (much faster on a busy disk).
		"--unsafe-no-fsync", "--log-level=warn",
	})
	if err != nil {
		return err
	}
	if err := waitHTTP(ctx, etcd, etcdURL+"/health", nil); err != nil {
		return err
	}
	p := c.pki.path
	api, err := c.startProc("kube-apiserver", c.bins.apiserver, []string{
		"--etcd-servers=" + etcdURL,
		"--bind-address=" + c.nodeIP, "--advertise-address=" + c.nodeIP,
		"--secure-port=" + strconv.Itoa(c.ports.apiserver),
		"--cert-dir=" + c.path("apiserver"),
		"--tls-cert-file=" + p("apiserver.crt"), "--tls-private-key-file=" + p("apiserver.key"),
		"--client-ca-file=" + p("ca.crt"),
		"--kubelet-client-certificate=" + p("apiserver-kubelet-client.crt"),
		"--kubelet-client-key=" + p("apiserver-kubelet-client.key"),
		"--kubelet-preferred-address-types=InternalIP",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + p("sa.pub"),
		"--service-account-signing-key-file=" + p("sa.key"),
		"--service-cluster-ip-range=" + serviceCIDR,
		"--service-node-port-range=" + nodePortRange,
		"--authorization-mode=Node,RBAC",
		"--enable-admission-plugins=NodeRestriction",
		"--allow-privileged=true",
		"--profiling=false",
		"--event-ttl=15m",
	})
	if err != nil {
		return err
	}
	if err := c.waitAPI(ctx, api, "/readyz"); err != nil {
		return err
	}
	auth := []string{"--kubeconfig=" + c.Kubeconfig, "--authentication-kubeconfig=" + c.Kubeconfig,
		"--authorization-kubeconfig=" + c.Kubeconfig, "--leader-elect=false", "--bind-address=127.0.0.1"}
	if _, err := c.startProc("kube-controller-manager", c.bins.controllerManager, append(auth,
		"--secure-port="+strconv.Itoa(c.ports.controllerManager),
		"--cert-dir="+c.path("controller-manager"),
		"--allocate-node-cidrs=true", "--cluster-cidr="+clusterCIDR, "--node-cidr-mask-size=24",
		"--service-cluster-ip-range="+serviceCIDR,
		"--service-account-private-key-file="+p("sa.key"),
		"--root-ca-file="+p("ca.crt"),
		"--cluster-signing-cert-file="+p("ca.crt"), "--cluster-signing-key-file="+p("ca.key"),
		"--use-service-account-credentials=true",
	)); err != nil {
		return err
	}
	if _, err := c.startProc("kube-scheduler", c.bins.scheduler, append(auth,
		"--secure-port="+strconv.Itoa(c.ports.scheduler),
	)); err != nil {
		return err
	}
	return nil
}

func (c *Cluster) startNode(ctx context.Context) error {
	if err := makeCgroupRoot(); err != nil {
		return err
	}
	if err := c.host.enableForwarding(); err != nil {
		return err
	}
	// containerd finds its shims on PATH.
	path := "PATH=" + filepath.Dir(c.bins.shimRunc) + ":" + filepath.Dir(c.bins.shimRunsc) + ":" + os.Getenv("PATH")
	ctrd, err := c.startProc("containerd", c.bins.containerd,
		[]string{"--config=" + c.path("containerd", "config.toml"), "--log-level=warn"}, path)
	if err != nil {
		return err
	}
	if err := waitFor(ctx, ctrd, "containerd's socket", func() (bool, error) {
		_, err := os.Stat(c.containerdSock())
		return err == nil, nil
	}); err != nil {
		return err
	}
	if _, err := c.startProc("kubelet", c.bins.kubelet, []string{
		"--config=" + c.path("kubelet", "config.yaml"),
		"--kubeconfig=" + c.path("kubelet", "kubeconfig"),
		"--root-dir=" + c.path("kubelet", "root"),
		"--cert-dir=" + c.path("kubelet", "pki"),
		"--hostname-override=" + nodeName,
		"--node-ip=" + c.nodeIP,
		"--v=1",
	}); err != nil {
		return err
	}
	// kube-proxy and kube-router find their node by name: wait for the
	// kubelet to register it.
	if err := waitFor(ctx, c.proc("kubelet"), "node "+nodeName+" registered", func() (bool, error) {
		_, err := c.client.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
		return err == nil, err
	}); err != nil {
		return err
	}
	if _, err := c.startProc("kube-proxy", c.bins.kubeProxy,
		// -v=2: each sync of its rules is logged (NetDiag shows the end).
		[]string{"--config=" + c.path("kube-proxy", "config.yaml"), "--v=2"}); err != nil {
		return err
	}
	// kube-router rewrites the whole filter table as it syncs: started
	// beside kube-proxy's first sync, it can make that sync fail
	// (waitServiceRules). It starts once kube-proxy's rules are in.
	if err := c.waitServiceRules(ctx); err != nil {
		return err
	}
	if _, err := c.startProc("kube-router", c.bins.kubeRouter, []string{
		"--kubeconfig=" + c.Kubeconfig,
		"--hostname-override=" + nodeName,
		"--run-firewall=true", "--run-router=false", "--run-service-proxy=false", "--run-loadbalancer=false",
		"--enable-cni=false", "--enable-ipv4=true", "--enable-ipv6=false",
		"--service-cluster-ip-range=" + serviceCIDR,
		"--service-node-port-range=" + nodePortRange,
		"--metrics-port=0", "--health-port=" + strconv.Itoa(c.ports.routerHealth),
		"--iptables-sync-period=30s",
	}); err != nil {
		return err
	}
	return nil
}

// ErrExited is returned by a wait when the component it waits on exited.
var ErrExited = errors.New("kubetest: component exited")

// waitFor polls cond until it holds, ctx ends, or p (when not nil) exits.
func waitFor(ctx context.Context, p *proc, what string, cond func() (bool, error)) error {
	var last error
	for {
		ok, err := cond()
		if ok {
			return nil
		}
		if err != nil {
			last = err
		}
		if p != nil {
			if done, perr := p.exited(); done {
				return fmt.Errorf("%w: %s, waiting for %s: %v", ErrExited, p.name, what, perr)
			}
		}
		select {
		case <-ctx.Done():
			if last != nil {
				return fmt.Errorf("kubetest: waiting for %s: %w (last: %v)", what, ctx.Err(), last)
			}
			return fmt.Errorf("kubetest: waiting for %s: %w", what, ctx.Err())
		case <-time.After(250 * time.Millisecond):
		}
	}
}

func waitHTTP(ctx context.Context, p *proc, url string, client *http.Client) error {
	if client == nil {
		client = &http.Client{Timeout: 5 * time.Second}
	}
	return waitFor(ctx, p, url, func() (bool, error) {
		resp, err := client.Get(url)
		if err != nil {
			return false, err
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, fmt.Errorf("%s: %s", url, resp.Status)
	})
}

// waitAPI waits for an API server path (/readyz) to answer 200.
func (c *Cluster) waitAPI(ctx context.Context, p *proc, path string) error {
	return waitFor(ctx, p, "the API server's "+path, func() (bool, error) {
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		_, err := c.client.Discovery().RESTClient().Get().AbsPath(path).DoRaw(rctx)
		return err == nil, err
	})
}

// nodeIP is the host's address on its default route (what the kubelet
// advertises), or $SANDLOT_KUBETEST_NODE_IP.
func nodeIP() (string, error) {
	if ip := os.Getenv("SANDLOT_KUBETEST_NODE_IP"); ip != "" {
		return ip, nil
	}
	// A UDP "connection" sends nothing; it only picks the source address.
	conn, err := net.Dial("udp4", "198.51.100.1:9")
	if err != nil {
		return "", fmt.Errorf("kubetest: no IPv4 default route for the node's address (set SANDLOT_KUBETEST_NODE_IP): %w", err)
	}
	defer conn.Close()
	ip := conn.LocalAddr().(*net.UDPAddr).IP
	if ip.IsLoopback() {
		return "", errors.New("kubetest: the default route is loopback; set SANDLOT_KUBETEST_NODE_IP")
	}
	return ip.String(), nil
}

// freePorts fills each port with one the kernel says is free on all
// addresses. Listeners stay open until all are picked, so none repeats.
func freePorts(out []*int) error {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for _, p := range out {
		l, err := net.Listen("tcp", ":0")
		if err != nil {
			return err
		}
		ls = append(ls, l)
		*p = l.Addr().(*net.TCPAddr).Port
	}
	return nil
}
