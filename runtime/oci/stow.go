package oci

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/runtime"
)

// A checkpointed sandbox on an image keeps its image root where it was,
// since gVisor reopens its files by path at the restore; but the root's
// writable layer is a tmpfs (imgroot.go), host memory, which a suspend
// exists to free. So the checkpoint stows the layer: the upper dir is
// copied to <bundle>/layer on the state dir's disk (copyLayer: the tree is
// hostile) and the overlay and its tmpfs are unmounted; the restore
// mounts a new tmpfs of the same size at the same place, copies the layer
// back and mounts the overlay again over the same image layers, which
// <bundle>/root.json names. The sandbox's files are then as it left them,
// at the same paths, with the same owners, modes and times.
//
// A root with anything mounted below it (a volume, once runsc has them)
// is left as it is: its mounts are not the runtime's to make again. A
// stow that fails leaves the layer in memory, as before, and the restore
// as it was.

// rootInfo is what a sandbox's image root is made of, kept in its bundle
// to mount it again after a stow.
type rootInfo struct {
	Layers    []string `json:"layers"`
	Sudo      bool     `json:"sudo,omitempty"`
	DiskBytes int64    `json:"diskBytes"`
}

const (
	rootInfoFile = "root.json" // in a bundle
	stowedDir    = "layer"     // in a bundle: a stowed writable layer
)

// saveRootInfo records the image root of sandbox id (runsc only: the
// runtime that checkpoints) in its bundle dir.
func (r *Runtime) saveRootInfo(dir string, root *runtime.Root, diskBytes int64) error {
	if r.kind != KindRunsc || root.Upper != "" {
		return nil // a build step's layer is its caller's, never checkpointed
	}
	b, err := json.Marshal(rootInfo{Layers: root.Layers, Sudo: root.Sudo, DiskBytes: diskBytes})
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, rootInfoFile), b, 0o600)
}

// stowLayer moves checkpointed sandbox id's writable layer to its bundle,
// on disk, and unmounts its image root. It reports whether it did (false:
// no image root, or one with mounts below it); an error leaves the root
// mounted as it was.
//
// The copy is made as <bundle>/layer.part, synced and only then renamed
// to <bundle>/layer, before anything is unmounted: a daemon that dies at
// any step leaves the layer in memory (mounted), or whole on disk, or
// both, never only a part of it (unstowLayer sorts out which).
func (r *Runtime) stowLayer(id string) (bool, error) {
	dir, bundle := r.rootDir(id), r.bundle(id)
	merged := filepath.Join(dir, "root")
	if !isMountPoint(dir) || !isMountPoint(merged) {
		return false, nil
	}
	if _, err := os.Stat(filepath.Join(bundle, rootInfoFile)); err != nil {
		return false, nil // made before roots were recorded
	}
	below, err := mountsBelow(merged)
	if err != nil || below {
		return false, err
	}
	disk := filepath.Join(bundle, stowedDir)
	part := disk + partSuffix
	for _, p := range []string{disk, part} {
		if err := os.RemoveAll(p); err != nil {
			return false, err
		}
	}
	step("stow: copy")
	if err := copyLayer(filepath.Join(dir, "upper"), part, defaultLayerLimits); err != nil {
		_ = os.RemoveAll(part)
		return false, fmt.Errorf("stow layer of %s: %w", id, err)
	}
	step("stow: copied")
	if err := syncRename(part, disk); err != nil {
		_ = os.RemoveAll(part)
		_ = os.RemoveAll(disk)
		return false, fmt.Errorf("stow layer of %s: %w", id, err)
	}
	step("stow: renamed")
	// Not detached: a busy overlay stays, and so does its layer.
	if err := unix.Unmount(merged, 0); err != nil {
		_ = os.RemoveAll(disk)
		return false, fmt.Errorf("stow layer of %s: unmount the root: %w", id, err)
	}
	step("stow: overlay unmounted")
	// Nothing holds the tmpfs now that its overlay is gone; detached,
	// whatever still did would only delay the freeing of its pages.
	if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
		return true, fmt.Errorf("stow layer of %s: unmount the layer: %w", id, err)
	}
	return true, nil
}

// partSuffix names a stowed layer's copy while it is made.
const partSuffix = ".part"

// syncRename puts the copy at part on its disk (the whole filesystem
// synced once: cheaper than a sync of each of the layer's files, and the
// checkpoint's image beside it goes too) and then renames it to name, in
// a directory synced after: once name is there, after a power loss too,
// it is whole.
func syncRename(part, name string) error {
	for _, f := range []func() error{
		func() error { return syncPath(part, true) },
		func() error { return os.Rename(part, name) },
		func() error { return syncPath(filepath.Dir(name), false) },
	} {
		if err := f(); err != nil {
			return err
		}
	}
	return nil
}

// syncPath syncs directory dir: its filesystem whole (fs), or itself.
func syncPath(dir string, fs bool) error {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if fs {
		return unix.Syncfs(fd)
	}
	return unix.Fsync(fd)
}

