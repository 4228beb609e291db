package network

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/sandlot/sandlot/errdefs"
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
			c, err := net.DialTimeout("tcp4", n.Addr.String()+":8080", 2*time.Second)
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

// snapshot is every trace a sandbox network leaves on the host.
type snapshot struct {
	Links, Mounts, Files, Chains, Sets, Guards, Fwds []string
	Rules                                            map[string]int
}

func takeSnapshot(t *testing.T, m *Manager) snapshot {
	t.Helper()
	var s snapshot
	links, err := netlink.LinkList()
	for i := 0; errors.Is(err, netlink.ErrDumpInterrupted) && i < 10; i++ {
		links, err = netlink.LinkList() // a concurrent change (the spare filler)
	}
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range links {
		if strings.HasPrefix(l.Attrs().Name, m.cfg.IfPrefix) {
			s.Links = append(s.Links, l.Attrs().Name)
		}
	}
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(mi), "\n") {
		if f := strings.Fields(line); len(f) > 4 && strings.HasPrefix(f[4], m.cfg.NetnsDir) {
			s.Mounts = append(s.Mounts, f[4])
		}
	}
	for _, dir := range []string{m.cfg.StateDir, m.cfg.NetnsDir} {
		ents, _ := os.ReadDir(dir)
		for _, e := range ents {
			s.Files = append(s.Files, filepath.Join(dir, e.Name()))
		}
	}
	st, err := m.tab.State()
	if err != nil {
		t.Fatal(err)
	}
	s.Chains, s.Sets, s.Guards, s.Fwds, s.Rules = st.Chains, st.Sets, st.Guards, st.Fwds, st.Rules
	for _, l := range [][]string{s.Links, s.Mounts, s.Files, s.Chains, s.Sets, s.Guards, s.Fwds} {
		slices.Sort(l)
	}
	return s
}

func TestNothingLeftBehind(t *testing.T) {
	nettest.Require(t)
	m := newManager(t, newDirs(t))
	ctx := context.Background()
	// A long-lived neighbour shares the gateway address with every veth
	// that comes and goes; it must keep working throughout.
	keep, err := m.Setup(ctx, "neighbour", allowlistP)
	if err != nil {
		t.Fatal(err)
	}
	proxied := redirected(t, m)
	before := takeSnapshot(t, m)
	policies := []*policy.Effective{noneP, allowlistP, openP}
	for i := range 200 {
		n, err := m.Setup(ctx, fmt.Sprintf("cycle-%d", i), policies[i%3])
		if err != nil {
			t.Fatalf("cycle %d: %v", i, err)
		}
		if i%50 == 0 {
			if _, err := m.Update(ctx, n.SandboxID, policies[(i+1)%3]); err != nil {
				t.Fatalf("cycle %d: update: %v", i, err)
			}
		}
		if err := m.Teardown(ctx, n.SandboxID); err != nil {
			t.Fatalf("cycle %d: teardown: %v", i, err)
		}
	}
	after := takeSnapshot(t, m)
	if diff := cmp.Diff(before, after); diff != "" {
		t.Errorf("200 create/delete cycles left traces (-before +after):\n%s", diff)
	}
	if err := dialFrom(keep, "203.0.113.10:443"); err != nil {
		t.Fatalf("the neighbour lost its network: %v", err)
	}
	expectOne(t, proxied, "neighbour's connection")
	if err := m.Teardown(ctx, keep.SandboxID); err != nil {
		t.Fatal(err)
	}
	last := takeSnapshot(t, m)
	if len(last.Links)+len(last.Mounts)+len(last.Files)+len(last.Guards)+len(last.Fwds) != 0 || len(last.Sets) != 3 || len(last.Chains) != 5 {
		t.Errorf("after the last teardown: %+v", last)
	}
}

func TestRestart(t *testing.T) {
	nettest.Require(t)
	d := newDirs(t)
	ctx := context.Background()
	m1, err := New(Config{StateDir: d.state, NetnsDir: d.netns})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m1.Start(ctx, nil); err != nil {
		t.Fatal(err)
	}
	var nets []*Net
	for _, sb := range []struct {
		id string
		p  *policy.Effective
	}{{"sb-a", allowlistP}, {"sb-b", openP}, {"sb-c", noneP}} {
		n, err := m1.Setup(ctx, sb.id, sb.p)
		if err != nil {
			t.Fatal(err)
		}
		nets = append(nets, n)
	}
	a, b, c := nets[0], nets[1], nets[2]
	// Leftovers of a crash between two steps: a veth and a namespace
	// nobody recorded.
	if err := netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "sl-fff0"}, PeerName: "sl-fff0p"}); err != nil {
		t.Fatal(err)
	}
	ghost := filepath.Join(d.netns, "ghost")
	if err := netns.New(ghost); err != nil {
		t.Fatal(err)
	}

	// The daemon restarts (m1 is dropped without a word); sb-c's sandbox
	// did not survive.
	m2, err := New(Config{StateDir: d.state, NetnsDir: d.netns})
	if err != nil {
		t.Fatal(err)
	}
	restored, err := m2.Start(ctx, func(id string) bool { return id != "sb-c" })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m2.Purge(ctx) })
	got := map[string]*Net{}
	for _, n := range restored {
		got[n.SandboxID] = n
	}
	for _, want := range []*Net{a, b} {
		n := got[want.SandboxID]
		if n == nil {
			t.Fatalf("%s not restored: %v", want.SandboxID, restored)
		}
		if n.Addr != want.Addr || n.Path != want.Path || n.Iface != want.Iface || n.Policy.Mode() != want.Policy.Mode() {
			t.Errorf("restored %+v, want %+v", n, want)
		}
		if string(n.CA.CertPEM()) != string(want.CA.CertPEM()) {
			t.Errorf("%s: the CA changed across the restart (the sandbox trusts the old one)", n.SandboxID)
		}
	}
	if len(restored) != 2 {
		t.Errorf("restored %d networks, want 2", len(restored))
	}
	snap := takeSnapshot(t, m2)
	if diff := cmp.Diff([]string{a.Iface, b.Iface}, snap.Links); diff != "" {
		t.Errorf("veths after restart (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{a.Path, b.Path}, snap.Mounts); diff != "" {
		t.Errorf("namespaces after restart (-want +got):\n%s", diff)
	}
	if slices.Contains(snap.Guards, c.Iface) || len(snap.Guards) != 2 || len(snap.Fwds) != 1 {
		t.Errorf("rules after restart: guards %v fwds %v", snap.Guards, snap.Fwds)
	}
	if _, err := os.Stat(m2.recordPath(c.slot)); !os.IsNotExist(err) {
		t.Errorf("sb-c's record survived: %v", err)
	}
	proxied := redirected(t, m2)
	if err := dialFrom(a, "203.0.113.10:443"); err != nil {
		t.Fatal(err)
	}
	expectOne(t, proxied, "a restored sandbox's connection")
	d2, err := m2.Setup(ctx, "sb-d", noneP)
	if err != nil {
		t.Fatal(err)
	}
	if d2.Addr == a.Addr || d2.Addr == b.Addr || d2.Addr == c.Addr {
		t.Errorf("new sandbox got %s, an address in use or just freed", d2.Addr)
	}
}

