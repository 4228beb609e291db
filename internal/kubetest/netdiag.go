package kubetest

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// NetDiag says what decides a pod's traffic from ip, for a test that found
// a destination unreachable: every pod the API server holds at that address
// (a pod whose address came back to the pool while its object lingers keeps
// kube-router's rules for it), the netfilter rules that name the address,
// kube-proxy's rules for the API server's service (with packet counts)
// and the service's endpoints as the API server holds them, whether the
// API server answers the node at the service address and at its own
// (answersAt), what else on the host decides the pod's packets
// (hostNetDiag: conntrack, every nftables base chain, legacy iptables, the
// route, sysctls) and the end of kube-proxy's and kube-router's logs.
func (c *Cluster) NetDiag(ctx context.Context, ip string) string {
	var b strings.Builder
	if eps, err := c.client.DiscoveryV1().EndpointSlices("default").List(ctx, metav1.ListOptions{LabelSelector: "kubernetes.io/service-name=kubernetes"}); err != nil {
		fmt.Fprintf(&b, "the kubernetes service's endpoints: %v\n", err)
	} else {
		for _, s := range eps.Items {
			for _, e := range s.Endpoints {
				ready := e.Conditions.Ready != nil && *e.Conditions.Ready
				fmt.Fprintf(&b, "the kubernetes service's endpoint %v (ready %v), ports %d\n", e.Addresses, ready, len(s.Ports))
			}
		}
	}
	for _, addr := range []string{net.JoinHostPort(apiService, "443"), strings.TrimPrefix(c.REST.Host, "https://")} {
		fmt.Fprintf(&b, "the API server answers the node at %s (TLS, the cluster's CA): %v\n", addr, c.answersAt(ctx, addr))
	}
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
		// -c: each rule's packet counts say how far the client's packets
		// went (a DNAT that counted them, a drop that did).
		out, err := exec.CommandContext(ctx, "iptables-save", "-c", "-t", table).Output()
		if err != nil {
			fmt.Fprintf(&b, "iptables-save -t %s: %v\n", table, err)
			continue
		}
		fmt.Fprintf(&b, "%s: the base chains, their rules, and the rules naming %s or the API server's service, with [packets:bytes]:\n", table, ip)
		for _, line := range ruleLines(string(out), ip) {
			b.WriteString("  " + line + "\n")
		}
	}
	b.WriteString(hostNetDiag(ctx, ip))
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
	for _, name := range []string{"kube-proxy", "kube-router"} {
		if p := c.proc(name); p != nil {
			fmt.Fprintf(&b, "%s's log ends:\n%s\n", name, p.tail(15))
		}
	}
	return b.String()
}

// ruleLines picks from iptables-save's output (with or without -c) the
// base chains with their policy counts, their rules, and the rules naming
// ip or the API server's service (kube-proxy's comment names it).
func ruleLines(save, ip string) []string {
	var out []string
	for _, line := range strings.Split(save, "\n") {
		rule := line
		if strings.HasPrefix(rule, "[") {
			if _, r, ok := strings.Cut(rule, "] "); ok {
				rule = r
			}
		}
		base := false
		for _, ch := range []string{"PREROUTING", "INPUT", "FORWARD", "OUTPUT", "POSTROUTING"} {
			if strings.HasPrefix(rule, "-A "+ch+" ") || strings.HasPrefix(rule, ":"+ch+" ") {
				base = true
			}
		}
		if base || strings.Contains(rule, ip+"/") || strings.Contains(rule, ip+" ") || strings.Contains(rule, "default/kubernetes") {
			out = append(out, line)
		}
	}
	return out
}
