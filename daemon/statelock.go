package daemon

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/runtime/oci"
)

// stateLockFile is the daemon lock inside a state dir.
const stateLockFile = "daemon.lock"

// LockStateDir takes the exclusive daemon lock of a local provider's state
// dir (flock on DIR/daemon.lock, held until release or process exit); ""
// is oci.DefaultStateDir. New takes it for the daemon's life. One
// state dir belongs to one daemon: a manager's reconcile and sweep destroy
// every sandbox in it that its own store and pools do not name, so a
// second daemon there would destroy the first one's sandboxes. With the
// lock it fails at start instead, saying which process holds the dir.
func LockStateDir(dir string) (release func(), err error) {
	return LockStateDirFor(dir, "stop that daemon or give this one its own --state-dir")
}

// LockStateDirFor is LockStateDir for a command other than a daemon (the
// CLI's prune, which destroys what the dir holds): advice ends the error
// it returns when a daemon holds the dir.
func LockStateDirFor(dir, advice string) (release func(), err error) {
	if dir == "" {
		dir = oci.DefaultStateDir
	}
	if err := os.MkdirAll(dir, 0o711); err != nil {
		return nil, fmt.Errorf("state dir: %w", err)
	}
	path := filepath.Join(dir, stateLockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("state dir lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder := "another process"
		if b, rerr := os.ReadFile(path); rerr == nil {
			if pid, perr := strconv.Atoi(strings.TrimSpace(string(b))); perr == nil {
				holder = "pid " + strconv.Itoa(pid)
			}
		}
		f.Close()
		return nil, fmt.Errorf("state dir %s is in use by another sandlot daemon (%s): one state dir belongs to one daemon "+
			"(each destroys the sandboxes it does not know); %s: %w",
			dir, holder, advice, errdefs.ErrFailedPrecondition)
	}
	if err := f.Truncate(0); err == nil {
		f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return func() { f.Close() }, nil // closing the descriptor releases the flock
}
