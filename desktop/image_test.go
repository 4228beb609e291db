package desktop_test

import (
	"io/fs"
	"os"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/sandlot/sandlot/desktop"
	"github.com/sandlot/sandlot/image/debian/debiantest"
)

// TestImage checks the desktop image holds every program and file the
// E2B desktop SDK and the native desktop manager call, at the paths they
// call them by (a symlink resolves inside the image, as in a sandbox).
func TestImage(t *testing.T) {
	_, img := debiantest.Image(t, desktop.ImageConfig(), desktop.Template)
	lowers := img.LowerDirs()
	if len(lowers) != 1 {
		t.Fatalf("layers = %d, want 1", len(lowers))
	}
	root := inRoot{lowers[0]}
	for _, p := range []string{
		"usr/bin/Xvfb", "usr/bin/xdpyinfo", "usr/bin/startxfce4", "usr/bin/xfce4-session", "usr/bin/xfwm4",
		"usr/bin/xfdesktop", "usr/bin/xfce4-panel", "usr/bin/xdotool", "usr/bin/scrot", "usr/bin/xrandr", "usr/bin/x11vnc",
		"usr/bin/websockify", "usr/bin/chromium", "usr/bin/xdg-open", "usr/bin/exo-open", "usr/bin/gtk-launch",
		"usr/bin/netstat", "usr/bin/pgrep", "usr/bin/ps", "usr/bin/mousepad", "usr/bin/dbus-launch",
		"usr/bin/python3", "usr/bin/node", "usr/bin/curl",
		"opt/noVNC/utils/novnc_proxy", "opt/noVNC/vnc.html",
		"etc/chromium.d/sandlot", "etc/xdg/mimeapps.list", "etc/xdg/xfce4/helpers.rc",
		"etc/xdg/xfce4/xfconf/xfce-perchannel-xml/xfce4-panel.xml",
		"usr/share/xfce4/helpers/chromium.desktop", "usr/share/applications/chromium.desktop",
		"home/user/Desktop/chromium.desktop",
	} {
		t.Run(p, func(t *testing.T) {
			if _, err := root.Stat(p); err != nil {
				t.Error(err)
			}
		})
	}
}

// inRoot stats paths of an image tree the way a sandbox sees them:
// symlinks (absolute ones too) resolve inside the tree.
type inRoot struct{ dir string }

func (r inRoot) Stat(p string) (fs.FileInfo, error) {
	dir, err := os.Open(r.dir)
	if err != nil {
		return nil, err
	}
	defer dir.Close()
	fd, err := unix.Openat2(int(dir.Fd()), p, &unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC, Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS})
	if err != nil {
		return nil, &fs.PathError{Op: "openat2", Path: p, Err: err}
	}
	f := os.NewFile(uintptr(fd), p)
	defer f.Close()
	return f.Stat()
}
