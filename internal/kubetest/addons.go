package kubetest

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"
)

// GVisorRuntimeClass is the RuntimeClass whose pods run under gVisor
// (containerd's runsc runtime).
const GVisorRuntimeClass = "gvisor"

var crdResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// startAddons installs the gvisor RuntimeClass and agent-sandbox's CRDs
// (from the same module version as its controller), then starts the
// controller with its extensions (templates, warm pools, claims).
func (c *Cluster) startAddons(ctx context.Context) error {
	rc := &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: GVisorRuntimeClass}, Handler: "runsc"}
	if _, err := c.client.NodeV1().RuntimeClasses().Create(ctx, rc, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("kubetest: RuntimeClass: %w", err)
	}
	files, err := crdFiles(c.bins.crds)
	if err != nil {
		return err
	}
	var names []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		obj := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(b, &obj.Object); err != nil {
			return fmt.Errorf("kubetest: %s: %w", f, err)
		}
		if _, err := c.dyn.Resource(crdResource).Create(ctx, obj, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("kubetest: CRD %s: %w", obj.GetName(), err)
		}
		names = append(names, obj.GetName())
	}
	for _, name := range names {
		if err := waitFor(ctx, nil, "CRD "+name+" established", func() (bool, error) {
			u, err := c.dyn.Resource(crdResource).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
			for _, cond := range conds {
				m, _ := cond.(map[string]any)
				if m["type"] == "Established" && m["status"] == "True" {
					return true, nil
				}
			}
			return false, nil
		}); err != nil {
			return err
		}
	}
	ctrl, err := c.startProc("agent-sandbox-controller", c.bins.agentSandbox, []string{
		"--extensions", "--leader-elect=false",
		"--metrics-bind-address=0",
		"--health-probe-bind-address=127.0.0.1:" + strconv.Itoa(c.ports.sandboxProbe),
	}, "KUBECONFIG="+c.Kubeconfig)
	if err != nil {
		return err
	}
	return waitHTTP(ctx, ctrl, "http://127.0.0.1:"+strconv.Itoa(c.ports.sandboxProbe)+"/readyz", nil)
}

// waitReady waits for what a test needs before its first pod: the node
// Ready with its pod range, the default namespace's service account, and
// the NetworkPolicy controller and kube-proxy healthy.
func (c *Cluster) waitReady(ctx context.Context) error {
	kubelet := c.proc("kubelet")
	if err := waitFor(ctx, kubelet, "node "+nodeName+" Ready", func() (bool, error) {
		n, err := c.client.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if n.Spec.PodCIDR != podCIDR {
			return false, fmt.Errorf("node pod range %q, want %s", n.Spec.PodCIDR, podCIDR)
		}
		for _, cond := range n.Status.Conditions {
			if cond.Type == corev1.NodeReady {
				return cond.Status == corev1.ConditionTrue, fmt.Errorf("Ready %s: %s", cond.Status, cond.Message)
			}
		}
		return false, nil
	}); err != nil {
		return err
	}
	if err := waitFor(ctx, c.proc("kube-controller-manager"), "the default service account", func() (bool, error) {
		_, err := c.client.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil, err
	}); err != nil {
		return err
	}
	if err := waitHTTP(ctx, c.proc("kube-router"), "http://127.0.0.1:"+strconv.Itoa(c.ports.routerHealth)+"/healthz", nil); err != nil {
		return err
	}
	if err := waitHTTP(ctx, c.proc("kube-proxy"), "http://127.0.0.1:"+strconv.Itoa(c.ports.proxyHealthz)+"/healthz", &http.Client{}); err != nil {
		return err
	}
	return c.waitServiceRules(ctx)
}

// waitServiceRules waits until the API server answers the node at its
// service address: kube-proxy's rules are in. kube-proxy says healthy
// after a failed first sync too: kube-router's rewrite of the whole filter
// table can drop a chain kube-proxy just made ("Failed to ensure chain
// jumps ... Chain 'KUBE-SERVICES' does not exist"), which leaves no
// service rules until a retry 30 s later, which can meet kube-router's
// next rewrite the same way (seen at cluster start). startNode starts
// kube-router only after this holds; waitReady checks it again.
func (c *Cluster) waitServiceRules(ctx context.Context) error {
	return waitFor(ctx, c.proc("kube-proxy"), "kube-proxy's rules for the API server's service", func() (bool, error) {
		return c.answersAt(ctx, net.JoinHostPort(apiService, "443")) == nil, nil
	})
}

// answersAt is nil when the cluster's API server answers /readyz at
// hostport over TLS, its certificate checked against the cluster's CA. A
// TCP connect alone proves nothing: some networks answer a connect to any
// address on 443 (a transparent proxy on the default route), so an address
// kube-proxy has not translated can seem to answer.
func (c *Cluster) answersAt(ctx context.Context, hostport string) error {
	cfg := rest.CopyConfig(c.REST)
	cfg.Host = "https://" + hostport
	cfg.Timeout = 3 * time.Second
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	_, err = cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
	return err
}

func (c *Cluster) proc(name string) *proc {
	for _, p := range c.procs {
		if p.name == name {
			return p
		}
	}
	return nil
}
