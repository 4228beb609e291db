package kubetest

import (
	"context"
	"fmt"
	"os/exec"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// NetDiag says what decides a pod's traffic from ip, for a test that found
// a destination unreachable: every pod the API server holds at that address
// (a pod whose address came back to the pool while its object lingers keeps
// kube-router's rules for it), the netfilter rules that name the address,
// and kube-proxy's rules for the API server's service.
func (c *Cluster) NetDiag(ctx context.Context, ip string) string {
	var b strings.Builder
	pods, err := c.client.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		fmt.Fprintf(&b, "pods: %v\n", err)
	} else {
		var lines []string
		for _, p := range pods.Items {
			if p.Status.PodIP != ip {
				continue
			}
			state := string(p.Status.Phase)
			if p.DeletionTimestamp != nil {
				state += ", being deleted since " + p.DeletionTimestamp.UTC().Format("15:04:05")
			}
			lines = append(lines, fmt.Sprintf("  %s/%s: %s", p.Namespace, p.Name, state))
		}
		sort.Strings(lines)
		fmt.Fprintf(&b, "pods at %s:\n%s\n", ip, strings.Join(lines, "\n"))
	}
	for _, table := range []string{"filter", "nat"} {
		out, err := exec.CommandContext(ctx, "iptables-save", "-t", table).Output()
		if err != nil {
			fmt.Fprintf(&b, "iptables-save -t %s: %v\n", table, err)
			continue
		}
		fmt.Fprintf(&b, "%s rules naming %s or the API server's service:\n", table, ip)
		for _, line := range strings.Split(string(out), "\n") {
			if strings.Contains(line, ip+"/") || strings.Contains(line, ip+" ") || strings.Contains(line, "default/kubernetes") {
				b.WriteString("  " + line + "\n")
			}
		}
	}
	if out, err := exec.CommandContext(ctx, "ipset", "list").Output(); err == nil {
		var sets []string
		var cur string
		for _, line := range strings.Split(string(out), "\n") {
			if name, ok := strings.CutPrefix(line, "Name: "); ok {
				cur = name
			} else if strings.TrimSpace(strings.Fields(line + " x")[0]) == ip {
				sets = append(sets, cur)
			}
		}
		fmt.Fprintf(&b, "ipsets holding %s: %v\n", ip, sets)
	}
	return b.String()
}
