package kubetest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
)

// hostNetDiag says what else on the host decides a pod's packets besides
// the cluster's own iptables rules: the connections conntrack holds for
// the pod's address (whether a service address was translated, whether
// any reply came back), every nftables base chain of any table (a drop in
// any of them at a hook drops the packet), rules in the legacy iptables
// tables (which hook in beside the nftables ones), the route the node
// takes for the API server's service from the pod, the bridge's
// addresses and the sysctls the path depends on.
func hostNetDiag(ctx context.Context, ip string) string {
	var b strings.Builder
	run := func(what string, name string, args ...string) string {
		out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
		if err != nil {
			return fmt.Sprintf("%s: %v: %s", what, err, strings.TrimSpace(string(out)))
		}
		return strings.TrimSpace(string(out))
	}
	// The test's own requests to the pod leave one entry each: the last
	// few say enough.
	fmt.Fprintf(&b, "conntrack, connections from %s:\n%s\n", ip, indent(lastLines(run("conntrack -L -s", "conntrack", "-L", "-s", ip), 30)))
	fmt.Fprintf(&b, "conntrack, connections to %s:\n%s\n", ip, indent(lastLines(run("conntrack -L -d", "conntrack", "-L", "-d", ip), 10)))
	fmt.Fprintf(&b, "conntrack, connections to the API server's service:\n%s\n", indent(lastLines(run("conntrack -L -d", "conntrack", "-L", "-d", apiService), 30)))
	fmt.Fprintf(&b, "conntrack: %s entries, insert failures and drops per cpu:\n%s\n",
		readTrim("/proc/sys/net/netfilter/nf_conntrack_count"), indent(run("conntrack -S", "conntrack", "-S")))
	// Base chains only: a table's regular chains matter only through them.
	var hooks []string
	var table, chain string
	for _, line := range strings.Split(run("nft list ruleset", "nft", "list", "ruleset"), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) >= 3 && f[0] == "table":
			table = f[1] + " " + f[2]
		case len(f) >= 2 && f[0] == "chain":
			chain = f[1]
		case strings.Contains(line, " hook "):
			hooks = append(hooks, fmt.Sprintf("  %s %s: %s", table, chain, strings.TrimSpace(line)))
		}
	}
	fmt.Fprintf(&b, "nftables base chains:\n%s\n", strings.Join(hooks, "\n"))
	var legacy []string
	for _, line := range strings.Split(run("iptables-legacy-save", "iptables-legacy-save", "-c"), "\n") {
		if strings.Contains(line, "-A ") || strings.HasPrefix(line, "*") || (strings.HasPrefix(line, ":") && !strings.Contains(line, "ACCEPT")) {
			legacy = append(legacy, "  "+line)
		}
	}
	fmt.Fprintf(&b, "legacy iptables (tables, rules and chains whose policy is not ACCEPT):\n%s\n", strings.Join(legacy, "\n"))
	fmt.Fprintf(&b, "route from %s on %s to the API server's service: %s\n", ip, bridgeName,
		run("ip route get", "ip", "route", "get", apiService, "from", ip, "iif", bridgeName))
	fmt.Fprintf(&b, "addresses: %s\n", strings.ReplaceAll(run("ip -br addr", "ip", "-br", "-4", "addr"), "\n", "; "))
	var sysctls []string
	for _, name := range []string{"net/ipv4/ip_forward", "net/bridge/bridge-nf-call-iptables", "net/ipv4/conf/all/rp_filter", "net/ipv4/conf/" + bridgeName + "/rp_filter"} {
		sysctls = append(sysctls, name+"="+readTrim("/proc/sys/"+name))
	}
	fmt.Fprintf(&b, "sysctls: %s\n", strings.Join(sysctls, " "))
	return b.String()
}

func readTrim(path string) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	return strings.TrimSpace(string(data))
}

// lastLines keeps the last n lines of s, saying how many it left out.
func lastLines(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) <= n {
		return s
	}
	return fmt.Sprintf("(%d more before)\n%s", len(lines)-n, strings.Join(lines[len(lines)-n:], "\n"))
}

func indent(s string) string {
	if s == "" {
		return "  (none)"
	}
	return "  " + strings.ReplaceAll(s, "\n", "\n  ")
}
