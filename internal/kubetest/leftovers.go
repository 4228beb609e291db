package kubetest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/vishvananda/netlink"
)

// Leftovers lists what a stopped cluster whose directory was dir still has
// on the host: processes, mounts, cgroups, the bridge, netfilter chains,
// rules, sets and tables, container log links, and the directory. Empty
// means Stop removed everything.
func Leftovers(dir string) []string {
	var out []string
	if pids := clusterPIDs(dir); len(pids) > 0 {
		out = append(out, fmt.Sprintf("processes %v", pids))
	}
	if m := mountsUnder(dir); len(m) > 0 {
		out = append(out, fmt.Sprintf("mounts %v", m))
	}
	for _, ctrl := range cgroupControllers() {
		p := filepath.Join("/sys/fs/cgroup", ctrl, cgroupRoot)
		if _, err := os.Stat(p); err == nil {
			out = append(out, "cgroup "+p)
		}
	}
	if _, err := netlink.LinkByName(bridgeName); err == nil {
		out = append(out, "link "+bridgeName)
	}
	for _, bin := range []string{"iptables-save", "ip6tables-save"} {
		b, err := exec.Command(bin).Output()
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			if (strings.HasPrefix(line, ":") || strings.HasPrefix(line, "-A ")) && containsAny(line, chainPrefixes) {
				out = append(out, bin+": "+line)
			}
		}
	}
	if b, err := exec.Command("ipset", "list", "-n").Output(); err == nil {
		for _, name := range strings.Fields(string(b)) {
			if hasPrefix(name, ipsetPrefixes) {
				out = append(out, "ipset "+name)
			}
		}
	}
	for _, t := range nftTablesLeft() {
		out = append(out, "nft table "+t)
	}
	for _, d := range []string{"/var/log/containers", "/var/log/pods"} {
		ents, _ := os.ReadDir(d)
		for _, e := range ents {
			if dest, err := os.Readlink(filepath.Join(d, e.Name())); err == nil && strings.HasPrefix(dest, dir+"/") {
				out = append(out, "log link "+filepath.Join(d, e.Name()))
			}
		}
	}
	if _, err := os.Stat(dir); err == nil {
		out = append(out, "directory "+dir)
	}
	return out
}

func containsAny(s string, subs []string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}