// unstowLayer mounts stowed sandbox id's image root again with its layer
// from the bundle, and removes the stowed copy. Without one it does
// nothing.
//
// It takes up whatever a daemon that died in a stow or an unstow left:
//   - a part of a copy (layer.part) is never used, and goes;
//   - a root still mounted, overlay and all, is the layer (a stow cut
//     short before its unmounts, or an unstow after its overlay): a copy
//     beside it goes;
//   - a tmpfs mounted without its overlay (a stow cut short between its
//     unmounts, an unstow in its copy back) may hold a part of the layer:
//     it is unmounted and the whole copy, which both have by then, put
//     back;
//   - neither a mounted root nor a copy, where the bundle names an image
//     root, is a layer lost (a host restart in a stow's copy): refused,
//     not restored without its files.
func (r *Runtime) unstowLayer(id string) (err error) {
	bundle := r.bundle(id)
	disk := filepath.Join(bundle, stowedDir)
	dir := r.rootDir(id)
	upper, work, merged := filepath.Join(dir, "upper"), filepath.Join(dir, "work"), filepath.Join(dir, "root")
	if _, err := os.Lstat(disk + partSuffix); err == nil {
		discard(disk + partSuffix)
	}
	_, err = os.Lstat(disk)
	stowed := err == nil
	switch mounted := isMountPoint(dir); {
	case mounted && isMountPoint(merged):
		if stowed {
			discard(disk)
		}
		return nil
	case !stowed:
		if _, err := os.Stat(filepath.Join(bundle, rootInfoFile)); mounted || err == nil {
			return fmt.Errorf("unstow layer of %s: its writable layer is neither mounted nor stowed: %w", id, errdefs.ErrFailedPrecondition)
		}
		return nil // no image root
	case mounted:
		if err := r.unmountImageRoot(id); err != nil {
			return fmt.Errorf("unstow layer of %s: %w", id, err)
		}
	}
	b, err := os.ReadFile(filepath.Join(bundle, rootInfoFile))
	if err != nil {
		return fmt.Errorf("unstow layer of %s: %w", id, err)
	}
	var info rootInfo
	if err := json.Unmarshal(b, &info); err != nil {
		return fmt.Errorf("unstow layer of %s: %s: %w", id, rootInfoFile, err)
	}
	ids, err := readIDRange(filepath.Join(bundle, "config.json"))
	if err != nil {
		return fmt.Errorf("unstow layer of %s: %w", id, err)
	}
	if err := os.Mkdir(dir, 0o711); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("unstow layer of %s: %w", id, err)
	}
	defer func() {
		if err != nil {
			_ = r.unmountImageRoot(id)
		}
	}()
	if err := mountLayerTmpfs(dir, info.DiskBytes, info.Sudo, ids); err != nil {
		return fmt.Errorf("unstow layer of %s: %w", id, err)
	}
	if err := copyLayer(disk, upper, defaultLayerLimits); err != nil {
		return fmt.Errorf("unstow layer of %s: %w", id, err)
	}
	for _, d := range []string{work, merged} {
		if err := os.Mkdir(d, 0o755); err != nil {
			return fmt.Errorf("unstow layer of %s: %w", id, err)
		}
	}
	userns, err := usernses.get(ids)
	if err != nil {
		return err
	}
	if err := mountOverlay(merged, append([]string{r.imageSkel}, info.Layers...), upper, work, userns, info.Sudo); err != nil {
		return fmt.Errorf("unstow layer of %s: %w", id, err)
	}
	step("unstow: overlay mounted")
	discard(disk)
	return nil
}

// stowStep, when set (tests), runs at each step of a stow and an unstow;
// a test panics in it to stand for the daemon dying there.
var stowStep func(step string)

func step(s string) {
	if stowStep != nil {
		stowStep(s)
	}
}

// discard removes dir, a directory of a bundle, off the caller's path: it
// is renamed at once (so a later checkpoint or stow of the sandbox makes
// a new one) and removed in the background; one a crash leaves goes with
// the bundle.
func discard(dir string) {
	gone := fmt.Sprintf("%s.gone-%d", dir, time.Now().UnixNano())
	if err := os.Rename(dir, gone); err != nil {
		_ = os.RemoveAll(dir)
		return
	}
	go func() { _ = os.RemoveAll(gone) }()
}

// mountsBelow reports whether anything is mounted below dir.
func mountsBelow(dir string) (bool, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return false, err
	}
	defer f.Close()
	prefix := dir + "/"
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 4 && strings.HasPrefix(unescapeMount(fields[4]), prefix) {
			return true, nil
		}
	}
	return false, sc.Err()
}

// unescapeMount undoes mountinfo's octal escapes of space, tab, newline
// and backslash.
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	r := strings.NewReplacer(`\040`, " ", `\011`, "\t", `\012`, "\n", `\134`, `\`)
	return r.Replace(s)
}
