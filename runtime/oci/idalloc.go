package oci

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandlot/sandlot/errdefs"
)

// idsDir is the allocation's directory in the share: host ids are one set
// per host, so the record of who holds which is too, whatever state dir a
// daemon (or `sandlot run`, or a test) uses.
const idsDir = "ids"

// idAllocator hands out id ranges. The allocation is host-wide: a file per
// range in one directory (<share>/ids), named by the range's first host id
// and naming the state dir and the sandbox (or probe) that hold it; every
// change takes an exclusive flock on its .lock. Daemons with different
// state dirs, and with different bases, never hand out overlapping ranges.
// The bundles record each sandbox's mapping (config.json), and New rebuilds
// its own state dir's files from them, so the record survives a crash
// between the two and a reboot that empties /run.
type idAllocator struct {
	dir      string // host-wide allocation dir
	state    string // this allocator's state dir (absolute)
	base     uint32
	ranges   int
	reserved map[int]bool // ranges that overlap a host account
}

// idRecord is an allocation file's content.
type idRecord struct {
	State string `json:"state"`
	Owner string `json:"owner"`
}

func newIDAllocator(stateDir, hostDir string, base uint32, ranges int) (*idAllocator, error) {
	return newIDAllocatorEtc(stateDir, hostDir, "/etc", base, ranges)
}

// newIDAllocatorEtc reads the host's accounts from etc (tests).
func newIDAllocatorEtc(stateDir, hostDir, etc string, base uint32, ranges int) (*idAllocator, error) {
	if base == 0 {
		base = DefaultIDBase
	}
	if ranges <= 0 {
		ranges = DefaultIDRanges
	}
	if uint64(base)+uint64(ranges)*IDRangeSize > 1<<32-1 {
		return nil, fmt.Errorf("id ranges %d+%d*%d pass the 32-bit id limit: %w", base, ranges, IDRangeSize, errdefs.ErrInvalidArgument)
	}
	state, err := stateName(stateDir)
	if err != nil {
		return nil, err
	}
	a := &idAllocator{dir: hostDir, state: state, base: base, ranges: ranges, reserved: map[int]bool{}}
	if err := os.Mkdir(hostDir, 0o700); err == nil {
		os.Chmod(hostDir, 0o700) // whatever the umask took
	} else if !errors.Is(err, fs.ErrExist) {
		return nil, fmt.Errorf("id ranges: %w", err)
	}
	if err := checkIDDir(hostDir); err != nil {
		return nil, err
	}
	spans, err := hostIDSpans(etc)
	if err != nil {
		return nil, err
	}
	for _, s := range spans {
		markSlots(a.reserved, a.base, a.ranges, s[0], s[1])
	}
	if len(a.reserved) == ranges {
		return nil, fmt.Errorf("every sandbox id range overlaps a host account: %w", errdefs.ErrFailedPrecondition)
	}
	return a, nil
}

// stateName is how the allocation files name state dir dir: its absolute
// path with symlinks resolved, the same however a daemon was told it.
func stateName(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		return real, nil
	}
	return abs, nil
}

// checkIDDir refuses an allocation dir that is not a directory of ours
// (a symlink, someone else's, open to others): whoever could write there
// could hand two daemons' sandboxes one range.
func checkIDDir(dir string) error {
	fi, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("id ranges: %w", err)
	}
	uid := -1
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		uid = int(st.Uid)
	}
	if !fi.IsDir() || uid != os.Geteuid() || fi.Mode().Perm() != 0o700 {
		return fmt.Errorf("id ranges: %s is %v owned by %d, want a directory of uid %d, mode 0700: %w", dir, fi.Mode(), uid, os.Geteuid(), errdefs.ErrFailedPrecondition)
	}
	return nil
}

