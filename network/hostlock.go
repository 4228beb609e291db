package network

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/sandlot/sandlot/errdefs"
)

// lockHost takes the lock a started Manager holds for its life: one
// Manager at a time may own the namespaces under dir (its NetnsDir), its
// nftables table and its veths. Start rebuilds the table and removes
// every namespace and veth no record of its own names, so a second
// daemon started on the same host would strip the first one's sandboxes
// of their rules and their networks. The lock is a flock on dir+".lock",
// released when the Manager closes or its process dies; the file keeps
// the holder's pid for the refusal's message.
func lockHost(dir string) (*os.File, error) {
	path := strings.TrimSuffix(dir, "/") + ".lock"
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, fmt.Errorf("network: lock %s: %w", path, err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		holder := "unknown"
		if b, rerr := os.ReadFile(path); rerr == nil && len(b) > 0 && len(b) < 16 {
			holder = strings.TrimSpace(string(b))
		}
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("network: another sandlot daemon (pid %s) runs the sandbox networks of %s on this host (lock %s); one daemon per host can serve networks: %w",
				holder, dir, path, errdefs.ErrFailedPrecondition)
		}
		return nil, fmt.Errorf("network: lock %s: %w", path, err)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return f, nil
}
