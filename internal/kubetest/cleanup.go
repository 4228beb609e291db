package kubetest

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Stop removes everything the cluster made: pods first through the kubelet
// (so CNI and containerd undo their own work), then the processes, and
// whatever is still left by force. It releases the machine lock. It is safe
// to call more than once.
func (c *Cluster) Stop() error {
	if c.stopped {
		return nil
	}
	c.stopped = true
	defer unlock(c.lock)
	var errs []error
	for _, name := range []string{"agent-sandbox-controller", "kube-controller-manager", "kube-scheduler"} {
		if p := c.proc(name); p != nil {
			p.stop(10 * time.Second)
		}
	}
	if c.client != nil && c.running("kube-apiserver") && c.running("kubelet") && c.running("containerd") {
		if err := c.drain(); err != nil {
			c.logf("drain: %v (cleaning up by force)", err)
		}
	}
	for _, name := range []string{"kube-router", "kube-proxy", "kubelet"} {
		if p := c.proc(name); p != nil {
			p.stop(10 * time.Second)
		}
	}
	for i := len(c.procs) - 1; i >= 0; i-- {
		c.procs[i].stop(10 * time.Second)
	}
	// What containerd leaves running: shims, and the containers of pods
	// the drain did not reach.
	if c.Dir != "" {
		killTree(c.Dir, c.logf)
	}
	if c.registry != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = c.registry.Shutdown(ctx)
		cancel()
	}
	if c.Dir != "" && os.Getenv("SANDLOT_KUBETEST_KEEP_LOGS") != "" {
		if kept, err := keepLogs(c.path("logs")); err == nil {
			c.logf("the cluster's logs are kept in %s", kept)
		}
	}
	if c.Dir != "" {
		errs = append(errs, cleanHost(c.Dir, c.bins, c.logf)...)
	}
	if err := c.host.restore(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func (c *Cluster) running(name string) bool {
	p := c.proc(name)
	if p == nil {
		return false
	}
	done, _ := p.exited()
	return !done
}

// drain deletes every pod and waits (bounded) until the kubelet has
// stopped them and confirmed, which tears down their networks and mounts.
func (c *Cluster) drain() error {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	nss, err := c.client.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	grace := int64(1)
	for _, ns := range nss.Items {
		err := c.client.CoreV1().Pods(ns.Name).DeleteCollection(ctx,
			metav1.DeleteOptions{GracePeriodSeconds: &grace}, metav1.ListOptions{})
		if err != nil {
			return err
		}
	}
	return waitFor(ctx, c.proc("kubelet"), "pods gone", func() (bool, error) {
		pods, err := c.client.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		return len(pods.Items) == 0, fmt.Errorf("%d pods left", len(pods.Items))
	})
}

// cleanStale removes what earlier clusters under base left behind. The
// caller holds the machine lock, so none of it is in use.
func cleanStale(base string, b *bins, logf func(string, ...any)) error {
	ents, err := os.ReadDir(base)
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	var errs []error
	found := 0
	for _, e := range ents {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), "c-") {
			continue
		}
		found++
		dir := filepath.Join(base, e.Name())
		logf("removing a stale cluster: %s", dir)
		killTree(dir, logf)
		h := loadHostState(dir)
		errs = append(errs, cleanHost(dir, b, logf)...)
		if err := h.restore(); err != nil {
			errs = append(errs, err)
		}
	}
	if found == 0 {
		// No directory, but a cluster could have died before making one.
		killTree("", logf)
		errs = append(errs, cleanHost("", b, logf)...)
	}
	return errors.Join(errs...)
}

