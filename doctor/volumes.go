package doctor

import (
	"context"
	"os"
	"strings"
)

// checkVolumes says whether the host can keep volumes (docs/volumes.md):
// mkfs.ext4 to make them, ext4 to mount them, loop devices to back them.
// Not required: without them the daemon runs, and says volumes are off.
func checkVolumes(_ context.Context, cfg Config) []Result {
	r := Result{Name: "volumes"}
	var missing, fixes []string
	// The daemon looks in PATH, then /usr/sbin and /sbin (volumes.NewHost).
	sbin := cfg
	sbin.Path = strings.Join([]string{cfg.Path, cfg.host("/usr/sbin"), cfg.host("/sbin")}, string(os.PathListSeparator))
	if _, ok := sbin.lookPath("mkfs.ext4"); !ok {
		missing, fixes = append(missing, "mkfs.ext4 is not in PATH"), append(fixes, "apt-get install e2fsprogs")
	}
	fss, _ := cfg.readHost("/proc/filesystems")
	ext4 := false
	for _, line := range strings.Split(fss, "\n") {
		if f := strings.Fields(line); len(f) > 0 && f[len(f)-1] == "ext4" {
			ext4 = true
		}
	}
	if !ext4 {
		missing, fixes = append(missing, "the kernel offers no ext4"), append(fixes, "modprobe ext4")
	}
	if _, err := os.Stat(cfg.host("/dev/loop-control")); err != nil {
		missing, fixes = append(missing, "no /dev/loop-control"), append(fixes, "modprobe loop")
	}
	if len(missing) == 0 {
		r.Status, r.Detail = OK, "mkfs.ext4, ext4 and loop devices are there"
		return []Result{r}
	}
	r.Status = Warn
	r.Detail = strings.Join(missing, "; ") + ": volumes are off (sandboxes run without them)"
	r.Fix = strings.Join(fixes, "; ")
	return []Result{r}
}
