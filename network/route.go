package network

import (
	"context"
	"net"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// DialSandbox opens the daemon's own connection to a sandbox's address
// (the ports route's transport dials with it). Its socket carries the
// table's RouteMark, which the kernel rules require of every connection
// the host opens to a sandbox: no other process on the host, whatever
// its account, reaches a sandbox's ports around the route and its
// traffic token. Setting the mark needs CAP_NET_ADMIN, which the daemon
// has (it manages the table).
func (m *Manager) DialSandbox(ctx context.Context, network, address string) (net.Conn, error) {
	mark := int(m.tab.Config().RouteMark)
	d := net.Dialer{
		Timeout: 5 * time.Second,
		Control: func(_, _ string, rc syscall.RawConn) error {
			var serr error
			if err := rc.Control(func(fd uintptr) {
				serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_MARK, mark)
			}); err != nil {
				return err
			}
			return serr
		},
	}
	return d.DialContext(ctx, network, address)
}
