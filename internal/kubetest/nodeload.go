package kubetest

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// NodeLoad says what holds the node's CPU and memory: its allocatable, and
// every pod the scheduler counts against it (not yet Succeeded or Failed),
// with its namespace, phase, whether it is being deleted, and its
// requests. A test that finds the cluster out of capacity logs it.
func (c *Cluster) NodeLoad(ctx context.Context) string {
	var b strings.Builder
	nodes, err := c.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return "nodes: " + err.Error()
	}
	for _, n := range nodes.Items {
		fmt.Fprintf(&b, "node %s: allocatable cpu %s, memory %s\n", n.Name,
			n.Status.Allocatable.Cpu(), n.Status.Allocatable.Memory())
	}
	pods, err := c.client.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return b.String() + "pods: " + err.Error()
	}
	var lines []string
	var cpu, mem int64
	for _, p := range pods.Items {
		if p.Status.Phase == "Succeeded" || p.Status.Phase == "Failed" || p.Spec.NodeName == "" {
			continue
		}
		var pc, pm int64
		for _, ct := range p.Spec.Containers {
			pc += ct.Resources.Requests.Cpu().MilliValue()
			pm += ct.Resources.Requests.Memory().Value()
		}
		cpu, mem = cpu+pc, mem+pm
		state := string(p.Status.Phase)
		if p.DeletionTimestamp != nil {
			state += fmt.Sprintf(", deleted %s ago", time.Since(p.DeletionTimestamp.Time).Round(time.Second))
		}
		lines = append(lines, fmt.Sprintf("  %s/%s: %s; requests cpu %dm, memory %d MiB", p.Namespace, p.Name, state, pc, pm>>20))
	}
	sort.Strings(lines)
	fmt.Fprintf(&b, "%d pods on nodes request cpu %dm, memory %d MiB:\n%s", len(lines), cpu, mem>>20, strings.Join(lines, "\n"))
	return b.String()
}

// deleteNamespace deletes ns and waits, up to bound, until it is gone, so
// the next test finds the node's capacity free again; it reports what is
// left when the bound passes.
func (c *Cluster) deleteNamespace(ns string, bound time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	if err := c.client.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	}
	err := waitFor(ctx, nil, "namespace "+ns+" deleted", func() (bool, error) {
		_, err := c.client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("%w\n%s", err, c.NodeLoad(context.Background()))
	}
	return nil
}
