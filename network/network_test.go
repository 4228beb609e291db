package network

import (
	"context"
	"net"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sandlot/sandlot/network/netns"
	"github.com/sandlot/sandlot/network/nettest"
	"github.com/sandlot/sandlot/network/policy"
	"github.com/vishvananda/netlink"
	vnetns "github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

func TestMain(m *testing.M) { nettest.Main(m) }

type dirs struct{ state, netns string }

func newDirs(t testing.TB) dirs {
	return dirs{state: t.TempDir(), netns: t.TempDir()}
}

func newManager(t testing.TB, d dirs, mut ...func(*Config)) *Manager {
	t.Helper()
	cfg := Config{StateDir: d.state, NetnsDir: d.netns}
	for _, f := range mut {
		f(&cfg)
	}
	m, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Start(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Purge(context.Background()) })
	return m
}

var (
	noneP      = &policy.Effective{Policy: policy.Policy{Mode: policy.None}}
	allowlistP = &policy.Effective{Policy: policy.Policy{Mode: policy.Allowlist, Allow: []policy.Rule{policy.MustRule("example.test")}}}
	openP      = &policy.Effective{Policy: policy.Policy{Mode: policy.Open}}
)

// redirected listens where the kernel sends a sandbox's TCP and reports
// the original destination of each connection.
func redirected(t *testing.T, m *Manager) <-chan netip.AddrPort {
	t.Helper()
	l, err := netns.Listen(context.Background(), "", "tcp4", m.ProxyAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	out := make(chan netip.AddrPort, 16)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			out <- originalDst(t, c)
			c.Close()
		}
	}()
	return out
}

func originalDst(t *testing.T, c net.Conn) netip.AddrPort {
	raw, err := c.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Error(err)
		return netip.AddrPort{}
	}
	var ap netip.AddrPort
	raw.Control(func(fd uintptr) {
		mreq, err := unix.GetsockoptIPv6Mreq(int(fd), unix.SOL_IP, unix.SO_ORIGINAL_DST)
		if err != nil {
			t.Error(err)
			return
		}
		b := mreq.Multiaddr
		ap = netip.AddrPortFrom(netip.AddrFrom4([4]byte{b[4], b[5], b[6], b[7]}), uint16(b[2])<<8|uint16(b[3]))
	})
	return ap
}

// dialFrom connects from inside n. Expected failures (a drop) end at the
// short timeout; successes get a long one, for a loaded machine.
func dialFrom(n *Net, addr string) error { return dialFromWithin(n, addr, 10*time.Second) }

func dialFromWithin(n *Net, addr string, d time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	c, err := netns.Dialer(n.Path)(ctx, "tcp4", addr)
	if err == nil {
		c.Close()
	}
	return err
}

