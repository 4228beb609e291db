package oci

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/sandlot/sandlot/errdefs"
)

// fakeEtc writes passwd, group and subuid files into a temp dir.
func fakeEtc(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestHostIDSpans(t *testing.T) {
	etc := fakeEtc(t, map[string]string{
		"passwd": "root:x:0:0::/root:/bin/sh\n# comment\nuser:x:1000:1001::/home/u:/bin/sh\nbad line\n",
		"group":  "root:x:0:\nstaff:x:50:\n",
		"subuid": "user:100000:65536\nbroken:1\n",
		// no subgid: a missing file is fine
	})
	got, err := hostIDSpans(etc)
	if err != nil {
		t.Fatal(err)
	}
	want := [][2]uint64{{0, 1}, {0, 1}, {1000, 1}, {1001, 1}, {0, 1}, {50, 1}, {100000, 65536}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("spans (-want +got):\n%s", diff)
	}
}

func TestIDAllocator(t *testing.T) {
	const base = 1 << 20
	// Range 1 holds a host account, a subuid range covers the last id of
	// range 1 and the first of range 2, and range 4 holds a group.
	etc := fakeEtc(t, map[string]string{
		"passwd": fmt.Sprintf("root:x:0:0::/:/bin/sh\nsomeone:x:%d:0::/:/bin/sh\n", base+IDRangeSize+5),
		"group":  fmt.Sprintf("g:x:%d:\n", base+4*IDRangeSize),
		"subuid": fmt.Sprintf("someone:%d:2\n", base+2*IDRangeSize-1),
	})
	state := t.TempDir()
	host := hostIDDir(t)
	a, err := newIDAllocatorEtc(state, host, etc, base, 6)
	if err != nil {
		t.Fatal(err)
	}
	var got []uint32
	for i := range 3 {
		r, err := a.alloc("sb-" + strconv.Itoa(i))
		if err != nil {
			t.Fatal(err)
		}
		if r.Size != IDRangeSize || r.Host(1000) != r.Base+1000 || !r.Contains(r.Base+IDRangeSize-1) || r.Contains(r.Base+IDRangeSize) {
			t.Errorf("range %+v", r)
		}
		got = append(got, (r.Base-base)/IDRangeSize)
	}
	if diff := cmp.Diff([]uint32{0, 3, 5}, got); diff != "" {
		t.Errorf("ranges handed out (-want +got):\n%s", diff)
	}
	if _, err := a.alloc("sb-x"); !errors.Is(err, errdefs.ErrResourceExhausted) {
		t.Errorf("alloc with every free range taken: %v, want resource_exhausted", err)
	}

	r3 := IDRange{Base: base + 3*IDRangeSize, Size: IDRangeSize}
	if err := a.free("sb-0", r3); err != nil { // not sb-0's: left alone
		t.Fatal(err)
	}
	if _, err := a.alloc("sb-x"); err == nil {
		t.Error("a range freed by someone who did not hold it was handed out again")
	}
	if err := a.free("sb-1", r3); err != nil {
		t.Fatal(err)
	}
	if r, err := a.alloc("sb-3"); err != nil || r != r3 {
		t.Errorf("alloc after free = %+v, %v; want %+v", r, err, r3)
	}

	// A fresh process rebuilds the record from the bundles: ranges held by
	// bundles come back even when their files are gone; an old file whose
	// sandbox has no bundle any more is dropped, a young one is kept.
	bundles := map[string]string{}
	for id, k := range map[string]int{"sb-0": 0, "sb-3": 3} {
		bundles[id] = writeConfig(t, state, id, base+uint32(k)*IDRangeSize)
	}
	name := func(k int) string { return filepath.Join(host, strconv.Itoa(base+k*IDRangeSize)) }
	os.Remove(name(0))
	old := time.Now().Add(-time.Hour)
	os.Chtimes(name(5), old, old) // sb-2: deleted, file left by a crash
	writeRecord(t, name(1), state, "sb-young")
	a2, err := newIDAllocatorEtc(state, host, etc, base, 6)
	if err != nil {
		t.Fatal(err)
	}
	if c, err := a2.rebuild(bundles); err != nil || len(c) > 0 {
		t.Fatalf("rebuild: conflicts %v, %v", c, err)
	}
	want := map[int]idRecord{0: {state, "sb-0"}, 1: {state, "sb-young"}, 3: {state, "sb-3"}}
	if diff := cmp.Diff(want, records(t, host, base)); diff != "" {
		t.Errorf("after rebuild (-want +got):\n%s", diff)
	}
}

// hostIDDir is a host-wide allocation dir of the test's own (the real one
// is in the share).
func hostIDDir(t *testing.T) string {
	t.Helper()
	return filepath.Join(t.TempDir(), "ids")
}

// writeRecord writes an allocation file by hand.
func writeRecord(t *testing.T, path, state, owner string) {
	t.Helper()
	b, _ := json.Marshal(idRecord{State: state, Owner: owner})
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// records reads the allocation files of host dir by range index from base.
func records(t *testing.T, host string, base int) map[int]idRecord {
	t.Helper()
	out := map[int]idRecord{}
	ents, err := os.ReadDir(host)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		rec, _ := readIDRecord(filepath.Join(host, e.Name()))
		out[(n-base)/IDRangeSize] = rec
	}
	return out
}

// TestIDAllocatorConcurrent: two allocators (two processes) on one state
// dir, and one on another, never hand out a range twice.
func TestIDAllocatorConcurrent(t *testing.T) {
	etc := fakeEtc(t, map[string]string{})
	state, host := t.TempDir(), hostIDDir(t)
	allocPause = func() { time.Sleep(time.Millisecond) }
	defer func() { allocPause = nil }()
	var mu sync.Mutex
	seen := map[uint32]string{}
	var wg sync.WaitGroup
	for p := range 3 {
		a, err := newIDAllocatorEtc(filepath.Join(state, strconv.Itoa(p/2)), host, etc, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		for i := range 50 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				owner := fmt.Sprintf("p%d-%d", p, i)
				r, err := a.alloc(owner)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				defer mu.Unlock()
				if prev, ok := seen[r.Base]; ok {
					t.Errorf("range %d handed to %s and %s", r.Base, prev, owner)
				}
				seen[r.Base] = owner
			}()
		}
	}
	wg.Wait()
	if len(seen) != 150 {
		t.Errorf("%d ranges handed out, want 150", len(seen))
	}
}

func TestIDAllocatorLimits(t *testing.T) {
	etc := fakeEtc(t, map[string]string{"passwd": fmt.Sprintf("x:x:%d:0::/:/bin/sh\n", DefaultIDBase)})
	if _, err := newIDAllocatorEtc(t.TempDir(), hostIDDir(t), etc, 1<<31, 1<<16); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("ranges past 2^32: %v, want invalid_argument", err)
	}
	if _, err := newIDAllocatorEtc(t.TempDir(), hostIDDir(t), etc, 0, 1); !errors.Is(err, errdefs.ErrFailedPrecondition) {
		t.Errorf("the only range holds a host account: %v, want failed_precondition", err)
	}
}

// writeConfig writes a bundle's config.json with a user namespace
// mapping at base and returns its path.
func writeConfig(t *testing.T, state, id string, base uint32) string {
	t.Helper()
	dir := filepath.Join(state, "bundles", id)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	m := []specs.LinuxIDMapping{{ContainerID: 0, HostID: base, Size: IDRangeSize}}
	b, _ := json.Marshal(specs.Spec{Linux: &specs.Linux{UIDMappings: m, GIDMappings: m}})
	p := filepath.Join(dir, "config.json")
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}
