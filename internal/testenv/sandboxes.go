package testenv

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sandlot/sandlot/runtime/oci/teardown"
)

// Sandbox is a sandbox a state dir knows (runtime/oci's layout: one
// bundles/<id> dir each, labels as config.json annotations) that still
// holds a process.
type Sandbox struct {
	ID     string
	Labels map[string]string // org.sandlot.label.* annotations, prefix cut
	PIDs   []int
}

func (s Sandbox) String() string {
	keys := make([]string, 0, len(s.Labels))
	for k := range s.Labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var l []string
	for _, k := range keys {
		l = append(l, k+"="+s.Labels[k])
	}
	return fmt.Sprintf("%s [%s] pids %v", s.ID, strings.Join(l, " "), s.PIDs)
}

// LiveSandboxes lists the sandboxes of stateDir whose cgroups (each v1
// controller's sandlot/<id>, or v2's) still hold a process. A state dir
// that does not exist holds none.
func LiveSandboxes(stateDir string) ([]Sandbox, error) {
	ents, err := os.ReadDir(filepath.Join(stateDir, "bundles"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []Sandbox
	for _, e := range ents {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), "sb-") {
			continue
		}
		pids := cgroupPIDs(e.Name())
		if len(pids) == 0 {
			continue
		}
		out = append(out, Sandbox{ID: e.Name(), Labels: bundleLabels(filepath.Join(stateDir, "bundles", e.Name())), PIDs: pids})
	}
	return out, nil
}

// SandboxCgroups returns sandbox id's cgroup dirs that exist
// (runtime/oci/teardown's CgroupDirs).
func SandboxCgroups(id string) []string {
	var dirs []string
	for _, d := range teardown.CgroupDirs(id) {
		if fi, err := os.Stat(d); err == nil && fi.IsDir() {
			dirs = append(dirs, d)
		}
	}
	return dirs
}

// cgroupPIDs is every process in sandbox id's cgroups (and their
// children's), deduplicated.
func cgroupPIDs(id string) []int {
	var pids []int
	for _, d := range SandboxCgroups(id) {
		filepath.WalkDir(d, func(p string, e fs.DirEntry, err error) error {
			if err != nil || e.Name() != "cgroup.procs" {
				return nil
			}
			b, _ := os.ReadFile(p)
			for _, f := range strings.Fields(string(b)) {
				if n, err := strconv.Atoi(f); err == nil && !slices.Contains(pids, n) {
					pids = append(pids, n)
				}
			}
			return nil
		})
	}
	sort.Ints(pids)
	return pids
}

func bundleLabels(dir string) map[string]string {
	b, err := os.ReadFile(filepath.Join(dir, "config.json"))
	if err != nil {
		return nil
	}
	var sp struct {
		Annotations map[string]string `json:"annotations"`
	}
	if json.Unmarshal(b, &sp) != nil {
		return nil
	}
	l := map[string]string{}
	for k, v := range sp.Annotations {
		if s, ok := strings.CutPrefix(k, "org.sandlot.label."); ok {
			l[s] = v
		}
	}
	return l
}

// ShareDir is the runtime's host share (runtime/oci's DefaultShareDir),
// where a sandbox's image root is mounted (roots/<id>) and its null device
// made (null/<id>).
const ShareDir = "/run/sandlot-share"

// KillSandbox ends every process of sandbox id and removes its cgroups
// (thawing a paused one first), and unmounts and removes its image root
// and null device in ShareDir, as runtime/oci's delete does (package
// runtime/oci/teardown), trying for up to timeout. It is for tests that
// clean up after a daemon; the runtime's own state under the daemon's
// state dir goes with that dir (its id ranges are reclaimed once the dir
// is gone).
func KillSandbox(id string, timeout time.Duration) error {
	dirs := teardown.CgroupDirs(id)
	teardown.Thaw(dirs)
	var errs []error
	if err := teardown.RemoveCgroupsWithin(context.Background(), id, dirs, timeout); err != nil {
		errs = append(errs, fmt.Errorf("sandbox %s: %w (processes %v)", id, err, cgroupPIDs(id)))
	}
	if err := teardown.UnmountImageRoot(filepath.Join(ShareDir, "roots", id)); err != nil {
		errs = append(errs, err)
	}
	if err := os.Remove(filepath.Join(ShareDir, "null", id)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// CheckNoSandboxes kills the sandboxes stateDir still runs (KillSandbox),
// so a test leaves none behind, and fails t for each one: what names the
// daemon.
func CheckNoSandboxes(t testing.TB, stateDir, what string) {
	t.Helper()
	checkSandboxes(t, stateDir, what, true)
}

// checkSandboxes is CheckNoSandboxes; unless contextsFail, a context's
// sandbox left (one with a sandlot.context label) is killed and only
// logged, and a warm one (none: a pooled sandbox has no record, and a
// daemon's clean stop destroys its pools) still fails t. A clean stop
// detaches a context's sandbox on purpose (the next start would reattach
// it), but a test daemon's state dir is temporary and nothing would.
func checkSandboxes(t testing.TB, stateDir, what string, contextsFail bool) {
	t.Helper()
	left, err := LiveSandboxes(stateDir)
	if err != nil {
		t.Errorf("%s: list its sandboxes: %v", what, err)
		return
	}
	if len(left) == 0 {
		return
	}
	var lines []string
	warm := 0
	for _, sb := range left {
		if sb.Labels["sandlot.context"] == "" {
			warm++
		}
		lines = append(lines, sb.String())
		if err := KillSandbox(sb.ID, 30*time.Second); err != nil {
			lines = append(lines, "  kill: "+err.Error())
		}
	}
	msg := fmt.Sprintf("%s left %d sandbox(es) running in %s (%d warm; killed now):\n%s", what, len(left), stateDir, warm, strings.Join(lines, "\n"))
	if warm > 0 || contextsFail {
		t.Errorf("%s", msg)
		return
	}
	t.Logf("%s", msg)
}
