package oci

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/sandlot/sandlot/errdefs"
)

// Every sandbox runs in a user namespace of its own that maps ids 0-65535
// inside to a range of host ids no other live sandbox has and no host
// account uses: root inside is an unprivileged stranger outside, two
// sandboxes never share a uid (files, signals, /proc, per-uid kernel limits),
// and an escape lands as nobody the host knows.
const (
	// IDRangeSize is how many ids each sandbox maps (inside: 0-65535, so
	// nobody/nogroup 65534 exist too).
	IDRangeSize = 65536
	// DefaultIDBase is the first host id of the sandbox ranges: 2^20, above
	// the ids distributions hand out to accounts (up to 60000), to
	// systemd's dynamic users (61184-65519) and to the usual /etc/subuid
	// ranges (from 100000, 65536 each, for the first users).
	DefaultIDBase = 1 << 20
	// DefaultIDRanges is how many ranges follow the base: 4096 ranges of
	// 65536 reach 2^28, far below the 32-bit id limit.
	DefaultIDRanges = 4096
)

// IDRange is a sandbox's host id range: id n inside is Base+n outside, for
// uids and gids alike.
type IDRange struct {
	Base uint32
	Size uint32
}

// Host maps an id inside the sandbox to the host.
func (r IDRange) Host(inside uint32) uint32 { return r.Base + inside }

// Contains reports whether host id h is in the range.
func (r IDRange) Contains(h uint32) bool { return h >= r.Base && h-r.Base < r.Size }

// idAllocator hands out id ranges. The allocation is a file per range,
// ids/<n>, naming the sandbox (or probe) that holds it; every change takes
// an exclusive flock on ids/.lock, so processes sharing a state dir (a
// daemon and `sandlot run`) never hand one range out twice. The bundles
// record each sandbox's mapping (config.json), and New rebuilds the files
// from them, so the record survives a crash between the two.
type idAllocator struct {
	dir      string
	base     uint32
	ranges   int
	reserved map[int]bool // ranges that overlap a host account
}

func newIDAllocator(stateDir string, base uint32, ranges int) (*idAllocator, error) {
	return newIDAllocatorEtc(stateDir, "/etc", base, ranges)
}

// newIDAllocatorEtc reads the host's accounts from etc (tests).
func newIDAllocatorEtc(stateDir, etc string, base uint32, ranges int) (*idAllocator, error) {
	if base == 0 {
		base = DefaultIDBase
	}
	if ranges <= 0 {
		ranges = DefaultIDRanges
	}
	if uint64(base)+uint64(ranges)*IDRangeSize > 1<<32-1 {
		return nil, fmt.Errorf("id ranges %d+%d*%d pass the 32-bit id limit: %w", base, ranges, IDRangeSize, errdefs.ErrInvalidArgument)
	}
	a := &idAllocator{dir: filepath.Join(stateDir, "ids"), base: base, ranges: ranges, reserved: map[int]bool{}}
	if err := os.MkdirAll(a.dir, 0o700); err != nil {
		return nil, fmt.Errorf("state dir: %w", err)
	}
	spans, err := hostIDSpans(etc)
	if err != nil {
		return nil, err
	}
	for _, s := range spans {
		a.reserve(s[0], s[1])
	}
	if len(a.reserved) == ranges {
		return nil, fmt.Errorf("every sandbox id range overlaps a host account: %w", errdefs.ErrFailedPrecondition)
	}
	return a, nil
}

// reserve marks the ranges that overlap host ids [lo, lo+n).
func (a *idAllocator) reserve(lo, n uint64) {
	if n == 0 {
		return
	}
	hi := lo + n - 1
	first, last := uint64(a.base), uint64(a.base)+uint64(a.ranges)*IDRangeSize-1
	if hi < first || lo > last {
		return
	}
	lo, hi = max(lo, first), min(hi, last)
	for k := (lo - first) / IDRangeSize; k <= (hi-first)/IDRangeSize; k++ {
		a.reserved[int(k)] = true
	}
}

// hostIDSpans returns every host id in use as [start, count]: the uids and
// gids of passwd and group, and the subordinate ranges of subuid and
// subgid (which belong to users' own rootless containers). Missing files
// are fine. Accounts that come from elsewhere (LDAP, sssd) are not seen:
// choose the base above them.
func hostIDSpans(etc string) ([][2]uint64, error) {
	var spans [][2]uint64
	for _, f := range []struct {
		name  string
		field []int // id fields
		sub   bool  // name:start:count
	}{{"passwd", []int{2, 3}, false}, {"group", []int{2}, false}, {"subuid", nil, true}, {"subgid", nil, true}} {
		file, err := os.Open(filepath.Join(etc, f.name))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("host accounts: %w", err)
		}
		sc := bufio.NewScanner(file)
		for sc.Scan() {
			line := strings.TrimSpace(sc.Text())
			if line == "" || strings.HasPrefix(line, "#") {
				continue
			}
			fs := strings.Split(line, ":")
			if f.sub {
				if len(fs) != 3 {
					continue
				}
				start, err1 := strconv.ParseUint(fs[1], 10, 32)
				count, err2 := strconv.ParseUint(fs[2], 10, 32)
				if err1 == nil && err2 == nil {
					spans = append(spans, [2]uint64{start, count})
				}
				continue
			}
			for _, i := range f.field {
				if i < len(fs) {
					if id, err := strconv.ParseUint(fs[i], 10, 32); err == nil {
						spans = append(spans, [2]uint64{id, 1})
					}
				}
			}
		}
		file.Close()
		if err := sc.Err(); err != nil {
			return nil, fmt.Errorf("host accounts %s: %w", f.name, err)
		}
	}
	return spans, nil
}

