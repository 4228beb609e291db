package oci

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/internal/logkey"
	"github.com/sandlot/sandlot/runtime"
	"github.com/sandlot/sandlot/runtime/oci/teardown"
)

// Memory checkpoints (runsc only). gVisor saves a sandbox's whole kernel
// (the sentry: every process, its memory, pipes, its tmpfs mounts) into
// an image directory and starts it again from there; CRIU, which crun and
// runc would use, does not run on this host (docs/state.md). gVisor
// refuses to save a socket bound on the host, which the agent's channel
// is, so the caller first has the agent release it (agent.MethodRelease):
// the agent then retries its bind until Reopen or Restore opens the
// sealed channel directory again.
//
// A checkpoint that stops the sandbox keeps everything of it on the host
// but its processes and cgroups: the bundle (config.json, key, pid), the
// id range, the channel tmpfs, the image root and the null device, which
// Restore needs as they were (gVisor reopens its files by path). Delete
// removes them as for any sandbox.

// Checkpointer is the optional part of runtime.Runtime that keeps a
// sandbox's memory on disk; runtimes without it cannot.
type Checkpointer interface {
	// CanCheckpoint reports whether sandboxes of this runtime can be
	// checkpointed.
	CanCheckpoint() bool
	// Checkpoint saves sandbox id's memory into dir (an empty directory
	// on disk; "": the sandbox's bundle, removed with it); the sandbox
	// stops, and only Restore or Delete apply to it. (ForkCheckpoint,
	// fork.go, leaves it running.)
	Checkpoint(ctx context.Context, id, dir string) error
	// Restore starts stopped sandbox id again from the checkpoint in dir
	// ("": the bundle's, removed once restored), its channel open for the
	// agent to listen again.
	Restore(ctx context.Context, id, dir string) error
}

var _ Checkpointer = (*Runtime)(nil)

// checkpointFlags and restoreFlags are runsc's options for the image
// (docs/state.md, "Numbers": each measured by BenchmarkRestoreOptions).
var (
	checkpointFlags []string
	restoreFlags    []string
)

// CanCheckpoint implements Checkpointer: runsc only, and only where the
// state dir, which holds the checkpoint in the bundle, is not a tmpfs (a
// checkpoint there would keep the sandbox's memory in the host's memory,
// which a suspend exists to free; DefaultStateDir is under /run, a tmpfs on
// most systemd hosts: put --state-dir on a disk there).
func (r *Runtime) CanCheckpoint() bool {
	return r.kind == KindRunsc && !r.stateTmpfs
}

// onTmpfs reports whether dir is on a tmpfs (or ramfs): in memory.
func onTmpfs(dir string) bool {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return false
	}
	return st.Type == unix.TMPFS_MAGIC || st.Type == unix.RAMFS_MAGIC
}

// errNoCheckpoint is a checkpoint asked of a runtime that cannot.
func errNoCheckpoint(kind string) error {
	return errdefs.Sentence(errdefs.ErrFailedPrecondition, "a memory checkpoint is not supported by runtime %s (runsc only)", kind)
}

// Checkpoint implements Checkpointer with `runsc checkpoint`.
func (r *Runtime) Checkpoint(ctx context.Context, id, dir string) error {
	if err := runtime.CheckID(id); err != nil {
		return err
	}
	if _, err := os.Stat(r.bundle(id)); err != nil {
		return fmt.Errorf("sandbox %s: %w", id, errdefs.ErrNotFound)
	}
	d := r.driverFor(id)
	if d.kind != KindRunsc {
		return errNoCheckpoint(d.kind)
	}
	st, err := r.State(ctx, id)
	if err != nil {
		return err
	}
	if err := notIn(st, "checkpoint", runtime.StatusRunning); err != nil {
		return err
	}
	if dir == "" {
		dir = r.checkpointDir(id)
		_ = os.RemoveAll(dir) // an earlier one, restored
		if err := os.Mkdir(dir, 0o700); err != nil {
			return fmt.Errorf("checkpoint sandbox %s: %w", id, err)
		}
	}
	args := append(append([]string{"checkpoint"}, checkpointFlags...), "--image-path", dir, id)
	if _, err := d.output(ctx, args...); err != nil {
		return fmt.Errorf("checkpoint sandbox %s: %w", id, err)
	}
	// The sandbox stops once saved; runsc's own record of it and its
	// cgroups go, so nothing of it runs or is charged on the host.
	if err := r.stopSaved(ctx, d, id); err != nil {
		return fmt.Errorf("checkpoint sandbox %s: %w", id, err)
	}
	// Its writable layer goes to disk too (stow.go); one that cannot
	// stays in memory, and the restore finds it where it was.
	if _, err := r.stowLayer(id); err != nil {
		r.log.Warn("checkpoint keeps the writable layer in memory", logkey.Sandbox, id, logkey.Err, err)
	}
	return nil
}

// stopSaved removes what runs of a checkpointed sandbox (runsc's
// container, its cgroups), keeping the rest for Restore.
func (r *Runtime) stopSaved(ctx context.Context, d driver, id string) error {
	if _, err := d.output(ctx, "delete", "--force", id); err != nil && !errors.Is(err, errdefs.ErrNotFound) {
		return err
	}
	r.info.Delete(id) // its pid changes with the restore
	_ = os.Remove(filepath.Join(r.bundle(id), "pid"))
	return teardown.RemoveCgroups(ctx, id, teardown.CgroupDirs(id))
}

