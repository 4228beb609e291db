package oci

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/runtime"
)

// errCrash stands for the daemon dying at a step of a stow or an unstow:
// a test hook panics with it, so the step's caller stops there and cleans
// nothing up, as a killed process would not.
var errCrash = errors.New("the daemon dies here")

// crashes runs fn, which must reach the crash a hook makes.
func crashes(t *testing.T, what string, fn func() error) {
	t.Helper()
	crashed := false
	func() {
		defer func() {
			if v := recover(); v == errCrash {
				crashed = true
			} else if v != nil {
				panic(v)
			}
		}()
		if err := fn(); err != nil {
			t.Errorf("%s: %v", what, err)
		}
	}()
	if !crashed {
		t.Fatalf("%s never reached the step to crash at", what)
	}
}

// TestStowCrash: under runsc, the daemon dying at any step of a
// checkpoint's stow of the writable layer, or of a restore's putting it
// back, loses neither the memory nor the files: the next restore finds
// the layer (in memory or whole on disk, never a part of a copy), the
// process counts on with its files as it left them, and no stowed copy
// or part of one is left in the bundle. A part of a copy alone (the host
// restarted in the copy, the mounted layer gone with it) is refused as
// failed_precondition, never restored as if it were the layer.
func TestStowCrash(t *testing.T) {
	r := newRuntime(t, KindRunsc)
	a, _ := imageLayers(t)
	tests := []struct {
		name      string
		step      string // the stow or unstow step to die at
		entry     int    // else the copy's entry to die at
		inRestore bool   // the restore's step, not the checkpoint's
		lost      bool   // the host restarts too: the mounted layer is gone
	}{
		{name: "before the copy", step: "stow: copy"},
		{name: "in the copy", entry: 3},
		{name: "in the copy, then a host restart", entry: 3, lost: true},
		{name: "after the copy", step: "stow: copied"},
		{name: "after the rename", step: "stow: renamed"},
		{name: "between the unmounts", step: "stow: overlay unmounted"},
		{name: "in the copy back", entry: 3, inRestore: true},
		{name: "after the overlay is back", step: "unstow: overlay mounted", inRestore: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			id := runtime.NewID()
			sp := counterSpec(id)
			sp.Args = []string{"/usr/bin/python3", "-c", stowCode}
			sp.Root = &runtime.Root{Layers: a}
			sp.User = &runtime.User{}
			if err := r.Create(ctx, sp); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = r.Delete(context.Background(), id) })
			waitCount(t, r, id, 5, -1)

			arm := func() {
				n := 0
				if tt.step != "" {
					stowStep = func(step string) {
						if step == tt.step {
							panic(errCrash)
						}
					}
					return
				}
				layerEntryStat = func(string) {
					if n++; n == tt.entry {
						panic(errCrash)
					}
				}
			}
			disarm := func() { stowStep, layerEntryStat = nil, nil }
			defer disarm()
			if !tt.inRestore {
				arm()
				crashes(t, "the checkpoint", func() error { return r.Checkpoint(ctx, id, "") })
				disarm()
			} else if err := r.Checkpoint(ctx, id, ""); err != nil {
				t.Fatal(err)
			}
			saved := waitCount(t, r, id, 0, -1)
			if tt.inRestore {
				arm()
				crashes(t, "the restore", func() error { return r.Restore(ctx, id, "") })
				disarm()
			}
			if tt.lost {
				// Only a part of a copy is on disk: the restore is
				// refused, not made without the sandbox's files.
				if err := r.unmountImageRoot(id); err != nil {
					t.Fatal(err)
				}
				err := r.Restore(ctx, id, "")
				if !errors.Is(err, errdefs.ErrFailedPrecondition) {
					t.Errorf("restore with the layer lost: %v, want failed_precondition", err)
				}
				for _, name := range []string{stowedDir, stowedDir + ".part"} {
					if _, err := os.Lstat(filepath.Join(r.bundle(id), name)); !os.IsNotExist(err) {
						t.Errorf("%s stays in the bundle: %v", name, err)
					}
				}
				return
			}
			if err := r.Restore(ctx, id, ""); err != nil {
				t.Fatalf("restore after the crash: %v", err)
			}
			if next := waitCount(t, r, id, saved, -1); next <= saved {
				t.Fatalf("counter %d after the restore, want above %d", next, saved)
			}
			for _, name := range []string{stowedDir, stowedDir + ".part"} {
				if _, err := os.Lstat(filepath.Join(r.bundle(id), name)); !os.IsNotExist(err) {
					t.Errorf("%s stays in the bundle after the restore: %v", name, err)
				}
			}
			if !isMountPoint(r.rootDir(id)) || !isMountPoint(filepath.Join(r.rootDir(id), "root")) {
				t.Error("the restored sandbox's root is not mounted")
			}
		})
	}
}
