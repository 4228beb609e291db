package oci

import (
	"context"
	"errors"
	"net"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/runtime"
)

// The tests here get past the channel's first wall on purpose (a name the
// init does not hold yet, a channel directory the host unsealed) to show
// that the walls behind it hold: Dial checks who listens and never follows
// what a sandbox planted.

// TestChannelPeer: a process of the sandbox other than its init (user
// code) that listens on the channel's name is refused by Dial (crun and
// runc: the listener must be the init, as the host sees it).
func TestChannelPeer(t *testing.T) {
	for _, kind := range []string{KindCrun, KindRunc} {
		t.Run(kind, func(t *testing.T) {
			r := newRuntime(t, kind)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			// The probe init listens elsewhere, leaving the channel's name free.
			id := runtime.NewID()
			sp := probeSpec(t, r, id)
			sp.Env[probeAddrEnv] = "@probe-control"
			if err := r.Create(ctx, sp); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { r.Delete(context.Background(), id) })
			p := &probeConn{c: dialAbstract(t, ctx, r, id, "@probe-control")}
			p.sc = newScanner(p.c)
			if got := p.sh(t, `setsid python3 -c "import socket,time; s=socket.socket(socket.AF_UNIX); s.bind('\0`+netnsChannel[1:]+`'); s.listen(); time.sleep(600)" >/dev/null 2>&1 < /dev/null & echo ok`); got.Out != "ok\n" {
				t.Fatalf("impostor: %+v", got)
			}
			for {
				c, err := r.Dial(ctx, id)
				if err == nil {
					c.Close()
					t.Fatal("Dial connected to a listener that is not the sandbox's init")
				}
				if errors.Is(err, errdefs.ErrPermissionDenied) {
					t.Logf("refused: %v", err)
					break
				}
				if ctx.Err() != nil {
					t.Fatalf("impostor never seen: %v", err)
				}
				time.Sleep(20 * time.Millisecond)
			}
			// DialWait connects once (the impostor listens) and checks
			// the same peer.
			if c, err := r.DialWait(ctx, id); !errors.Is(err, errdefs.ErrPermissionDenied) {
				if err == nil {
					c.Close()
				}
				t.Fatalf("DialWait to an impostor: %v, want permission_denied", err)
			}
		})
	}
}

// TestDialWait: DialWait connects to an init that listens only after a
// while, and ends with not_found, well before its deadline, when the init
// exits without listening.
func TestDialWait(t *testing.T) {
	for _, kind := range []string{KindCrun, KindRunc} {
		t.Run(kind, func(t *testing.T) {
			r := newRuntime(t, kind)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			create := func(args ...string) string {
				t.Helper()
				id := runtime.NewID()
				sp := probeSpec(t, r, id)
				sp.Args = args
				if err := r.Create(ctx, sp); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { r.Delete(context.Background(), id) })
				return id
			}

			late := create("/bin/sh", "-c", "sleep 0.3; exec "+AgentPath)
			c, err := r.DialWait(ctx, late)
			if err != nil {
				t.Fatalf("DialWait to an init that listens late: %v", err)
			}
			p := &probeConn{c: c, sc: newScanner(c)}
			if got := p.sh(t, "echo ok"); got.Out != "ok\n" {
				t.Fatalf("probe over DialWait: %+v", got)
			}
			c.Close()

			gone := create("/bin/sh", "-c", "sleep 0.3")
			if c, err := r.DialWait(ctx, gone); !errors.Is(err, errdefs.ErrNotFound) || ctx.Err() != nil {
				if err == nil {
					c.Close()
				}
				t.Fatalf("DialWait to an init that exits: %v (deadline: %v), want not_found before the deadline", err, ctx.Err())
			}
		})
	}
}

// TestChannelPlant (runsc): with the channel directory unsealed (as if the
// host had not sealed it yet), a socket the sandbox replaced with a
// symlink is not followed (the host socket it points to sees nothing),
// and a listener that is no process of the sandbox is refused.
func TestChannelPlant(t *testing.T) {
	r := newRuntime(t, KindRunsc)
	id, p := startProbe(t, r, runtime.Limits{})
	ctx := context.Background()
	dir := r.chanDir(id)
	if got := p.sh(t, "touch /run/sandlot/x"); got.Code == 0 {
		t.Fatal("the channel directory is writable once sealed")
	}
	unseal := func() {
		t.Helper()
		if err := unix.Mount("", dir, "", unix.MS_REMOUNT|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("symlink", func(t *testing.T) {
		unseal()
		host := filepath.Join(t.TempDir(), "host.sock")
		l, err := net.Listen("unix", host)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		if got := p.sh(t, "cd /run/sandlot && ln -s "+host+" l && mv -f l agent.sock && echo ok"); got.Out != "ok\n" {
			t.Fatalf("plant: %+v", got)
		}
		if c, err := r.Dial(ctx, id); err == nil {
			c.Close()
			t.Fatal("Dial followed the planted symlink")
		}
		if n := pending(t, l); n != 0 {
			t.Errorf("the host socket the symlink points to got %d connections", n)
		}
	})

	t.Run("foreign listener", func(t *testing.T) {
		// A sandbox whose init listens elsewhere, so the channel's name is
		// free and the directory unsealed; a host process that is no
		// process of the sandbox listens there.
		id := runtime.NewID()
		sp := probeSpec(t, r, id)
		sp.Env[probeAddrEnv] = filepath.Join(filepath.Dir(runscChannel), "control.sock")
		if err := r.Create(ctx, sp); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.Delete(context.Background(), id) })
		sock := filepath.Join(r.chanDir(id), filepath.Base(runscChannel))
		l, err := net.Listen("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		if c, err := r.Dial(ctx, id); !errors.Is(err, errdefs.ErrPermissionDenied) {
			if err == nil {
				c.Close()
			}
			t.Fatalf("Dial to a listener outside the sandbox: %v, want permission_denied", err)
		}
	})
}

// pending accepts and counts the connections queued on l. A connect
// returns only once its connection is queued, so none is missed.
func pending(t *testing.T, l net.Listener) int {
	t.Helper()
	n := 0
	for {
		l.(*net.UnixListener).SetDeadline(time.Now().Add(50 * time.Millisecond))
		c, err := l.Accept()
		if err != nil {
			return n
		}
		c.Close()
		n++
	}
}

// dialAbstract connects to an abstract socket in sandbox id's network
// namespace with no check of the peer.
func dialAbstract(t *testing.T, ctx context.Context, r *Runtime, id, name string) net.Conn {
	t.Helper()
	for {
		_, pidfd, err := r.initProcess(id)
		if err == nil {
			fd, err := socketIn(pidfd)
			unix.Close(pidfd)
			if err != nil {
				t.Fatal(err)
			}
			if err = unix.Connect(fd, &unix.SockaddrUnix{Name: name}); err == nil {
				c, err := fileConn(fd)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { c.Close() })
				return c
			}
			unix.Close(fd)
		}
		if ctx.Err() != nil {
			t.Fatalf("dial %s in %s: %v", name, id, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
