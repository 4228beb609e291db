package kubetest

import (
	"fmt"
	"os/exec"
	"strings"
)

// What the cluster leaves on the host outside its directory, and how a stop
// finds it: processes by the directory in their command line or by the
// cgroup subtree (cgroupRoot), mounts by path, the bridge by name, netfilter
// rules by the chain prefixes the components use (KUBE-: kube-proxy and
// kube-router; CNI-: the bridge and portmap plugins) and ipsets by
// kube-router's prefixes. No other software on a sandlot machine uses these
// names (sandlot's own rules are nftables tables of its own).
var (
	chainPrefixes = []string{"KUBE-", "CNI-"}
	ipsetPrefixes = []string{"KUBE-", "kube-router-"}
	nftTables     = []string{"kube-proxy"}
)

// sweepNetfilter removes iptables chains with the cluster's prefixes, the
// rules elsewhere that jump to them, kube-router's ipsets and kube-proxy's
// nftables tables.
func sweepNetfilter() []error {
	var errs []error
	for _, bin := range []string{"iptables", "ip6tables"} {
		for _, table := range []string{"filter", "nat", "mangle", "raw"} {
			if err := sweepTable(bin, table); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if out, err := exec.Command("ipset", "list", "-n").Output(); err == nil {
		// Sets referencing others first: list:set types go before members.
		for range 3 {
			for _, name := range strings.Fields(string(out)) {
				if hasPrefix(name, ipsetPrefixes) {
					_ = exec.Command("ipset", "destroy", name).Run()
				}
			}
			out, _ = exec.Command("ipset", "list", "-n").Output()
		}
		for _, name := range strings.Fields(string(out)) {
			if hasPrefix(name, ipsetPrefixes) {
				errs = append(errs, fmt.Errorf("kubetest: ipset %s left", name))
			}
		}
	}
	for _, t := range nftTablesLeft() {
		if out, err := exec.Command("nft", "delete", "table", t).CombinedOutput(); err != nil {
			errs = append(errs, fmt.Errorf("kubetest: nft delete table %s: %v: %s", t, err, out))
		}
	}
	return errs
}

func sweepTable(bin, table string) error {
	out, err := exec.Command(bin+"-save", "-t", table).Output()
	if err != nil {
		return nil // table or tool absent
	}
	var chains, rules []string
	for _, line := range strings.Split(string(out), "\n") {
		switch {
		case strings.HasPrefix(line, ":"):
			name := strings.Fields(line[1:])[0]
			if hasPrefix(name, chainPrefixes) {
				chains = append(chains, name)
			}
		case strings.HasPrefix(line, "-A "):
			f := strings.Fields(line)
			if len(f) > 1 && !hasPrefix(f[1], chainPrefixes) && referencesChain(f) {
				rules = append(rules, "-D"+line[2:])
			}
		}
	}
	if len(chains) == 0 && len(rules) == 0 {
		return nil
	}
	var script strings.Builder
	fmt.Fprintf(&script, "*%s\n", table)
	for _, r := range rules {
		script.WriteString(r + "\n")
	}
	for _, ch := range chains {
		fmt.Fprintf(&script, "-F %s\n", ch)
	}
	for _, ch := range chains {
		fmt.Fprintf(&script, "-X %s\n", ch)
	}
	script.WriteString("COMMIT\n")
	cmd := exec.Command(bin+"-restore", "--noflush")
	cmd.Stdin = strings.NewReader(script.String())
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("kubetest: %s-restore -t %s: %v: %s", bin, table, err, out)
	}
	return nil
}

// referencesChain reports whether a rule jumps or goes to a cluster chain.
func referencesChain(fields []string) bool {
	for i, f := range fields {
		if (f == "-j" || f == "-g") && i+1 < len(fields) && hasPrefix(fields[i+1], chainPrefixes) {
			return true
		}
	}
	return false
}

func nftTablesLeft() []string {
	out, err := exec.Command("nft", "list", "tables").Output()
	if err != nil {
		return nil
	}
	var left []string
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line) // "table ip kube-proxy"
		if len(f) == 3 && f[0] == "table" {
			for _, t := range nftTables {
				if f[2] == t {
					left = append(left, f[1]+" "+f[2])
				}
			}
		}
	}
	return left
}

func hasPrefix(s string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}
