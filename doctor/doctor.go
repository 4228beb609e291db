// Package doctor checks whether a host can run sandlot and says, in plain
// words, what is missing and how to fix it (sandlot doctor). Each check is
// a function of a Config that reads the host under Config.Root and finds
// programs in Config.Path, so tests run them against a fake root and PATH;
// the few checks that must act to know (a real unshare, a netlink query)
// go through Probes, which tests replace.
//
// A check is required when sandlot cannot serve without it; a required
// check that fails makes the report fail (sandlot doctor exits 1). Warnings
// name what works less well or what a feature that is off would need, and
// never fail the report.
package doctor

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sandlot/sandlot/guard"
	"github.com/sandlot/sandlot/guard/ner"
	"github.com/sandlot/sandlot/runtime/oci"
)

// Status is a check's outcome.
type Status string

const (
	OK   Status = "ok"
	Warn Status = "warn"
	Fail Status = "fail"
)

// Result is one check's outcome: Detail says what was found, Fix what to
// do when Status is not OK.
type Result struct {
	Name     string `json:"name"`
	Status   Status `json:"status"`
	Required bool   `json:"required"`
	Detail   string `json:"detail"`
	Fix      string `json:"fix,omitempty"`
}

// Report is every check's result, in the order they ran.
type Report struct {
	// OK is false when a required check failed.
	OK     bool     `json:"ok"`
	Checks []Result `json:"checks"`
}

// Config says which host and which daemon settings to check. The zero
// value checks this host for serve's defaults, with the data dir ".sandlot".
type Config struct {
	// Root is where /proc and /sys are read ("" or "/": this host).
	Root string
	// Path is the PATH searched for the OCI runtimes and mmdebstrap ("":
	// $PATH).
	Path string
	// Runtime is serve's --runtime: auto (crun or runc must work), or the
	// one that must.
	Runtime string
	// DataDir is serve's --data-dir, StoreURL its --store ("": SQLite in
	// DataDir), ImagesDir its --images-dir ("": DataDir/images).
	DataDir, StoreURL, ImagesDir string
	// StateDir is serve's --state-dir ("": oci.DefaultStateDir): the
	// sandboxes it holds own their cgroups.
	StateDir string
	// MoreStateDirs are the state dirs of the host's other daemons: their
	// sandboxes own their cgroups too.
	MoreStateDirs []string
	// DefaultImage is serve's --default-image (debian or none).
	DefaultImage string
	// Network is serve's --network: nftables is then required.
	Network bool
	// MinFreeBytes is the free space the data dir needs (0: 1 GiB); under
	// four times that is a warning.
	MinFreeBytes int64
	// Probes are the checks that act; nil fields are the real ones.
	Probes Probes

	now func() time.Time // nil: time.Now
	// only, when set, narrows the sandbox cgroups judged to the names it
	// accepts: a test on the real host touches its own alone.
	only func(name string) bool
}

// Probes are the checks that must do something to know. Tests replace
// them; each returns nil when the host can.
type Probes struct {
	// Userns makes a user namespace (with mount, PID, IPC and UTS
	// namespaces) and runs a program in it.
	Userns func(ctx context.Context) error
	// Nftables lists the nftables tables of this network namespace.
	Nftables func(ctx context.Context) error
	// Version runs bin --version and returns its first line.
	Version func(ctx context.Context, bin string) (string, error)
	// EntityModel loads the guard's entity model (guard/ner) and says
	// what it is and what it takes.
	EntityModel func() (guard.ModelInfo, error)
}

// Check is one named check.
type Check struct {
	Name string
	Run  func(ctx context.Context, cfg Config) []Result
}

// Checks are the checks Run runs, in order.
var Checks = []Check{
	{"kernel", checkKernel},
	{"user namespaces", checkUserns},
	{"cgroups", checkCgroups},
	{"overlayfs", checkOverlay},
	{"seccomp", checkSeccomp},
	{"nftables", checkNftables},
	{"runtimes", checkRuntimes},
	{"disk", checkDisk},
	{"store", checkStore},
	{"default template", checkTemplate},
	{"guard entity model", checkEntityModel},
	{"volumes", checkVolumes},
	{"sandbox cgroups", checkCgroupLeftovers},
}