// udpFrom sends one datagram from inside n, optionally from source.
func udpFrom(t *testing.T, n *Net, source netip.Addr, to string) {
	t.Helper()
	err := netns.Do(n.Path, func() error {
		var laddr *net.UDPAddr
		if source.IsValid() {
			laddr = &net.UDPAddr{IP: net.IP(source.AsSlice())}
		}
		raddr, err := net.ResolveUDPAddr("udp4", to)
		if err != nil {
			return err
		}
		c, err := net.DialUDP("udp4", laddr, raddr)
		if err != nil {
			return err
		}
		defer c.Close()
		_, err = c.Write([]byte("hello"))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

func udpListen(t *testing.T, addr string) <-chan string {
	t.Helper()
	pc, err := netns.ListenPacket(context.Background(), "", "udp4", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	out := make(chan string, 16)
	go func() {
		buf := make([]byte, 64)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			out <- from.String() + " " + string(buf[:n])
		}
	}()
	return out
}

func expectNone[T any](t *testing.T, ch <-chan T, what string) {
	t.Helper()
	select {
	case v := <-ch:
		t.Errorf("%s: got %v, want nothing", what, v)
	case <-time.After(300 * time.Millisecond):
	}
}

func expectOne[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(5 * time.Second):
		t.Fatalf("%s: nothing arrived", what)
	}
	var zero T
	return zero
}

func TestSetupBuildsTheNetwork(t *testing.T) {
	nettest.Require(t)
	m := newManager(t, newDirs(t))
	n, err := m.Setup(context.Background(), "sb-1", allowlistP)
	if err != nil {
		t.Fatal(err)
	}
	if !netns.IsNetNS(n.Path) {
		t.Fatalf("%s is not a network namespace", n.Path)
	}
	if !m.cfg.Pool.Contains(n.Addr) || n.Addr == m.Gateway() || n.Gateway != m.Gateway() {
		t.Errorf("address %s, gateway %s (pool %s)", n.Addr, n.Gateway, m.cfg.Pool)
	}
	host, err := netlink.LinkByName(n.Iface)
	if err != nil {
		t.Fatal(err)
	}
	addrs, _ := netlink.AddrList(host, netlink.FAMILY_ALL)
	if len(addrs) != 1 || addrs[0].IPNet.String() != m.Gateway().String()+"/32" {
		t.Errorf("host side addresses %v, want only the gateway (no IPv6 link-local either)", addrs)
	}
	nsh, _ := vnetns.GetFromPath(n.Path)
	defer nsh.Close()
	h, err := netlink.NewHandleAt(nsh)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	eth, err := h.LinkByName("eth0")
	if err != nil {
		t.Fatal(err)
	}
	addrs, _ = h.AddrList(eth, netlink.FAMILY_ALL)
	if len(addrs) != 1 || addrs[0].IPNet.String() != n.Addr.String()+"/32" {
		t.Errorf("sandbox addresses %v, want %s/32 only", addrs, n.Addr)
	}
	routes, _ := h.RouteList(nil, netlink.FAMILY_V4)
	if len(routes) != 1 || !routes[0].Gw.Equal(net.IP(m.Gateway().AsSlice())) {
		t.Errorf("sandbox routes %v, want one default via %s", routes, m.Gateway())
	}
	if fi, err := os.Stat(m.recordPath(n.slot)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("record: %v, %v", fi, err)
	}
	if string(n.ResolvConf()) != "nameserver "+m.Gateway().String()+"\noptions edns0 trust-ad\n" {
		t.Errorf("resolv.conf %q", n.ResolvConf())
	}
	if got, ok := m.BySource(n.Addr); !ok || got != n {
		t.Error("BySource does not find the sandbox")
	}
	if why := m.Internal(n.Addr); why != "sandbox network" {
		t.Errorf("Internal(sandbox) = %q", why)
	}
	if why := m.Internal(netip.MustParseAddr("127.0.0.1")); why != "host address" {
		t.Errorf("Internal(127.0.0.1) = %q", why)
	}
}

func TestKernelRules(t *testing.T) {
	nettest.Require(t)
	m := newManager(t, newDirs(t))
	ctx := context.Background()
	proxied := redirected(t, m)
	dns := udpListen(t, m.DNSAddr().String())
	hostUDP := udpListen(t, "0.0.0.0:9999")

	a, err := m.Setup(ctx, "sb-a", allowlistP)
	if err != nil {
		t.Fatal(err)
	}
	b, err := m.Setup(ctx, "sb-b", noneP)
	if err != nil {
		t.Fatal(err)
	}

	t.Run("tcp goes to the proxy with its destination", func(t *testing.T) {
		for _, dst := range []string{"203.0.113.10:443", "169.254.169.254:80", b.Addr.String() + ":8080", m.Gateway().String() + ":22"} {
			if err := dialFrom(a, dst); err != nil {
				t.Fatalf("dial %s: %v", dst, err)
			}
			if got := expectOne(t, proxied, dst); got.String() != dst {
				t.Errorf("proxy saw original destination %s, want %s", got, dst)
			}
		}
	})
	t.Run("dns goes to the resolver", func(t *testing.T) {
		udpFrom(t, a, netip.Addr{}, "9.9.9.9:53")
		if got := expectOne(t, dns, "dns"); !strings.HasPrefix(got, a.Addr.String()+":") {
			t.Errorf("resolver got %q, want it from %s", got, a.Addr)
		}
	})
	t.Run("other udp to the host is dropped", func(t *testing.T) {
		udpFrom(t, a, netip.Addr{}, m.Gateway().String()+":9999")
		expectNone(t, hostUDP, "udp to the host")
	})
	t.Run("udp to another sandbox is dropped", func(t *testing.T) {
		var got <-chan string
		netns.Do(b.Path, func() error {
			pc, err := net.ListenPacket("udp4", b.Addr.String()+":9999")
			if err != nil {
				return err
			}
			t.Cleanup(func() { pc.Close() })
			ch := make(chan string, 1)
			go func() {
				buf := make([]byte, 16)
				if n, _, err := pc.ReadFrom(buf); err == nil {
					ch <- string(buf[:n])
				}
			}()
			got = ch
			return nil
		})
		udpFrom(t, a, netip.Addr{}, b.Addr.String()+":9999")
		expectNone(t, got, "udp from one sandbox to another")
	})
	t.Run("mode none opens nothing", func(t *testing.T) {
		if err := dialFromWithin(b, "203.0.113.10:443", 400*time.Millisecond); err == nil {
			t.Error("a sandbox in mode none connected out")
		}
		udpFrom(t, b, netip.Addr{}, "9.9.9.9:53")
		expectNone(t, dns, "dns from mode none")
		expectNone(t, proxied, "tcp from mode none")
	})
	t.Run("a spoofed source is dropped", func(t *testing.T) {
		// A sandbox root with NET_ADMIN in its namespace adds a neighbour's
		// address; its packets must not pass as the neighbour's.
		spoof := b.Addr
		nsh, _ := vnetns.GetFromPath(a.Path)
		defer nsh.Close()
		h, _ := netlink.NewHandleAt(nsh)
		defer h.Close()
		eth, _ := h.LinkByName("eth0")
		if err := h.AddrAdd(eth, &netlink.Addr{IPNet: ipnet(netip.PrefixFrom(spoof, 32))}); err != nil {
			t.Fatal(err)
		}
		defer h.AddrDel(eth, &netlink.Addr{IPNet: ipnet(netip.PrefixFrom(spoof, 32))})
		udpFrom(t, a, spoof, "9.9.9.9:53")
		expectNone(t, dns, "dns from a spoofed source")
	})
	t.Run("ports are reachable in every mode", func(t *testing.T) {
		for _, n := range []*Net{a, b} {
			l, err := netns.Listen(ctx, n.Path, "tcp4", n.Addr.String()+":8080")
			if err != nil {
				t.Fatal(err)
			}
			go func() {
				if c, err := l.Accept(); err == nil {
					c.Write([]byte("hi"))
					c.Close()
				}
			}()
			c, err := m.DialSandbox(ctx, "tcp4", n.Addr.String()+":8080")
			if err != nil {
				t.Errorf("%s: dial the sandbox's port: %v", n.SandboxID, err)
			} else {
				buf := make([]byte, 2)
				if _, err := c.Read(buf); err != nil || string(buf) != "hi" {
					t.Errorf("%s: read %q, %v", n.SandboxID, buf, err)
				}
				c.Close()
			}
			l.Close()
		}
	})
	t.Run("update changes the mode at once", func(t *testing.T) {
		if _, err := m.Update(ctx, b.SandboxID, allowlistP); err != nil {
			t.Fatal(err)
		}
		if err := dialFrom(b, "203.0.113.10:443"); err != nil {
			t.Fatal(err)
		}
		expectOne(t, proxied, "tcp after update")
		if _, err := m.Update(ctx, b.SandboxID, noneP); err != nil {
			t.Fatal(err)
		}
		if err := dialFromWithin(b, "203.0.113.10:443", 400*time.Millisecond); err == nil {
			t.Error("connected after the update back to none")
		}
	})
}
