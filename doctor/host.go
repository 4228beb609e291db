package doctor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/google/nftables"
)

// kernelImages is the first kernel whose overlayfs takes layers by
// descriptor (lowerdir+), which image templates need (docs/images.md);
// kernelHost the first with id-mapped mounts (mount_setattr), below which
// nothing of sandlot's runtime works.
var (
	kernelImages = [2]int{6, 13}
	kernelHost   = [2]int{5, 12}
)

func checkKernel(_ context.Context, cfg Config) []Result {
	r := Result{Name: "kernel", Required: true}
	rel, err := cfg.readHost("/proc/sys/kernel/osrelease")
	if err != nil {
		r.Status, r.Detail, r.Fix = Fail, "cannot read the kernel release: "+err.Error(), "run sandlot doctor on the host that will run sandlot, with /proc mounted"
		return []Result{r}
	}
	v, ok := parseKernel(rel)
	switch {
	case !ok:
		r.Status, r.Detail = Warn, "kernel "+rel+": cannot read its version"
	case less(v, kernelHost):
		r.Status, r.Detail = Fail, fmt.Sprintf("kernel %s: older than %d.%d, which has the id-mapped mounts sandboxes need", rel, kernelHost[0], kernelHost[1])
		r.Fix = fmt.Sprintf("upgrade the kernel to %d.%d or later (Debian 13 ships 6.12 and backports newer)", kernelImages[0], kernelImages[1])
	case less(v, kernelImages):
		r.Status = Fail
		r.Detail = fmt.Sprintf("kernel %s: image templates (the default one included) need %d.%d, for overlayfs layers passed by descriptor", rel, kernelImages[0], kernelImages[1])
		r.Fix = fmt.Sprintf("upgrade the kernel to %d.%d or later, or run with --default-image none --host-template (sandboxes then see the host's /usr)", kernelImages[0], kernelImages[1])
		if cfg.DefaultImage == "none" {
			r.Status, r.Required = Warn, false
		}
	default:
		r.Status, r.Detail = OK, "Linux "+rel
	}
	return []Result{r}
}

// parseKernel reads "6.18.44-fc-v595" as {6, 18}.
func parseKernel(rel string) ([2]int, bool) {
	parts := strings.SplitN(rel, ".", 3)
	if len(parts) < 2 {
		return [2]int{}, false
	}
	maj, err1 := strconv.Atoi(parts[0])
	minor := parts[1]
	if i := strings.IndexFunc(minor, func(r rune) bool { return r < '0' || r > '9' }); i >= 0 {
		minor = minor[:i]
	}
	min, err2 := strconv.Atoi(minor)
	return [2]int{maj, min}, err1 == nil && err2 == nil
}

func less(a, b [2]int) bool { return a[0] < b[0] || a[0] == b[0] && a[1] < b[1] }

func checkUserns(ctx context.Context, cfg Config) []Result {
	r := Result{Name: "user namespaces", Required: true}
	max, err := cfg.readHost("/proc/sys/user/max_user_namespaces")
	if err != nil {
		r.Status, r.Detail, r.Fix = Fail, "no /proc/sys/user/max_user_namespaces: the kernel has no user namespaces", "use a kernel built with CONFIG_USER_NS (every distribution kernel is)"
		return []Result{r}
	}
	if n, _ := strconv.Atoi(max); n == 0 {
		r.Status, r.Detail = Fail, "user.max_user_namespaces is 0: user namespaces are switched off"
		r.Fix = "sysctl -w user.max_user_namespaces=15000, and put it in /etc/sysctl.d/ to keep it"
		return []Result{r}
	}
	if err := cfg.Probes.Userns(ctx); err != nil {
		r.Status, r.Detail = Fail, "user.max_user_namespaces is "+max+", but making one failed: "+err.Error()
		r.Fix = "run sandlot as root; check that no security module (AppArmor's apparmor_restrict_unprivileged_userns, SELinux, a container's seccomp profile) forbids unshare(CLONE_NEWUSER)"
		return []Result{r}
	}
	r.Status, r.Detail = OK, "user.max_user_namespaces is "+max+"; a user namespace with mount, PID, IPC and UTS namespaces was made"
	return []Result{r}
}

// probeUserns runs true in new user, mount, PID, IPC and UTS namespaces,
// as a sandbox's runtime would make them.
func probeUserns(ctx context.Context) error {
	bin := ""
	for _, p := range []string{"/usr/bin/true", "/bin/true"} {
		if _, err := os.Stat(p); err == nil {
			bin = p
			break
		}
	}
	if bin == "" {
		return errors.New("no /usr/bin/true to run in it")
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin)
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS | syscall.CLONE_NEWPID | syscall.CLONE_NEWIPC | syscall.CLONE_NEWUTS,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getuid(), Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getgid(), Size: 1}},
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%w %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}

// neededControllers are the cgroup controllers a sandbox's limits use.
var neededControllers = []string{"memory", "cpu", "pids"}