// killTree kills every process of a cluster: those under cgroupRoot (the
// containers and gVisor's sandboxes) and those whose command line names dir
// (the components, shims and runtimes), until none is left.
func killTree(dir string, logf func(string, ...any)) {
	deadline := time.Now().Add(20 * time.Second)
	for {
		pids := clusterPIDs(dir)
		if len(pids) == 0 {
			return
		}
		if time.Now().After(deadline) {
			logf("processes that would not die: %v", pids)
			return
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func clusterPIDs(dir string) []int {
	self := os.Getpid()
	seen := map[int]bool{}
	for _, ctrl := range cgroupControllers() {
		_ = filepath.WalkDir(filepath.Join("/sys/fs/cgroup", ctrl, cgroupRoot), func(p string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || d.Name() != "cgroup.procs" {
				return nil
			}
			b, _ := os.ReadFile(p)
			for _, f := range strings.Fields(string(b)) {
				if pid, err := strconv.Atoi(f); err == nil && pid != self {
					seen[pid] = true
				}
			}
			return nil
		})
	}
	if dir != "" {
		procs, _ := os.ReadDir("/proc")
		for _, e := range procs {
			pid, err := strconv.Atoi(e.Name())
			if err != nil || pid == self {
				continue
			}
			b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
			if err == nil && bytes.Contains(b, []byte(dir)) {
				seen[pid] = true
			}
		}
	}
	out := make([]int, 0, len(seen))
	for pid := range seen {
		out = append(out, pid)
	}
	sort.Ints(out)
	return out
}

// cleanHost removes, once the processes are gone, the rest: mounts,
// cgroups, the bridge, netfilter rules and sets, container logs' links,
// shim sockets, and dir itself.
func cleanHost(dir string, b *bins, logf func(string, ...any)) []error {
	var errs []error
	if dir != "" {
		if err := unmountUnder(dir); err != nil {
			errs = append(errs, err)
		}
	}
	if err := removeCgroupRoot(); err != nil {
		errs = append(errs, err)
	}
	if err := deleteBridge(); err != nil {
		errs = append(errs, err)
	}
	// The components' own cleanups first, then a sweep of what they missed.
	// (kube-router v2.1.0's cleanup removes its NetworkPolicy rules, then
	// panics in its service proxy's part, which never ran here: its exit
	// status says nothing, the sweep and Leftovers do.)
	if b != nil {
		for _, args := range [][]string{{b.kubeProxy, "--cleanup"}, {b.kubeRouter, "--cleanup-config"}} {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			if out, err := exec.CommandContext(ctx, args[0], args[1:]...).CombinedOutput(); err != nil && args[0] != b.kubeRouter {
				logf("%s %s: %v: %s", filepath.Base(args[0]), args[1], err, lastLine(out))
			}
			cancel()
		}
	}
	errs = append(errs, sweepNetfilter()...)
	if dir != "" {
		removeLinksInto("/var/log/containers", dir)
		removeLinksInto("/var/log/pods", dir)
	}
	removeDeadSockets("/run/containerd/s")
	removeHostPaths()
	if dir != "" {
		if err := removeDir(dir, 30*time.Second); err != nil {
			errs = append(errs, fmt.Errorf("kubetest: removing %s: %w", dir, err))
		}
	}
	return errs
}

// removeDir removes dir, detaching again whatever is mounted under it
// when a removal fails (a mount that a shim or the kubelet made late, as
// they ended, answers EBUSY), until it is gone or within has passed.
func removeDir(dir string, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		err := os.RemoveAll(dir)
		if err == nil || time.Now().After(deadline) {
			return err
		}
		_ = unmountUnder(dir)
		time.Sleep(100 * time.Millisecond)
	}
}

// unmountUnder detaches every mount at or below dir, deepest first, until
// none is left (containerd's and the kubelet's mounts can be stacked).
func unmountUnder(dir string) error {
	for range 10 {
		mounts := mountsUnder(dir)
		if len(mounts) == 0 {
			return nil
		}
		sort.Slice(mounts, func(i, j int) bool { return len(mounts[i]) > len(mounts[j]) })
		for _, m := range mounts {
			_ = unix.Unmount(m, unix.MNT_DETACH)
		}
	}
	if m := mountsUnder(dir); len(m) > 0 {
		return fmt.Errorf("kubetest: mounts left under %s: %v", dir, m)
	}
	return nil
}

func mountsUnder(dir string) []string {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		mp := unescapeMount(fields[4])
		if mp == dir || strings.HasPrefix(mp, dir+"/") {
			out = append(out, mp)
		}
	}
	return out
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// cgroupControllers lists the v1 hierarchies mounted under /sys/fs/cgroup
// (and "" for a v2 root, where there is one).
func cgroupControllers() []string {
	ents, err := os.ReadDir("/sys/fs/cgroup")
	if err != nil {
		return nil
	}
	out := []string{""}
	for _, e := range ents {
		if e.IsDir() {
			out = append(out, e.Name())
		}
	}
	return out
}

// makeCgroupRoot creates cgroupRoot in every hierarchy for the kubelet,
// cpuset's with its parent's CPUs and memory nodes (v1 starts them empty).
func makeCgroupRoot() error {
	for _, ctrl := range cgroupControllers() {
		base := filepath.Join("/sys/fs/cgroup", ctrl)
		if _, err := os.Stat(filepath.Join(base, "cgroup.procs")); err != nil {
			continue
		}
		dir := filepath.Join(base, cgroupRoot)
		if err := os.Mkdir(dir, 0o755); err != nil && !os.IsExist(err) {
			return fmt.Errorf("kubetest: cgroup %s: %w", dir, err)
		}
		if ctrl == "cpuset" {
			for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
				v, err := os.ReadFile(filepath.Join(base, f))
				if err != nil {
					return err
				}
				if err := os.WriteFile(filepath.Join(dir, f), v, 0o644); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// removeCgroupRoot removes the cgroupRoot subtree in every hierarchy,
// children first. The processes are gone by now.
func removeCgroupRoot() error {
	var left []string
	for _, ctrl := range cgroupControllers() {
		root := filepath.Join("/sys/fs/cgroup", ctrl, cgroupRoot)
		var dirs []string
		_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		sort.Slice(dirs, func(i, j int) bool { return len(dirs[i]) > len(dirs[j]) })
		for _, d := range dirs {
			var err error
			for range 20 {
				if err = syscall.Rmdir(d); err == nil || errors.Is(err, syscall.ENOENT) {
					break
				}
				time.Sleep(100 * time.Millisecond) // a dying process still counted
			}
			if err != nil && !errors.Is(err, syscall.ENOENT) {
				left = append(left, d)
			}
		}
	}
	if len(left) > 0 {
		return fmt.Errorf("kubetest: cgroups left: %v", left)
	}
	return nil
}

// deleteBridge removes the pods' bridge and any veth still attached.
func deleteBridge() error {
	br, err := netlink.LinkByName(bridgeName)
	if err != nil {
		return nil // gone
	}
	links, _ := netlink.LinkList()
	for _, l := range links {
		if l.Attrs().MasterIndex == br.Attrs().Index {
			_ = netlink.LinkDel(l)
		}
	}
	if err := netlink.LinkDel(br); err != nil {
		return fmt.Errorf("kubetest: deleting %s: %w", bridgeName, err)
	}
	return nil
}

// removeLinksInto removes the symlinks in dir (the kubelet's
// /var/log/containers) that point below target.
func removeLinksInto(dir, target string) {
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		p := filepath.Join(dir, e.Name())
		if dest, err := os.Readlink(p); err == nil && strings.HasPrefix(dest, target+"/") {
			_ = os.Remove(p)
		}
	}
}

// removeDeadSockets removes unix sockets nobody listens on: the sockets of
// shims that were killed.
func removeDeadSockets(dir string) {
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		p := filepath.Join(dir, e.Name())
		if e.Type()&os.ModeSocket == 0 {
			continue
		}
		conn, err := net.DialTimeout("unix", p, time.Second)
		if err == nil {
			conn.Close()
			continue
		}
		_ = os.Remove(p)
	}
}

func lastLine(b []byte) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return lines[len(lines)-1]
}

// Clean takes the machine lock (waiting at most wait) and removes whatever
// clusters under base (DefaultBaseDir when empty) left: what `make k8s-down`
// runs when the cluster's process is already gone.
func Clean(ctx context.Context, base string, wait time.Duration) error {
	if base == "" {
		base = DefaultBaseDir
	}
	b, err := findBins()
	if err != nil {
		b = nil // clean what needs no binary
	}
	lock, err := machineLock(ctx, wait, func(string, ...any) {})
	if err != nil {
		return err
	}
	defer unlock(lock)
	return cleanStale(base, b, func(f string, a ...any) { fmt.Fprintf(os.Stderr, "kubetest: "+f+"\n", a...) })
}