// markSlots sets the indexes of the ranges (ranges of IDRangeSize from
// base) that overlap host ids [lo, lo+n).
func markSlots(m map[int]bool, base uint32, ranges int, lo, n uint64) {
	if n == 0 {
		return
	}
	hi := lo + n - 1
	first, last := uint64(base), uint64(base)+uint64(ranges)*IDRangeSize-1
	if hi < first || lo > last {
		return
	}
	lo, hi = max(lo, first), min(hi, last)
	for k := (lo - first) / IDRangeSize; k <= (hi-first)/IDRangeSize; k++ {
		m[int(k)] = true
	}
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

// locked runs fn holding the allocation's lock. The dir is checked again
// each time: it may have been replaced since New.
func (a *idAllocator) locked(fn func() error) error {
	if err := checkIDDir(a.dir); err != nil {
		return err
	}
	f, err := os.OpenFile(filepath.Join(a.dir, ".lock"), os.O_RDWR|os.O_CREATE|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return fmt.Errorf("id ranges: %w", err)
	}
	defer f.Close()
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		return err
	}
	return fn()
}

// idEntry is one allocation file as found.
type idEntry struct {
	name string
	base uint32
	rec  idRecord
	ok   bool // rec was read: a regular file holding a record
	mod  time.Time
}

// entries lists the allocation files; with full, each one's record and
// age too (alloc needs only the names). A name that is a host id counts as
// that range taken whatever the file holds: what cannot be read is never
// handed out.
func (a *idAllocator) entries(full bool) ([]idEntry, error) {
	ents, err := os.ReadDir(a.dir)
	if err != nil {
		return nil, err
	}
	var out []idEntry
	for _, e := range ents {
		b, err := strconv.ParseUint(e.Name(), 10, 32)
		if err != nil {
			continue
		}
		en := idEntry{name: e.Name(), base: uint32(b)}
		if !full {
			out = append(out, en)
			continue
		}
		if info, err := e.Info(); err == nil {
			en.mod = info.ModTime()
		}
		if e.Type().IsRegular() {
			en.rec, en.ok = readIDRecord(filepath.Join(a.dir, e.Name()))
		}
		out = append(out, en)
	}
	return out, nil
}

// readIDRecord reads an allocation file, never through a symlink.
func readIDRecord(p string) (idRecord, bool) {
	f, err := os.OpenFile(p, os.O_RDONLY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return idRecord{}, false
	}
	defer f.Close()
	var rec idRecord
	if err := json.NewDecoder(f).Decode(&rec); err != nil || rec.State == "" {
		return idRecord{}, false
	}
	return rec, true
}

// write creates the allocation file of the range from host id base for
// owner; the name must be free (O_EXCL: nothing planted there is followed
// or overwritten).
func (a *idAllocator) write(base uint32, owner string) error {
	b, err := json.Marshal(idRecord{State: a.state, Owner: owner})
	if err != nil {
		return err
	}
	p := filepath.Join(a.dir, strconv.FormatUint(uint64(base), 10))
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		os.Remove(p)
		return err
	}
	return f.Close()
}

// taken marks every range of ours that an entry for which keep says yes
// overlaps (another daemon's base may not line up with ours).
func (a *idAllocator) taken(ents []idEntry, keep func(idEntry) bool) map[int]bool {
	used := map[int]bool{}
	for _, e := range ents {
		if keep(e) {
			markSlots(used, a.base, a.ranges, uint64(e.base), IDRangeSize)
		}
	}
	return used
}

// allocPause, when set (tests), runs between choosing a range and
// recording it: the window the lock must cover.
var allocPause func()

// alloc gives owner the lowest free range.
func (a *idAllocator) alloc(owner string) (IDRange, error) {
	var got IDRange
	err := a.locked(func() error {
		ents, err := a.entries(false)
		if err != nil {
			return err
		}
		used := a.taken(ents, func(idEntry) bool { return true })
		for k := 0; k < a.ranges; k++ {
			if used[k] || a.reserved[k] {
				continue
			}
			if allocPause != nil {
				allocPause()
			}
			got = a.rangeOf(k)
			if err := a.write(got.Base, owner); err != nil {
				return err
			}
			return nil
		}
		return fmt.Errorf("all %d sandbox id ranges are in use: %w", a.ranges, errdefs.ErrResourceExhausted)
	})
	return got, err
}