func checkCgroups(_ context.Context, cfg Config) []Result {
	r := Result{Name: "cgroups", Required: true}
	mounts, err := cfg.readHost("/proc/self/mounts")
	if err != nil {
		r.Status, r.Detail, r.Fix = Fail, "cannot read /proc/self/mounts: "+err.Error(), "mount /proc"
		return []Result{r}
	}
	v1 := map[string]bool{}
	v2 := ""
	for _, line := range strings.Split(mounts, "\n") {
		f := strings.Fields(line)
		if len(f) < 4 {
			continue
		}
		switch f[2] {
		case "cgroup":
			for _, o := range strings.Split(f[3], ",") {
				v1[o] = true
			}
		case "cgroup2":
			v2 = f[1]
		}
	}
	layout := ""
	have := map[string]bool{}
	switch {
	case v2 == "/sys/fs/cgroup":
		layout = "v2 (unified)"
		ctl, err := cfg.readHost("/sys/fs/cgroup/cgroup.controllers")
		if err != nil {
			r.Status, r.Detail, r.Fix = Fail, "cgroup v2 without /sys/fs/cgroup/cgroup.controllers", "mount cgroup2 at /sys/fs/cgroup"
			return []Result{r}
		}
		for _, c := range strings.Fields(ctl) {
			have[c] = true
		}
	case len(v1) > 0 && v2 != "":
		layout = "hybrid (v1 controllers, v2 at " + v2 + ")"
		have = v1
	case len(v1) > 0:
		layout = "v1"
		have = v1
	default:
		r.Status, r.Detail, r.Fix = Fail, "no cgroup file system is mounted", "mount cgroup2 at /sys/fs/cgroup (systemd does at boot)"
		return []Result{r}
	}
	var missing []string
	for _, c := range neededControllers {
		if !have[c] {
			missing = append(missing, c)
		}
	}
	if len(missing) > 0 {
		r.Status = Fail
		r.Detail = fmt.Sprintf("cgroup %s lacks the controllers %s, which sandbox limits use", layout, strings.Join(missing, ", "))
		r.Fix = "enable them: on v2, echo '+" + strings.Join(missing, " +") + "' > /sys/fs/cgroup/cgroup.subtree_control; on v1, mount each hierarchy"
		return []Result{r}
	}
	r.Status, r.Detail = OK, fmt.Sprintf("cgroup %s with %s", layout, strings.Join(neededControllers, ", "))
	return []Result{r}
}

func checkOverlay(_ context.Context, cfg Config) []Result {
	r := Result{Name: "overlayfs", Required: true}
	fss, err := cfg.readHost("/proc/filesystems")
	if err != nil {
		r.Status, r.Detail, r.Fix = Fail, "cannot read /proc/filesystems: "+err.Error(), "mount /proc"
		return []Result{r}
	}
	for _, line := range strings.Split(fss, "\n") {
		f := strings.Fields(line)
		if len(f) > 0 && f[len(f)-1] == "overlay" {
			r.Status, r.Detail = OK, "overlay is in /proc/filesystems"
			return []Result{r}
		}
	}
	r.Status, r.Detail = Fail, "the kernel offers no overlay file system, which image templates are mounted with"
	r.Fix = "modprobe overlay, and add overlay to /etc/modules-load.d/ to keep it"
	return []Result{r}
}

// seccompActions are the filter actions sandlot's profile uses.
var seccompActions = []string{"allow", "errno", "kill_process"}

func checkSeccomp(_ context.Context, cfg Config) []Result {
	r := Result{Name: "seccomp", Required: true}
	acts, err := cfg.readHost("/proc/sys/kernel/seccomp/actions_avail")
	if err != nil {
		r.Status, r.Detail = Fail, "no /proc/sys/kernel/seccomp/actions_avail: the kernel has no seccomp filters; a sandbox without one could make user namespaces of its own"
		r.Fix = "use a kernel built with CONFIG_SECCOMP_FILTER (every distribution kernel is)"
		return []Result{r}
	}
	have := map[string]bool{}
	for _, a := range strings.Fields(acts) {
		have[a] = true
	}
	var missing []string
	for _, a := range seccompActions {
		if !have[a] {
			missing = append(missing, a)
		}
	}
	if len(missing) > 0 {
		r.Status, r.Detail = Fail, "seccomp lacks the actions "+strings.Join(missing, ", ")
		r.Fix = "use a newer kernel built with CONFIG_SECCOMP_FILTER"
		return []Result{r}
	}
	r.Status, r.Detail = OK, "seccomp filters with "+strings.Join(seccompActions, ", ")
	return []Result{r}
}

func checkNftables(ctx context.Context, cfg Config) []Result {
	r := Result{Name: "nftables", Required: cfg.Network}
	if err := cfg.Probes.Nftables(ctx); err != nil {
		r.Status, r.Detail = Warn, "nftables does not answer ("+err.Error()+"); only --network needs it"
		if cfg.Network {
			r.Status, r.Detail = Fail, "nftables does not answer ("+err.Error()+"), and --network needs it to confine sandbox networks"
		}
		r.Fix = "modprobe nf_tables (a kernel with CONFIG_NF_TABLES and CONFIG_NF_TABLES_INET), and run sandlot as root"
		return []Result{r}
	}
	r.Status, r.Detail = OK, "nftables answers over netlink"
	if !cfg.Network {
		r.Detail += " (used with --network)"
	}
	return []Result{r}
}

// probeNftables lists the tables of this network namespace, which reads
// and changes nothing.
func probeNftables(context.Context) error {
	c, err := nftables.New()
	if err != nil {
		return err
	}
	defer c.CloseLasting()
	_, err = c.ListTables()
	return err
}
