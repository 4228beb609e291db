package oci

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/runtime"
	"github.com/sandlot/sandlot/volumes"
)

// volumeHost makes a volume of size bytes and returns its id, the host
// that keeps it and an open detached mount of it (closed at cleanup).
func volumeHost(t *testing.T, size int64) (*volumes.Host, string, int) {
	t.Helper()
	h, err := volumes.NewHost(filepath.Join(t.TempDir(), "volumes"))
	if err != nil {
		t.Fatal(err)
	}
	id := volumes.NewID()
	if err := h.Create(context.Background(), id, size); err != nil {
		t.Fatal(err)
	}
	fd, err := h.Open(id)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	return h, id, fd
}

// startVolumeProbe starts the probe on image layers with vols, as user
// (nil: the sandbox user).
func startVolumeProbe(t *testing.T, r *Runtime, layers []string, user *runtime.User, vols []runtime.Volume) (string, *probeConn, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	id := runtime.NewID()
	sp := probeSpec(t, r, id)
	sp.Root = &runtime.Root{Layers: layers}
	sp.User = user
	sp.Volumes = vols
	if err := r.Create(ctx, sp); err != nil {
		return id, nil, err
	}
	t.Cleanup(func() {
		if err := r.Delete(context.Background(), id); err != nil {
			t.Errorf("delete %s: %v", id, err)
		}
	})
	return id, dialProbe(t, ctx, r, id), nil
}

// TestVolume: what one sandbox writes to a volume another sandbox (its
// own id range) reads, with the same owners; a read-only mount is
// read-only even to the sandbox's root, who can neither remount it
// writable nor unmount it; a full volume is ENOSPC inside; devices and
// set-id bits do nothing; what the sandbox plants (symlinks to / and
// /etc, a FIFO, a socket) is never a path on the host, whose side of
// the volume (usage, removal) stays one regular file.
func TestVolume(t *testing.T) {
	a, _ := imageLayers(t)
	root := &runtime.User{UID: 0, GID: 0}
	for _, kind := range []string{KindCrun, KindRunc} {
		t.Run(kind, func(t *testing.T) {
			r := newRuntime(t, kind)
			h, vid, fd := volumeHost(t, 32<<20)
			_, pa, err := startVolumeProbe(t, r, a, nil, []runtime.Volume{{FD: fd, Path: "/mnt/data"}})
			if err != nil {
				t.Fatal(err)
			}
			_, pb, err := startVolumeProbe(t, r, a, root, []runtime.Volume{{FD: fd, Path: "/home/user/ro", ReadOnly: true}})
			if err != nil {
				t.Fatal(err)
			}
			steps := []struct {
				p          *probeConn
				name, cmd  string
				want       string
				wantFailed bool
			}{
				{pa, "write", "echo hi > /mnt/data/f && stat -c %u:%g /mnt/data /mnt/data/f", "1000:1000\n1000:1000\n", false},
				{pa, "plant", "ln -s / /mnt/data/root && ln -s /etc /mnt/data/etc && mkfifo /mnt/data/fifo && python3 -c \"import socket; s=socket.socket(socket.AF_UNIX); s.bind('/mnt/data/sock')\" && echo ok", "ok\n", false},
				{pa, "hardlink out", "ln /etc/passwd /mnt/data/passwd", "", true},
				{pa, "device", "mknod /mnt/data/null c 1 3", "", true},
				{pb, "read in another sandbox", "cat /home/user/ro/f; stat -c %u:%g /home/user/ro/f", "hi\n1000:1000\n", false},
				{pb, "symlink resolves inside", "cat /home/user/ro/etc/hostname", "sandbox\n", false},
				{pb, "write read-only as root", "touch /home/user/ro/x", "", true},
				{pb, "remount writable", "mount -o remount,rw /home/user/ro", "", true},
				{pb, "unmount", "umount /home/user/ro", "", true},
				{pb, "device as root", "mknod /tmp/null c 1 3 && head -c1 /tmp/null", "", true},
				{pa, "full", "dd if=/dev/zero of=/mnt/data/big bs=1M count=64 2>&1", "", true},
				{pa, "full is ENOSPC", "dd if=/dev/zero of=/mnt/data/big2 bs=1M count=64 2>&1 | grep -c 'No space left'", "1\n", false},
				{pa, "suid", "cp /bin/true /mnt/data/t && chmod u+s /mnt/data/t && grep -c nosuid /proc/self/mountinfo", "", false},
			}
			for _, s := range steps {
				got := s.p.sh(t, s.cmd)
				if s.wantFailed {
					if got.Code == 0 {
						t.Errorf("%s: %q succeeded: %s", s.name, s.cmd, got.Out)
					}
					continue
				}
				if s.want == "" {
					if got.Code != 0 {
						t.Errorf("%s: %q: exit %d: %s", s.name, s.cmd, got.Code, got.Out)
					}
					continue
				}
				if got.Code != 0 || got.Out != s.want {
					t.Errorf("%s: %q = %q (exit %d), want %q", s.name, s.cmd, got.Out, got.Code, s.want)
				}
			}
			if got := pa.sh(t, "grep ' /mnt/data ' /proc/self/mountinfo"); !strings.Contains(got.Out, "nosuid") || !strings.Contains(got.Out, "nodev") {
				t.Errorf("volume mount options: %s", got.Out)
			}
			// The host side: one regular file, measured without a walk.
			ents, err := os.ReadDir(h.Dir())
			if err != nil || len(ents) != 1 || ents[0].Name() != vid+".img" || !ents[0].Type().IsRegular() {
				t.Errorf("volumes dir holds %v, %v", ents, err)
			}
			if n, err := h.Usage(vid); err != nil || n < 16<<20 {
				t.Errorf("usage %d, %v; want the written blocks", n, err)
			}
			if _, err := os.Lstat("/etc/passwd"); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestVolumeMountPathSymlink: a template whose tree has a symlink where a
// volume's mount path goes (to /etc, to /) is refused before the sandbox
// starts, and nothing is made or mounted on the host where the symlink
// points. The test makes the symlink point at a host dir of its own, so a
// mount point followed through it shows there.
func TestVolumeMountPathSymlink(t *testing.T) {
	a, _ := imageLayers(t)
	hostDir := t.TempDir()
	top := t.TempDir()
	for name, target := range map[string]string{"srvlink": hostDir, "datalink": hostDir} {
		if err := os.Symlink(target, filepath.Join(top, name)); err != nil {
			t.Fatal(err)
		}
	}
	layers := append([]string{top}, a...)
	r := newRuntime(t, KindCrun)
	_, _, fd := volumeHost(t, 16<<20)
	for _, p := range []string{"/srvlink/x", "/datalink"} {
		t.Run(strings.ReplaceAll(p, "/", "_"), func(t *testing.T) {
			_, _, err := startVolumeProbe(t, r, layers, nil, []runtime.Volume{{FD: fd, Path: p}})
			if !errors.Is(err, errdefs.ErrInvalidArgument) {
				t.Errorf("volume at %s through a symlink: %v, want invalid_argument", p, err)
			}
			if ents, _ := os.ReadDir(hostDir); len(ents) != 0 {
				t.Errorf("the host dir the symlink names got %v", ents)
			}
			if m := mountsUnder(t, hostDir); len(m) != 0 {
				t.Errorf("mounted on the host through the symlink: %v", m)
			}
		})
	}
}
