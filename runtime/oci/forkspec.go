package oci

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/sandlot/sandlot/errdefs"
)

// A fork with memory restores the source's checkpoint into a sandbox of
// its own, which gVisor refuses (its id mappings differ) unless told to
// only log every difference it finds between the two specs
// (--restore-spec-validation=warning, one switch for all its checks). So
// sandlot compares them itself first: the fork's spec may differ from the
// source's only in what names the sandbox on the host (its host id range,
// its root's and its mounts' host paths, its cgroup, its labels) and in
// its hostname; anything else (the process, capabilities, seccomp, limits,
// mounts' places, types and options, namespaces, masked paths) refuses
// the fork, which then carries files only.

// sameForkSpec reports, as a failed_precondition naming the first field
// that differs, whether fork may restore a checkpoint of src.
func sameForkSpec(src, fork *specs.Spec) error {
	a, err := forkComparable(src)
	if err != nil {
		return err
	}
	b, err := forkComparable(fork)
	if err != nil {
		return err
	}
	if f := firstDiff("", a, b); f != "" {
		return errdefs.Sentence(errdefs.ErrFailedPrecondition, "the fork's sandbox differs from the source's in %s: its memory cannot be restored there", f)
	}
	return nil
}

// forkComparable is sp as generic JSON with the fields a fork may change
// removed.
func forkComparable(sp *specs.Spec) (map[string]any, error) {
	if sp == nil {
		return nil, fmt.Errorf("no spec: %w", errdefs.ErrFailedPrecondition)
	}
	b, err := json.Marshal(sp)
	if err != nil {
		return nil, err
	}
	// Numbers stay json.Numbers: as float64s, limits past 2^53 that differ
	// would compare equal.
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var m map[string]any
	if err := d.Decode(&m); err != nil {
		return nil, err
	}
	delete(m, "hostname")
	if root, ok := m["root"].(map[string]any); ok {
		delete(root, "path")
	}
	if mounts, ok := m["mounts"].([]any); ok {
		for _, mt := range mounts {
			if mt, ok := mt.(map[string]any); ok {
				delete(mt, "source")
			}
		}
	}
	if linux, ok := m["linux"].(map[string]any); ok {
		delete(linux, "uidMappings")
		delete(linux, "gidMappings")
		delete(linux, "cgroupsPath")
	}
	if anno, ok := m["annotations"].(map[string]any); ok {
		for k := range anno {
			if strings.HasPrefix(k, labelPrefix) {
				delete(anno, k)
			}
		}
	}
	return m, nil
}

// firstDiff is the path of the first place a and b differ, "" if none.
func firstDiff(at string, a, b any) string {
	switch av := a.(type) {
	case map[string]any:
		bv, ok := b.(map[string]any)
		if !ok {
			return orRoot(at)
		}
		keys := map[string]bool{}
		for k := range av {
			keys[k] = true
		}
		for k := range bv {
			keys[k] = true
		}
		names := make([]string, 0, len(keys))
		for k := range keys {
			names = append(names, k)
		}
		sort.Strings(names)
		for _, k := range names {
			if d := firstDiff(join(at, k), av[k], bv[k]); d != "" {
				return d
			}
		}
		return ""
	case []any:
		bv, ok := b.([]any)
		if !ok || len(av) != len(bv) {
			return orRoot(at)
		}
		for i := range av {
			if d := firstDiff(fmt.Sprintf("%s[%d]", at, i), av[i], bv[i]); d != "" {
				return d
			}
		}
		return ""
	}
	if !reflect.DeepEqual(a, b) {
		return orRoot(at)
	}
	return ""
}

func join(at, k string) string {
	if at == "" {
		return k
	}
	return at + "." + k
}

func orRoot(at string) string {
	if at == "" {
		return "the spec"
	}
	return at
}
