package oci

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/runtime"
)

// Fork with memory (runsc only; docs/state.md, "Fork with memory"). The
// source is checkpointed and keeps running (ForkCheckpoint); each fork is
// a new sandbox, with its own bundle, host id range, image root and
// channel, whose runsc restores that checkpoint instead of starting a
// process (RestoreFork). gVisor refuses a restore into a spec other than
// the saved one, and its only switch is all or nothing
// (--restore-spec-validation): the fork's restore alone turns it to
// warning, after sandlot's own comparison (forkspec.go) refused every
// difference but the sandbox's host names. The saved kernel's processes
// run in the fork under the fork's host ids (the sentry's ids inside are
// its own; the gofer and the mounts are the fork's). gVisor reopens every
// host file the kernel held by its path in the fork's root: the fork's
// root must hold the source's files (a snapshot of its layer), or the
// restore fails and the caller falls back to a fork of files.

// restoreAnySpec is runsc's global flag for a fork's restore only.
const restoreAnySpec = "--restore-spec-validation=warning"

// forkSourceFile, in a fork checkpoint's directory, is the source's spec.
const forkSourceFile = "sandlot-source.json"

// PrepareForkCheckpoint checks that running sandbox id can be
// checkpointed for forks into dir (empty, on a disk) and writes there
// what the forks need beside the kernel: the source's spec, for
// RestoreFork's comparison, and its channel's sockets. It runs before the
// agent releases its channel, so that a refusal leaves the sandbox as it
// was. The caller removes dir.
func (r *Runtime) PrepareForkCheckpoint(ctx context.Context, id, dir string) error {
	if err := runtime.CheckID(id); err != nil {
		return err
	}
	bundle := r.bundle(id)
	if _, err := os.Stat(bundle); err != nil {
		return fmt.Errorf("sandbox %s: %w", id, errdefs.ErrNotFound)
	}
	d := r.driverFor(id)
	if d.kind != KindRunsc || !r.CanCheckpoint() {
		return errNoCheckpoint(d.kind)
	}
	st, err := r.State(ctx, id)
	if err != nil {
		return err
	}
	if err := notIn(st, "checkpoint", runtime.StatusRunning); err != nil {
		return err
	}
	cfg, err := os.ReadFile(filepath.Join(bundle, "config.json"))
	if err != nil {
		return fmt.Errorf("sandbox %s: %w", id, errdefs.ErrNotFound)
	}
	if err := os.WriteFile(filepath.Join(dir, forkSourceFile), cfg, 0o600); err != nil {
		return fmt.Errorf("fork checkpoint of %s: %w", id, err)
	}
	return r.saveChannel(id, dir)
}

// ForkCheckpoint saves sandbox id's memory into dir, prepared by
// PrepareForkCheckpoint, and leaves it running. Its agent must have
// released the channel (gVisor cannot save the bound host socket): the
// channel is opened again once saved, whatever the outcome, the bundle
// marked Reopened before, so the source's sessions are sealed from now
// on, as after a Restore.
func (r *Runtime) ForkCheckpoint(ctx context.Context, id, dir string) error {
	if err := runtime.CheckID(id); err != nil {
		return err
	}
	// Marked before the channel opens: from now on the socket at its
	// name may not be the agent's. Unmarked, it stays shut.
	if err := r.markReopened(id); err != nil {
		return err
	}
	sock := filepath.Join(r.chanDir(id), filepath.Base(runscChannel))
	var before syscall.Stat_t
	_ = syscall.Lstat(sock, &before)
	_, cerr := r.driverFor(id).output(ctx, "checkpoint", "--leave-running", "--image-path", dir, id)
	// Whatever the checkpoint's outcome the sandbox runs: its released
	// agent must be able to listen again.
	if err := r.reopenChannel(id); err != nil {
		return err
	}
	// The old socket still accepts (the sandbox's gofer holds it) and
	// nothing answers there: a dial before the agent listens anew would
	// wait out a handshake. Wait for the agent's new socket at the name.
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for wctx.Err() == nil {
		var now syscall.Stat_t
		if err := syscall.Lstat(sock, &now); err == nil && now.Ino != before.Ino {
			break
		}
		time.Sleep(time.Millisecond)
	}
	if cerr != nil {
		return fmt.Errorf("fork checkpoint of %s: %w", id, cerr)
	}
	if wctx.Err() != nil {
		return fmt.Errorf("sandbox %s: its agent did not listen again after the fork checkpoint: %w", id, errdefs.ErrUnavailable)
	}
	return nil
}