func (a *idAllocator) rangeOf(k int) IDRange {
	return IDRange{Base: a.base + uint32(k)*IDRangeSize, Size: IDRangeSize}
}

// slot is the range index of r, or -1 when r is not one of ours.
func (a *idAllocator) slot(r IDRange) int {
	if r.Size != IDRangeSize || r.Base < a.base || (r.Base-a.base)%IDRangeSize != 0 {
		return -1
	}
	k := int((r.Base - a.base) / IDRangeSize)
	if k >= a.ranges {
		return -1
	}
	return k
}

// locked runs fn holding the allocator's lock.
func (a *idAllocator) locked(fn func() error) error {
	return withLock(filepath.Join(a.dir, ".lock"), fn)
}

// allocPause, when set (tests), runs between choosing a range and
// recording it: the window the lock must cover.
var allocPause func()

// alloc gives owner the lowest free range.
func (a *idAllocator) alloc(owner string) (IDRange, error) {
	var got IDRange
	err := a.locked(func() error {
		used := map[int]bool{}
		ents, err := os.ReadDir(a.dir)
		if err != nil {
			return err
		}
		for _, e := range ents {
			if k, err := strconv.Atoi(e.Name()); err == nil {
				used[k] = true
			}
		}
		for k := 0; k < a.ranges; k++ {
			if used[k] || a.reserved[k] {
				continue
			}
			if allocPause != nil {
				allocPause()
			}
			if err := os.WriteFile(filepath.Join(a.dir, strconv.Itoa(k)), []byte(owner), 0o600); err != nil {
				return err
			}
			got = a.rangeOf(k)
			return nil
		}
		return fmt.Errorf("all %d sandbox id ranges are in use: %w", a.ranges, errdefs.ErrResourceExhausted)
	})
	return got, err
}

// free releases owner's range r. A range held by someone else (the record
// was rebuilt in between) is left alone.
func (a *idAllocator) free(owner string, r IDRange) error {
	k := a.slot(r)
	if k < 0 {
		return nil
	}
	return a.locked(func() error {
		p := filepath.Join(a.dir, strconv.Itoa(k))
		b, err := os.ReadFile(p)
		if errors.Is(err, fs.ErrNotExist) || (err == nil && string(b) != owner) {
			return nil
		}
		if err != nil {
			return err
		}
		return os.Remove(p)
	})
}

// rebuild makes the allocation files agree with the bundles: every range a
// bundle maps is held by that bundle's sandbox, and a file whose owner has
// no bundle any more (a crash between removing the bundle and freeing the
// range) is removed. owners maps each bundle's id to its config.json.
// Files younger than a minute are kept: their owner may be a create in
// another process that has not written its bundle yet.
func (a *idAllocator) rebuild(owners map[string]string) error {
	return a.locked(func() error {
		held := map[int]string{}
		for id, cfg := range owners {
			r, err := readIDRange(cfg)
			if err != nil {
				continue // a bundle without a user namespace (older daemon)
			}
			if k := a.slot(r); k >= 0 {
				held[k] = id
			}
		}
		ents, err := os.ReadDir(a.dir)
		if err != nil {
			return err
		}
		for _, e := range ents {
			k, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			p := filepath.Join(a.dir, e.Name())
			if owner, ok := held[k]; ok {
				if b, err := os.ReadFile(p); err != nil || string(b) != owner {
					if err := os.WriteFile(p, []byte(owner), 0o600); err != nil {
						return err
					}
				}
				delete(held, k)
				continue
			}
			if info, err := e.Info(); err == nil && time.Since(info.ModTime()) > time.Minute {
				os.Remove(p)
			}
		}
		for k, owner := range held {
			if err := os.WriteFile(filepath.Join(a.dir, strconv.Itoa(k)), []byte(owner), 0o600); err != nil {
				return err
			}
		}
		return nil
	})
}

// readIDRange reads the uid mapping a bundle's config.json records.
func readIDRange(configPath string) (IDRange, error) {
	b, err := os.ReadFile(configPath)
	if err != nil {
		return IDRange{}, err
	}
	var sp struct {
		Linux struct {
			UIDMappings []specs.LinuxIDMapping `json:"uidMappings"`
		} `json:"linux"`
	}
	if err := json.Unmarshal(b, &sp); err != nil {
		return IDRange{}, err
	}
	m := sp.Linux.UIDMappings
	if len(m) != 1 || m[0].ContainerID != 0 {
		return IDRange{}, fmt.Errorf("%s: no single user namespace mapping", configPath)
	}
	return IDRange{Base: m[0].HostID, Size: m[0].Size}, nil
}