func TestSetupErrors(t *testing.T) {
	nettest.Require(t)
	d := newDirs(t)
	m := newManager(t, d, func(c *Config) { c.Pool = netip.MustParsePrefix("10.253.0.0/29") })
	ctx := context.Background()
	before := takeSnapshot(t, m)
	for _, id := range []string{"", "../x", "a/b", strings.Repeat("x", 200), "."} {
		if _, err := m.Setup(ctx, id, noneP); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("Setup(%q) = %v, want invalid_argument", id, err)
		}
	}
	if _, err := m.Setup(ctx, "x", nil); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("Setup without a policy: %v", err)
	}
	var ids []string
	for i := range 5 { // a /29 has slots 2..6
		id := fmt.Sprintf("full-%d", i)
		if _, err := m.Setup(ctx, id, noneP); err != nil {
			t.Fatalf("slot %d: %v", i, err)
		}
		ids = append(ids, id)
	}
	if _, err := m.Setup(ctx, "full-0", noneP); !errors.Is(err, errdefs.ErrAlreadyExists) {
		t.Errorf("duplicate: %v", err)
	}
	if _, err := m.Setup(ctx, "one-too-many", noneP); !errors.Is(err, errdefs.ErrResourceExhausted) {
		t.Errorf("exhausted pool: %v", err)
	}
	// A failure half way (the namespace path is taken) leaves nothing.
	if err := m.Teardown(ctx, ids[0]); err != nil {
		t.Fatal(err)
	}
	m.mu.Lock()
	squatted := m.nsPath(m.next)
	m.mu.Unlock()
	os.WriteFile(squatted, nil, 0o600)
	if _, err := m.Setup(ctx, "squatter", noneP); err == nil {
		t.Fatal("Setup over an existing file succeeded")
	}
	os.Remove(squatted)
	for _, id := range ids[1:] {
		m.Teardown(ctx, id)
	}
	if diff := cmp.Diff(before, takeSnapshot(t, m)); diff != "" {
		t.Errorf("failed setups left traces (-before +after):\n%s", diff)
	}
	if _, err := m.Update(ctx, "nope", noneP); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("Update of an unknown sandbox: %v", err)
	}
	if err := m.Teardown(ctx, "nope"); err != nil {
		t.Errorf("Teardown of an unknown sandbox: %v", err)
	}
}

func TestSpares(t *testing.T) {
	nettest.Require(t)
	ctx := context.Background()
	m := newManager(t, newDirs(t), func(c *Config) { c.Spares = 2 })
	waitLinks := func(n int) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for len(takeSnapshot(t, m).Links) != n {
			if time.Now().After(deadline) {
				t.Fatalf("%d veths, want %d", len(takeSnapshot(t, m).Links), n)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitLinks(2) // the spares, built in the background
	if snap := takeSnapshot(t, m); len(snap.Guards) != 0 || len(snap.Files) != 2 {
		t.Errorf("spares must have no rules and no records: %+v", snap)
	}
	proxied := redirected(t, m)
	var nets []*Net
	for i := range 3 {
		n, err := m.Setup(ctx, fmt.Sprintf("sb-%d", i), allowlistP)
		if err != nil {
			t.Fatal(err)
		}
		nets = append(nets, n)
		if err := dialFrom(n, "203.0.113.10:443"); err != nil {
			t.Fatalf("sandbox %d: %v", i, err)
		}
		expectOne(t, proxied, "a sandbox on a spare network")
	}
	waitLinks(5) // three sandboxes, two spares again
	for _, n := range nets {
		if err := m.Teardown(ctx, n.SandboxID); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.Close(ctx); err != nil {
		t.Fatal(err)
	}
	snap := takeSnapshot(t, m)
	if len(snap.Links)+len(snap.Mounts)+len(snap.Files)+len(snap.Guards) != 0 {
		t.Errorf("after Close: %+v", snap)
	}
}
