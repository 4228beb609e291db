// Package kubetest starts a real single-node Kubernetes cluster on this
// machine for tests: etcd, kube-apiserver, kube-controller-manager,
// kube-scheduler, containerd 2 with runc and gVisor (a "gvisor"
// RuntimeClass), the kubelet, kube-proxy, kube-router's NetworkPolicy
// controller, the CNI bridge, a plain-HTTP registry the node pulls from, and
// the agent-sandbox controller with its extensions. The binaries come from
// scripts/k8s.sh's cache. One cluster per test binary (Shared, stopped by
// Main) and one per machine (a lock); Stop removes everything it made, which
// Leftovers checks. docs/kubernetes-test-cluster.md describes the cluster.
package kubetest