// ReopenChannel opens running sandbox id's sealed channel again, its
// bundle marked Reopened first (its sessions sealed from now on): for an
// agent whose release may have happened though its answer was lost, so
// that it can listen again. The next authenticated connection seals it.
func (r *Runtime) ReopenChannel(id string) error {
	if err := runtime.CheckID(id); err != nil {
		return err
	}
	if err := r.markReopened(id); err != nil {
		return err
	}
	return r.reopenChannel(id)
}

func (r *Runtime) markReopened(id string) error {
	if err := os.WriteFile(filepath.Join(r.bundle(id), reopenedFile), nil, 0o600); err != nil {
		return fmt.Errorf("sandbox %s: mark its channel reopened: %w", id, err)
	}
	return nil
}

// CheckpointProcess returns the process (its arguments and environment)
// of the sandbox whose fork checkpoint is in dir: a fork's spec must have
// the same (forkspec.go), and its provider builds it from them.
func (r *Runtime) CheckpointProcess(dir string) (args, env []string, err error) {
	src, err := readForkSource(dir)
	if err != nil {
		return nil, nil, err
	}
	if src.Process == nil {
		return nil, nil, fmt.Errorf("fork checkpoint %s: no process: %w", dir, errdefs.ErrFailedPrecondition)
	}
	return src.Process.Args, src.Process.Env, nil
}

func readForkSource(dir string) (*specs.Spec, error) {
	b, err := os.ReadFile(filepath.Join(dir, forkSourceFile))
	if err != nil {
		return nil, fmt.Errorf("fork checkpoint %s: %v: %w", dir, err, errdefs.ErrNotFound)
	}
	var sp specs.Spec
	if err := json.Unmarshal(b, &sp); err != nil {
		return nil, fmt.Errorf("fork checkpoint %s: %v: %w", dir, err, errdefs.ErrFailedPrecondition)
	}
	return &sp, nil
}

// RestoreFork creates sandbox spec.ID as Create does (its own bundle, id
// range, root, channel) from the fork checkpoint in dir instead of a new
// process. spec.Secret is the fork's key, kept in its bundle and not
// handed in: the restored agent holds the source's until the host rekeys
// it. The fork's sessions are sealed (Reopened). A spec that differs from
// the source's beyond the sandbox's host names is failed_precondition.
func (r *Runtime) RestoreFork(ctx context.Context, spec runtime.Spec, dir string) error {
	if err := runtime.CheckID(spec.ID); err != nil {
		return err
	}
	if !r.CanCheckpoint() {
		return errNoCheckpoint(r.kind)
	}
	if _, err := os.Stat(filepath.Join(dir, "checkpoint.img")); err != nil {
		return fmt.Errorf("no checkpoint in %s: %w", dir, errdefs.ErrNotFound)
	}
	return r.create(ctx, r.bundle(spec.ID), spec, "restore", dir)
}

// prepareForkRestore, in create, checks the fork's spec sp against the
// source's saved in image, marks the bundle reopened and has d restore
// into a spec other than the saved one.
func (r *Runtime) prepareForkRestore(d *driver, id, bundle, image string, sp *specs.Spec, ids IDRange) error {
	src, err := readForkSource(image)
	if err != nil {
		return err
	}
	if err := sameForkSpec(src, sp); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(bundle, reopenedFile), nil, 0o600); err != nil {
		return err
	}
	if err := r.placeChannel(id, image, ids); err != nil {
		return err
	}
	d.anySpec = true
	return nil
}

