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

	specs "github.com/opencontainers/runtime-spec/specs-go"
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
	r, err := idRangeOf(sp.Linux.UIDMappings)
	if err != nil {
		return IDRange{}, fmt.Errorf("%s: %w", configPath, err)
	}
	return r, nil
}

// idRangeOf is the id range of a bundle's uid mappings: one, from 0.
func idRangeOf(m []specs.LinuxIDMapping) (IDRange, error) {
	if len(m) != 1 || m[0].ContainerID != 0 {
		return IDRange{}, errors.New("no single user namespace mapping")
	}
	return IDRange{Base: m[0].HostID, Size: m[0].Size}, nil
}
