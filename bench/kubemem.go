package bench

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
)

func apiNotFound(err error) bool { return apierrors.IsNotFound(err) }

// quantity parses a Kubernetes quantity: bytes, or millicores when milli.
// An empty or unparsable one is 0.
func quantity(s string, milli bool) int64 {
	if s == "" {
		return 0
	}
	q, err := resource.ParseQuantity(s)
	if err != nil {
		return 0
	}
	if milli {
		return q.MilliValue()
	}
	return q.Value()
}

// cgroupMemoryRoots are where a node's memory controller is mounted:
// cgroup v1's memory hierarchy, else the unified (v2) one.
var cgroupMemoryRoots = []string{"/sys/fs/cgroup/memory", "/sys/fs/cgroup"}

// PodMemory reads the memory a pod holds on this node from its pod cgroup,
// as the kubelet counts a working set: usage less inactive file pages. The
// pod's cgroup is the directory the kubelet named after its uid
// (pod<uid> with the cgroupfs driver, ...-pod<uid_>.slice with systemd),
// found within a few levels of the memory controller's root.
func PodMemory(uid string) (int64, error) {
	names := map[string]bool{"pod" + uid: true}
	under := strings.ReplaceAll(uid, "-", "_")
	for _, root := range cgroupMemoryRoots {
		var dir string
		filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil || !d.IsDir() {
				return nil // a file, or a cgroup gone while walking
			}
			if strings.Count(strings.TrimPrefix(p, root), "/") > 5 {
				return fs.SkipDir
			}
			n := d.Name()
			if names[n] || (strings.HasSuffix(n, "pod"+under+".slice")) {
				dir = p
				return fs.SkipAll
			}
			return nil
		})
		if dir == "" {
			continue
		}
		return workingSet(dir)
	}
	return 0, fmt.Errorf("no cgroup of pod %s on this node (the bench reads pod memory on the node it runs on)", uid)
}

func workingSet(dir string) (int64, error) {
	usageFile, inactiveKey := "memory.usage_in_bytes", "total_inactive_file"
	if _, err := os.Stat(filepath.Join(dir, usageFile)); err != nil {
		usageFile, inactiveKey = "memory.current", "inactive_file" // cgroup v2
	}
	b, err := os.ReadFile(filepath.Join(dir, usageFile))
	if err != nil {
		return 0, err
	}
	usage, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", usageFile, err)
	}
	stat, err := os.ReadFile(filepath.Join(dir, "memory.stat"))
	if err != nil {
		return 0, err
	}
	sc := bufio.NewScanner(bytes.NewReader(stat))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), " ")
		if ok && k == inactiveKey {
			n, _ := strconv.ParseInt(v, 10, 64)
			if n < usage {
				usage -= n
			}
			return usage, nil
		}
	}
	return 0, errors.New(dir + "/memory.stat: no " + inactiveKey)
}