// forkChanFile, in a fork checkpoint's directory, lists the source's
// channel directory as the saved kernel knew it.
const forkChanFile = "sandlot-channel.json"

// maxForkChanEntries bounds the files a source's channel may hold for a
// fork checkpoint: each fork leaves the released agent's old socket
// there (moved aside, never removed: the source's gofer may hold it), and
// the tmpfs has 16 inodes, which the agent needs one of to listen again.
const maxForkChanEntries = 12

// chanEntry is a file of a channel directory: a socket (the agent's, or
// an old one moved aside), owned inside the sandbox by UID:GID.
type chanEntry struct {
	Name     string `json:"name"`
	UID, GID uint32
}

// saveChannel lists sandbox id's channel directory into dir, its owners
// as ids inside the sandbox. Only sockets are expected there; anything
// else refuses the fork checkpoint.
func (r *Runtime) saveChannel(id, dir string) error {
	ids, err := r.IDRange(id)
	if err != nil {
		return err
	}
	ents, err := os.ReadDir(r.chanDir(id))
	if err != nil {
		return fmt.Errorf("sandbox %s: channel dir: %w", id, err)
	}
	if len(ents) > maxForkChanEntries {
		return errdefs.Sentence(errdefs.ErrFailedPrecondition, "sandbox %s was forked with its memory too often (%d files in its channel)", id, len(ents))
	}
	var out []chanEntry
	for _, e := range ents {
		fi, err := e.Info()
		if err != nil {
			return err
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if fi.Mode().Type() != fs.ModeSocket || !ok || !ids.Contains(st.Uid) || !ids.Contains(st.Gid) {
			return errdefs.Sentence(errdefs.ErrFailedPrecondition, "sandbox %s: its channel holds %s (%v), not a socket of its own", id, e.Name(), fi.Mode().Type())
		}
		out = append(out, chanEntry{Name: e.Name(), UID: st.Uid - ids.Base, GID: st.Gid - ids.Base})
	}
	b, err := json.Marshal(out)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, forkChanFile), b, 0o600)
}

// placeChannel puts in fork id's channel directory, owned in its range
// ids, a socket file for each the source's held when it was saved: gVisor
// walks to every file the saved kernel knew, by its path ("failed to walk
// agent.sock" otherwise). Nothing listens on them; the restored agent
// moves its old one aside and listens anew.
func (r *Runtime) placeChannel(id, image string, ids IDRange) error {
	b, err := os.ReadFile(filepath.Join(image, forkChanFile))
	if err != nil {
		return fmt.Errorf("fork checkpoint %s: %v: %w", image, err, errdefs.ErrNotFound)
	}
	var ents []chanEntry
	if err := json.Unmarshal(b, &ents); err != nil || len(ents) > maxForkChanEntries {
		return fmt.Errorf("fork checkpoint %s: channel list: %w", image, errdefs.ErrFailedPrecondition)
	}
	dir := r.chanDir(id)
	for _, e := range ents {
		if e.Name == "" || e.Name != filepath.Base(e.Name) || e.Name == "." || e.Name == ".." || e.UID >= ids.Size || e.GID >= ids.Size {
			return fmt.Errorf("fork checkpoint %s: channel entry %q: %w", image, e.Name, errdefs.ErrFailedPrecondition)
		}
		p := filepath.Join(dir, e.Name)
		fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		err = unix.Bind(fd, &unix.SockaddrUnix{Name: p})
		unix.Close(fd)
		if err != nil {
			return fmt.Errorf("fork %s: channel socket %s: %w", id, e.Name, err)
		}
		if err := os.Lchown(p, int(ids.Host(e.UID)), int(ids.Host(e.GID))); err != nil {
			return err
		}
		if err := os.Chmod(p, 0o666); err != nil {
			return err
		}
	}
	return nil
}