// Restore implements Checkpointer with `runsc restore`.
func (r *Runtime) Restore(ctx context.Context, id, dir string) error {
	if err := runtime.CheckID(id); err != nil {
		return err
	}
	bundle := r.bundle(id)
	if _, err := os.Stat(filepath.Join(bundle, "config.json")); err != nil {
		return fmt.Errorf("sandbox %s: %w", id, errdefs.ErrNotFound)
	}
	d := r.driverFor(id)
	if d.kind != KindRunsc {
		return errNoCheckpoint(d.kind)
	}
	own := dir == ""
	if own {
		dir = r.checkpointDir(id)
	}
	if _, err := os.Stat(filepath.Join(dir, "checkpoint.img")); err != nil {
		return fmt.Errorf("sandbox %s: no checkpoint in %s: %w", id, dir, errdefs.ErrNotFound)
	}
	// A checkpoint that stopped the sandbox removed its pid file; the
	// file is there while it runs (a runtime invocation to ask would cost
	// a third of the restore).
	if _, err := os.Stat(filepath.Join(bundle, "pid")); err == nil {
		return fmt.Errorf("restore sandbox %s: it was not stopped by a checkpoint: %w", id, errdefs.ErrFailedPrecondition)
	}
	// Marked before it opens: from now on the socket at the channel's
	// name may not be the agent's (Reopened).
	if err := os.WriteFile(filepath.Join(bundle, reopenedFile), nil, 0o600); err != nil {
		return fmt.Errorf("restore sandbox %s: %w", id, err)
	}
	ph := phases{start: time.Now()}
	if err := r.reopenChannel(id); err != nil {
		return err
	}
	ph.mark("channel")
	if err := r.unstowLayer(id); err != nil {
		return err
	}
	ph.mark("layer")
	r.info.Delete(id)
	args := append(append([]string{"restore"}, restoreFlags...), "--image-path", dir, "--bundle", bundle, "--pid-file", filepath.Join(bundle, "pid"), "--detach", id)
	if err := d.detached(ctx, id, filepath.Join(bundle, "log"), nil, args...); err != nil {
		// Leave nothing running half restored; the bundle stays for
		// Delete (or another Restore).
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		_ = r.stopSaved(cctx, d, id)
		return fmt.Errorf("restore sandbox %s: %w", id, err)
	}
	ph.mark("runsc")
	if own {
		discard(dir) // the restored sandbox's memory is its own now
	}
	ph.mark("cleanup")
	r.log.Debug("sandbox restored", append([]any{logkey.Sandbox, id}, ph.attrs()...)...)
	return nil
}

// checkpointDir is where a sandbox's own checkpoint goes: in its bundle,
// so that Delete removes it.
func (r *Runtime) checkpointDir(id string) string { return filepath.Join(r.bundle(id), "checkpoint") }

// Checkpointed reports whether sandbox id is stopped with a checkpoint of
// its own to restore.
func (r *Runtime) Checkpointed(id string) bool {
	if runtime.CheckID(id) != nil {
		return false
	}
	_, err := os.Stat(filepath.Join(r.checkpointDir(id), "checkpoint.img"))
	if err != nil {
		return false
	}
	_, err = os.Stat(filepath.Join(r.bundle(id), "pid"))
	return errors.Is(err, os.ErrNotExist)
}

// reopenedFile, in a bundle, marks a sandbox whose channel was reopened.
const reopenedFile = "reopened"

// Reopened reports whether sandbox id's channel was ever reopened (by a
// Restore). While it was open, code saved with the sandbox could move the
// agent's fresh socket aside and bind a relay at its name, which the
// runtime's checks of the listener pass (it is a process of the sandbox)
// and the seal then keeps: every later connection to the sandbox may pass
// through user code. Its sessions must then be sealed (agent.ClientConfig
// Sealed), for the sandbox's whole life; the mark goes with its bundle.
func (r *Runtime) Reopened(id string) bool {
	if runtime.CheckID(id) != nil {
		return true
	}
	_, err := os.Stat(filepath.Join(r.bundle(id), reopenedFile))
	return err == nil || !errors.Is(err, os.ErrNotExist)
}

// reopenChannel makes sandbox id's sealed channel tmpfs writable again,
// so that its released agent can listen (it removes its stale socket
// itself). Code in the sandbox can write there until the host seals it
// again (Seal, once the agent has proved the key on a new connection):
// a socket it planted fails the handshake, which only its own sandbox
// loses, as a planted socket at boot would.
func (r *Runtime) reopenChannel(id string) error {
	dir := r.chanDir(id)
	dfd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("sandbox %s: channel dir: %v: %w", id, err, errdefs.ErrNotFound)
	}
	defer unix.Close(dfd)
	var sfs unix.Statfs_t
	if err := unix.Fstatfs(dfd, &sfs); err != nil || sfs.Type != unix.TMPFS_MAGIC {
		return fmt.Errorf("sandbox %s: channel dir is not its tmpfs: %w", id, errdefs.ErrNotFound)
	}
	if sfs.Flags&unix.ST_RDONLY == 0 {
		return nil
	}
	if err := unix.Mount("", dir, "", unix.MS_REMOUNT|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("sandbox %s: reopen channel: %w", id, err)
	}
	return nil
}