// Run runs every check on cfg.
func Run(ctx context.Context, cfg Config) Report {
	cfg = cfg.withDefaults()
	r := Report{OK: true}
	for _, c := range Checks {
		for _, res := range c.Run(ctx, cfg) {
			if res.Status == Fail && res.Required {
				r.OK = false
			}
			r.Checks = append(r.Checks, res)
		}
	}
	return r
}

func (cfg Config) withDefaults() Config {
	if cfg.Root == "" {
		cfg.Root = "/"
	}
	if cfg.Path == "" {
		cfg.Path = os.Getenv("PATH")
	}
	if cfg.Runtime == "" {
		cfg.Runtime = "auto"
	}
	if cfg.DataDir == "" {
		cfg.DataDir = ".sandlot"
	}
	if cfg.ImagesDir == "" {
		cfg.ImagesDir = filepath.Join(cfg.DataDir, "images")
	}
	if cfg.StateDir == "" {
		cfg.StateDir = oci.DefaultStateDir
	}
	if cfg.DefaultImage == "" {
		cfg.DefaultImage = "debian"
	}
	if cfg.MinFreeBytes <= 0 {
		cfg.MinFreeBytes = 1 << 30
	}
	if cfg.now == nil {
		cfg.now = time.Now
	}
	if cfg.Probes.Userns == nil {
		cfg.Probes.Userns = probeUserns
	}
	if cfg.Probes.Nftables == nil {
		cfg.Probes.Nftables = probeNftables
	}
	if cfg.Probes.EntityModel == nil {
		cfg.Probes.EntityModel = probeEntityModel
	}
	if cfg.Probes.Version == nil {
		cfg.Probes.Version = probeVersion
	}
	return cfg
}

// host is p (absolute, as on the host) under cfg.Root.
func (cfg Config) host(p string) string { return filepath.Join(cfg.Root, p) }

// readHost reads a small file of the host, trimmed.
func (cfg Config) readHost(p string) (string, error) {
	b, err := os.ReadFile(cfg.host(p))
	return strings.TrimSpace(string(b)), err
}

// lookPath finds name in cfg.Path (exec.LookPath reads the process's
// PATH, which a test must not change).
func (cfg Config) lookPath(name string) (string, bool) {
	for _, dir := range filepath.SplitList(cfg.Path) {
		if dir == "" {
			continue
		}
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0 {
			return p, true
		}
	}
	return "", false
}

// WriteText prints r as a table, each problem followed by its fix, and a
// last line that says whether sandlot can run.
func (r Report) WriteText(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, c := range r.Checks {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", c.Status, c.Name, c.Detail)
		if c.Fix != "" && c.Status != OK {
			fmt.Fprintf(tw, "\t\tfix: %s\n", c.Fix)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	var fails, warns int
	for _, c := range r.Checks {
		switch {
		case c.Status == Fail && c.Required:
			fails++
		case c.Status != OK:
			warns++
		}
	}
	var err error
	if r.OK {
		_, err = fmt.Fprintf(w, "\nsandlot can run on this host (%s).\n", count(warns, "warning"))
	} else {
		_, err = fmt.Fprintf(w, "\nsandlot cannot run on this host: %s failed, %s.\n", count(fails, "required check"), count(warns, "warning"))
	}
	return err
}

func count(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// checkEntityModel loads the egress guard's entity model, as serve does:
// without it the guard still finds patterns, addresses, dates of birth and
// the names its rules see, so a failure is a warning.
func checkEntityModel(_ context.Context, cfg Config) []Result {
	r := Result{Name: "guard entity model", Status: OK}
	info, err := cfg.Probes.EntityModel()
	if err != nil {
		r.Status = Warn
		r.Detail = "did not load: " + err.Error() + "; the guard runs its patterns and entity rules alone"
		r.Fix = "the model is compiled into sandlot: reinstall the binary"
		return []Result{r}
	}
	r.Detail = fmt.Sprintf("%s, %.0f MB of heap, loaded in %.1f s", info.Name, float64(info.Bytes)/1e6, info.LoadTime.Seconds())
	return []Result{r}
}

func probeEntityModel() (guard.ModelInfo, error) {
	m, err := ner.Load()
	if err != nil {
		return guard.ModelInfo{}, err
	}
	return m.Info(), nil
}