// free releases owner's range r. A range held by someone else (another
// state dir, or the record was rebuilt in between) is left alone.
func (a *idAllocator) free(owner string, r IDRange) error {
	if a.slot(r) < 0 {
		return nil
	}
	return a.locked(func() error {
		p := filepath.Join(a.dir, strconv.FormatUint(uint64(r.Base), 10))
		rec, ok := readIDRecord(p)
		if !ok || rec != (idRecord{State: a.state, Owner: owner}) {
			return nil
		}
		return os.Remove(p)
	})
}

// held counts the ranges this state dir holds (leak checks).
func (a *idAllocator) held() (int, error) {
	n := 0
	err := a.locked(func() error {
		ents, err := a.entries(true)
		for _, e := range ents {
			if e.ok && e.rec.State == a.state {
				n++
			}
		}
		return err
	})
	return n, err
}

// staleAfter is how old an unbacked allocation file must be before a
// rebuild drops it: a younger one may be a create in another process that
// has not written its bundle yet.
const staleAfter = time.Minute

// rebuild makes this state dir's allocation files agree with its bundles:
// every range a bundle maps is held by that bundle's sandbox (whatever the
// base configured now), and a file of this state dir whose owner has no
// bundle any more (a crash between removing the bundle and freeing the
// range) is removed. Files of other state dirs are left alone, except those
// of a state dir that no longer exists (removed without Purge): no sandbox
// of it can be left. owners maps each bundle's id to its config.json. It
// returns the ranges (by sandbox) a bundle maps that something else holds (another
// state dir's file, from two daemons of a version that allocated per state
// dir, or a file that holds no record): those are neither taken over nor
// freed.
func (a *idAllocator) rebuild(owners map[string]string) (conflicts map[string]IDRange, err error) {
	conflicts = map[string]IDRange{}
	err = a.locked(func() error {
		held := map[uint32]string{}
		for id, cfg := range owners {
			if r, err := readIDRange(cfg); err == nil && r.Size == IDRangeSize {
				held[r.Base] = id
			} // else a bundle without a user namespace (older daemon)
		}
		ents, err := a.entries(true)
		if err != nil {
			return err
		}
		var others []uint32
		for _, e := range ents {
			if e.ok && e.rec.State == a.state {
				continue
			}
			if e.ok && time.Since(e.mod) > staleAfter {
				if _, err := os.Lstat(e.rec.State); errors.Is(err, fs.ErrNotExist) {
					os.Remove(filepath.Join(a.dir, e.name))
					continue
				}
			}
			others = append(others, e.base)
		}
		for _, e := range ents {
			if !e.ok || e.rec.State != a.state {
				continue
			}
			if owner, ok := held[e.base]; ok {
				if e.rec.Owner != owner {
					os.Remove(filepath.Join(a.dir, e.name))
					if err := a.write(e.base, owner); err != nil {
						return err
					}
				}
				delete(held, e.base)
				continue
			}
			if time.Since(e.mod) > staleAfter {
				os.Remove(filepath.Join(a.dir, e.name))
			}
		}
		for base, owner := range held {
			if slices.ContainsFunc(others, func(o uint32) bool {
				return uint64(o) < uint64(base)+IDRangeSize && uint64(base) < uint64(o)+IDRangeSize
			}) {
				conflicts[owner] = IDRange{Base: base, Size: IDRangeSize}
				continue
			}
			if err := a.write(base, owner); err != nil {
				return err
			}
		}
		return nil
	})
	return conflicts, err
}

// freeState removes every allocation file of state dir state (Purge).
func freeState(hostDir, state string) error {
	if _, err := os.Lstat(hostDir); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	a := &idAllocator{dir: hostDir, state: state}
	return a.locked(func() error {
		ents, err := a.entries(true)
		for _, e := range ents {
			if e.ok && e.rec.State == state {
				os.Remove(filepath.Join(hostDir, e.name))
			}
		}
		return err
	})
}
