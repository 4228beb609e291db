package network

import (
	"context"
	"net"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/sandlot/sandlot/internal/testenv"
	"github.com/sandlot/sandlot/network/netns"
	"github.com/sandlot/sandlot/network/nettest"
	"github.com/sandlot/sandlot/network/policy"
)

// TestWallHostAccounts attacks a sandbox's private port from the host: a
// local account that is not root (uid 65534, nobody) connects straight to
// the sandbox's pool address, skipping the ports route and its traffic
// token. So does a root process that is not the daemon's route. Only the
// route's own dialer (DialSandbox) gets through, in every mode.
func TestWallHostAccounts(t *testing.T) {
	nettest.Require(t)
	curl := testenv.RequireBinary(t, "curl")
	m := newManager(t, newDirs(t))
	ctx := context.Background()
	for _, p := range []*policy.Effective{noneP, allowlistP, openP} {
		t.Run(string(p.Policy.Mode), func(t *testing.T) {
			n, err := m.Setup(ctx, "acct-"+string(p.Policy.Mode), p)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { m.Teardown(ctx, n.SandboxID) })
			l, err := netns.Listen(ctx, n.Path, "tcp4", "0.0.0.0:8080")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { l.Close() })
			go func() {
				for {
					c, err := l.Accept()
					if err != nil {
						return
					}
					c.Write([]byte("HTTP/1.1 200 OK\r\nContent-Length: 7\r\nConnection: close\r\n\r\nprivate"))
					c.Close()
				}
			}()
			target := net.JoinHostPort(n.Addr.String(), "8080")

			cmd := exec.Command(curl, "-sS", "--max-time", "3", "http://"+target+"/")
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
			if out, err := cmd.CombinedOutput(); err == nil {
				t.Errorf("uid 65534 read the sandbox's private server at %s: %q", target, out)
			}
			d := net.Dialer{Timeout: 2 * time.Second}
			if c, err := d.Dial("tcp4", target); err == nil {
				c.Close()
				t.Errorf("a root process other than the route reached %s", target)
			}
			c, err := m.DialSandbox(ctx, "tcp4", target)
			if err != nil {
				t.Fatalf("the route's dialer: %v", err)
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(5 * time.Second))
			c.Write([]byte("GET / HTTP/1.0\r\n\r\n"))
			buf := make([]byte, 128)
			k, _ := c.Read(buf)
			if got := string(buf[:k]); len(got) < 12 || got[9:12] != strconv.Itoa(200) {
				t.Errorf("the route's dialer read %q", got)
			}
		})
	}
}
