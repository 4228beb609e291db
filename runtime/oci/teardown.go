package oci

// Removing a sandbox: whatever state its runtime left, including a create
// cancelled halfway through the runtime's run.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"

	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/runtime/oci/teardown"
)

// deleteBundle removes sandbox id: its processes, cgroups, runtime state,
// channel, image root and bundle, then frees its id range.
//
// crun and runc are not run for it: their `delete --force` is SIGKILL to
// the init, removal of the cgroups and of their state directory, which the
// daemon does itself here, without an exec (about 2 ms of the daemon's CPU
// and 4 ms of crun's per delete, 13 ms of runc's; BenchmarkDelete). Every
// process left in the sandbox's cgroups is killed, not only the init, and
// a state the runtime's run did not finish writing (a create cancelled
// inside `crun run`, whose init may already run) needs no runtime to load
// it. runsc keeps its own delete: its sandbox is the sentry and the gofer,
// and its state is its own.
func (r *Runtime) deleteBundle(ctx context.Context, d driver, id, dir string) error {
	cgs := teardown.CgroupDirs(id)
	teardown.Thaw(cgs) // a paused sandbox's tasks die only once thawed
	if d.kind == KindRunsc {
		if _, err := d.output(ctx, "delete", "--force", id); err != nil && !errors.Is(err, errdefs.ErrNotFound) {
			return err
		}
	}
	if err := teardown.RemoveCgroups(ctx, id, cgs); err != nil {
		return err
	}
	if d.kind != KindRunsc {
		// crun's and runc's directory for the container under --root.
		if err := removeRuntimeDir(filepath.Join(r.stateDir, d.kind, id)); err != nil {
			return fmt.Errorf("remove %s state: %w", d.kind, err)
		}
	}
	// Every process of the sandbox is gone (its cgroups could be removed):
	// its id range and channel can go too.
	if err := r.unmountChannel(id); err != nil {
		return err
	}
	cfg, cfgErr := readTeardownConfig(filepath.Join(dir, "config.json"))
	if cfgErr == nil {
		r.removeShareFiles(cfg.Mounts)
	}
	if err := r.unmountImageRoot(id); err != nil {
		return err
	}
	if err := r.removeNull(id); err != nil {
		return err
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("remove bundle: %w", err)
	}
	r.info.Delete(id)
	r.dropReady(id)
	if cfgErr == nil {
		if ids, err := idRangeOf(cfg.Linux.UIDMappings); err == nil {
			if err := r.ids.free(id, ids); err != nil {
				return fmt.Errorf("free id range: %w", err)
			}
		}
	}
	return nil
}

// removeRuntimeDir removes a container's directory under the runtime's
// --root. runc mounts a read-only copy of its binary there while it runs
// (runc.XXXXXX, its guard against a container overwriting the binary) and
// unmounts it before it exits; a runc killed mid-run (a cancelled create)
// leaves the mount, which is detached here first.
func removeRuntimeDir(dir string) error {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	for _, e := range ents {
		if p := filepath.Join(dir, e.Name()); isMountPoint(p) {
			if err := unix.Unmount(p, unix.MNT_DETACH|unix.UMOUNT_NOFOLLOW); err != nil && !errors.Is(err, unix.EINVAL) {
				return fmt.Errorf("unmount %s: %w", p, err)
			}
		}
	}
	return os.RemoveAll(dir)
}

// teardownConfig is what a delete reads of a bundle's config.json, in one
// parse: the mounts (share files to remove) and the id mapping (the range
// to free).
type teardownConfig struct {
	Mounts []specs.Mount `json:"mounts"`
	Linux  struct {
		UIDMappings []specs.LinuxIDMapping `json:"uidMappings"`
	} `json:"linux"`
}

func readTeardownConfig(p string) (teardownConfig, error) {
	var c teardownConfig
	b, err := os.ReadFile(p)
	if err != nil {
		return c, err
	}
	return c, json.Unmarshal(b, &c)
}
