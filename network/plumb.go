package network

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/vishvananda/netlink"
	vnetns "github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/internal/logkey"
	"github.com/sandlot/sandlot/network/ca"
	"github.com/sandlot/sandlot/network/netns"
	"github.com/sandlot/sandlot/network/nft"
	"github.com/sandlot/sandlot/network/policy"
)

// Start takes the host lock (one started Manager per NetnsDir: another
// daemon's holds it and Start fails with ErrFailedPrecondition, changing
// nothing), prepares the host and takes over what a previous daemon left:
// every recorded network whose sandbox keep accepts (nil keeps all) and
// whose namespace and veth still exist is restored; the others, and any
// veth, namespace or record nobody owns, are removed. The nftables table
// is rebuilt from the restored networks in one transaction. It returns
// the restored networks, so the caller can register their policies with
// the proxy and the resolver again.
func (m *Manager) Start(ctx context.Context, keep func(sandboxID string) bool) (_ []*Net, err error) {
	for _, d := range []string{m.cfg.StateDir, m.cfg.NetnsDir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("network: %w", err)
		}
	}
	// Before anything that changes the host: another daemon's networks
	// are not ours to rebuild or sweep.
	if m.lock, err = lockHost(m.cfg.NetnsDir); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			m.unlock()
		}
	}()
	// An OCI runtime started in a mount namespace of its own (crun on
	// hybrid cgroup hosts) must see the namespaces mounted here later.
	if err := netns.ShareDir(m.cfg.NetnsDir); err != nil {
		return nil, fmt.Errorf("network: %w", err)
	}
	recs, bad, err := m.readRecords()
	if err != nil {
		return nil, fmt.Errorf("network: records: %w", err)
	}
	for _, p := range bad {
		os.Remove(p)
	}
	var restored []*Net
	var drop []record
	for _, r := range recs {
		n, err := m.restore(r)
		if err == nil && keep != nil && !keep(r.SandboxID) {
			err = errors.New("sandbox no longer exists")
		}
		if err != nil {
			m.log.Info("network: removing a sandbox network left by a previous run", logkey.Sandbox, r.SandboxID, logkey.Reason, err.Error())
			drop = append(drop, r)
			continue
		}
		restored = append(restored, n)
	}
	m.mu.Lock()
	for _, r := range recs { // a dropped network's address is not reused at once either
		if r.Slot >= m.next {
			m.next = r.Slot + 1
		}
	}
	for _, n := range restored {
		m.byID[n.SandboxID] = n
		m.bySlot[n.slot] = n.SandboxID
		m.byAddr[n.Addr] = n
	}
	if m.next > m.last {
		m.next = m.first
	}
	m.mu.Unlock()

	sbs := make([]nft.Sandbox, 0, len(restored))
	for _, n := range restored {
		sbs = append(sbs, m.kernel(n))
	}
	if err := m.tab.Install(sbs); err != nil {
		return nil, err
	}
	for _, r := range drop {
		m.cleanup(r.Slot, r.SandboxID, r.Path)
	}
	m.sweep(restored)
	if m.cfg.Spares > 0 {
		m.stop, m.done = make(chan struct{}), make(chan struct{})
		go m.fill()
	}
	return restored, nil
}

func (m *Manager) restore(r record) (*Net, error) {
	if r.Policy == nil {
		return nil, errors.New("record without a policy")
	}
	if r.Path != m.nsPath(r.Slot) || !netns.IsNetNS(r.Path) {
		return nil, errors.New("network namespace is gone")
	}
	if _, err := netlink.LinkByName(m.iface(r.Slot)); err != nil {
		return nil, fmt.Errorf("veth %s is gone", m.iface(r.Slot))
	}
	c, err := ca.Parse([]byte(r.CACert), []byte(r.CAKey))
	if err != nil {
		return nil, err
	}
	return &Net{SandboxID: r.SandboxID, Path: r.Path, Addr: m.addr(r.Slot), Gateway: m.gateway,
		Iface: m.iface(r.Slot), Policy: r.Policy, CA: c, slot: r.Slot}, nil
}

// sweep removes veths and namespaces that no restored network owns.
func (m *Manager) sweep(restored []*Net) {
	owned := map[string]bool{}
	for _, n := range restored {
		owned[n.Iface] = true
		owned[n.Path] = true
	}
	if links, err := netlink.LinkList(); err == nil {
		for _, l := range links {
			name := l.Attrs().Name
			if _, ok := m.slotOfIface(name); ok && !owned[name] && l.Type() == "veth" {
				m.log.Info("network: removing an orphaned veth", "iface", name)
				netlink.LinkDel(l)
			}
		}
	}
	if ents, err := os.ReadDir(m.cfg.NetnsDir); err == nil {
		for _, e := range ents {
			p := filepath.Join(m.cfg.NetnsDir, e.Name())
			if !owned[p] {
				m.log.Info("network: removing an orphaned network namespace", logkey.Path, p)
				netns.Remove(p)
			}
		}
	}
}

// Setup builds the network of a sandbox under policy p. The caller puts
// Net.Path into the OCI spec, Net.ResolvConf() into /etc/resolv.conf and
// Net.CA.CertPEM() into the trust store, and registers the sandbox with
// the proxy and the resolver. On error nothing is left behind.
func (m *Manager) Setup(ctx context.Context, sandboxID string, p *policy.Effective) (*Net, error) {
	if err := ValidID(sandboxID); err != nil {
		return nil, err
	}
	if p == nil {
		return nil, fmt.Errorf("network %s: no policy: %w", sandboxID, errdefs.ErrInvalidArgument)
	}
	m.mu.Lock()
	if _, ok := m.byID[sandboxID]; ok {
		m.mu.Unlock()
		return nil, fmt.Errorf("network of sandbox %s: %w", sandboxID, errdefs.ErrAlreadyExists)
	}
	var sp *spare
	var slot uint32
	if k := len(m.spares); k > 0 {
		sp = &m.spares[k-1]
		m.spares = m.spares[:k-1]
		slot = sp.slot
	} else {
		var err error
		if slot, err = m.allocate(); err != nil {
			m.mu.Unlock()
			return nil, err
		}
		m.bySlot[slot] = ""
	}
	m.mu.Unlock()

	n := &Net{SandboxID: sandboxID, Path: m.nsPath(slot), Addr: m.addr(slot),
		Gateway: m.gateway, Iface: m.iface(slot), Policy: p, slot: slot}
	var err error
	if sp != nil {
		m.wantSpare()
		n.CA = sp.ca
		err = m.finish(n)
	} else {
		err = m.build(ctx, n)
	}
	if err != nil {
		m.cleanup(slot, sandboxID, n.Path)
		m.mu.Lock()
		delete(m.bySlot, slot)
		m.mu.Unlock()
		return nil, fmt.Errorf("network of sandbox %s: %w", sandboxID, err)
	}
	m.mu.Lock()
	m.byID[sandboxID] = n
	m.bySlot[slot] = sandboxID
	m.byAddr[n.Addr] = n
	m.mu.Unlock()
	return n, nil
}

// nsPath is where a slot's namespace is mounted. It is named after the
// slot, not the sandbox, so a network can be built before its sandbox is
// known (spares).
func (m *Manager) nsPath(slot uint32) string { return filepath.Join(m.cfg.NetnsDir, m.iface(slot)) }

// build makes a network from nothing: the kernel side and, meanwhile,
// the CA; then the rules and the record.
func (m *Manager) build(ctx context.Context, n *Net) error {
	type caResult struct {
		ca  *ca.CA
		err error
	}
	caDone := make(chan caResult, 1)
	go func() {
		c, err := ca.New(n.SandboxID, m.cfg.CAValidity)
		caDone <- caResult{c, err}
	}()
	if err := m.plumb(n); err != nil {
		<-caDone
		return err
	}
	r := <-caDone
	if r.err != nil {
		return r.err
	}
	n.CA = r.ca
	return m.finish(n)
}

// finish gives a plumbed network its rules and its record.
func (m *Manager) finish(n *Net) error {
	if err := m.tab.Add(m.kernel(n)); err != nil {
		return err
	}
	return m.writeRecord(n)
}

// plumb builds the kernel side but the rules: namespace, veth, addresses
// and routes.
func (m *Manager) plumb(n *Net) error {
	if err := netns.New(n.Path); err != nil {
		return err
	}
	nsh, err := vnetns.GetFromPath(n.Path)
	if err != nil {
		return err
	}
	defer nsh.Close()
	la := netlink.NewLinkAttrs()
	la.Name = n.Iface
	veth := &netlink.Veth{LinkAttrs: la, PeerName: "eth0", PeerNamespace: netlink.NsFd(nsh)}
	if err := netlink.LinkAdd(veth); err != nil {
		return fmt.Errorf("veth %s: %w", n.Iface, err)
	}
	host, err := netlink.LinkByName(n.Iface)
	if err != nil {
		return err
	}
	// No IPv6 on the veth: the sandbox network is IPv4 only, and a
	// link-local address would only be one more way to the host.
	_ = netlink.LinkSetIP6AddrGenMode(host, 1)
	if err := netlink.AddrAdd(host, &netlink.Addr{IPNet: ipnet(netip.PrefixFrom(m.gateway, 32))}); err != nil {
		return fmt.Errorf("gateway address on %s: %w", n.Iface, err)
	}
	if err := netlink.LinkSetUp(host); err != nil {
		return err
	}
	if err := netlink.RouteAdd(&netlink.Route{LinkIndex: host.Attrs().Index, Dst: ipnet(netip.PrefixFrom(n.Addr, 32)),
		Scope: netlink.SCOPE_LINK, Src: net.IP(m.gateway.AsSlice())}); err != nil {
		return fmt.Errorf("route to %s: %w", n.Addr, err)
	}
	return m.inside(nsh, n)
}

// inside configures the sandbox's side: loopback up, eth0 with the
// sandbox's /32, and a default route to the gateway.
func (m *Manager) inside(nsh vnetns.NsHandle, n *Net) error {
	h, err := netlink.NewHandleAt(nsh, unix.NETLINK_ROUTE)
	if err != nil {
		return err
	}
	defer h.Close()
	lo, err := h.LinkByName("lo")
	if err != nil {
		return err
	}
	if err := h.LinkSetUp(lo); err != nil {
		return err
	}
	eth, err := h.LinkByName("eth0")
	if err != nil {
		return err
	}
	_ = h.LinkSetIP6AddrGenMode(eth, 1)
	if err := h.AddrAdd(eth, &netlink.Addr{IPNet: ipnet(netip.PrefixFrom(n.Addr, 32))}); err != nil {
		return fmt.Errorf("sandbox address: %w", err)
	}
	if err := h.LinkSetUp(eth); err != nil {
		return err
	}
	if err := h.RouteAdd(&netlink.Route{LinkIndex: eth.Attrs().Index, Gw: net.IP(m.gateway.AsSlice()),
		Flags: int(netlink.FLAG_ONLINK)}); err != nil {
		return fmt.Errorf("sandbox default route: %w", err)
	}
	return nil
}

// Update applies a new policy to a running sandbox's network (the kernel
// part in one transaction) and returns the updated Net; the caller
// registers the new policy with the proxy and the resolver.
func (m *Manager) Update(ctx context.Context, sandboxID string, p *policy.Effective) (*Net, error) {
	if p == nil {
		return nil, fmt.Errorf("network %s: no policy: %w", sandboxID, errdefs.ErrInvalidArgument)
	}
	m.mu.Lock()
	old, ok := m.byID[sandboxID]
	m.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("network of sandbox %s: %w", sandboxID, errdefs.ErrNotFound)
	}
	n := *old
	n.Policy = p
	if err := m.tab.Replace(m.kernel(old), m.kernel(&n)); err != nil {
		return nil, err
	}
	if err := m.writeRecord(&n); err != nil {
		return nil, err
	}
	m.mu.Lock()
	m.byID[sandboxID] = &n
	m.byAddr[n.Addr] = &n
	m.mu.Unlock()
	return &n, nil
}

// Teardown removes a sandbox's network: its rules, veth, namespace mount
// and record. Run it after the sandbox's processes are gone (a process
// still inside keeps the namespace alive, without the veth). A sandbox
// without a network is not an error.
func (m *Manager) Teardown(ctx context.Context, sandboxID string) error {
	m.mu.Lock()
	n, ok := m.byID[sandboxID]
	if ok {
		delete(m.byID, sandboxID)
		delete(m.byAddr, n.Addr)
	}
	m.mu.Unlock()
	if !ok {
		return nil
	}
	err := m.cleanup(n.slot, sandboxID, n.Path)
	m.mu.Lock()
	delete(m.bySlot, n.slot)
	m.mu.Unlock()
	return err
}

// cleanup removes whatever exists of a slot's network, in the reverse
// order of build.
func (m *Manager) cleanup(slot uint32, sandboxID, path string) error {
	var errs []error
	if err := m.tab.Remove(m.kernel(&Net{Iface: m.iface(slot), Addr: m.addr(slot), slot: slot, Policy: &policy.Effective{}})); err != nil {
		errs = append(errs, err)
	}
	if l, err := netlink.LinkByName(m.iface(slot)); err == nil {
		if err := netlink.LinkDel(l); err != nil {
			errs = append(errs, fmt.Errorf("delete veth: %w", err))
		}
	}
	if path != "" {
		if err := netns.Remove(path); err != nil {
			errs = append(errs, err)
		}
	}
	if err := os.Remove(m.recordPath(slot)); err != nil && !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		m.log.Warn("network: teardown incomplete", logkey.Sandbox, sandboxID, logkey.Err, errors.Join(errs...).Error())
	}
	return errors.Join(errs...)
}

// Purge tears down every sandbox network and deletes the table: for
// uninstalling, and for tests.
func (m *Manager) Purge(ctx context.Context) error {
	defer m.unlock()
	m.stopSpares()
	m.mu.Lock()
	ids := make([]string, 0, len(m.byID))
	for id := range m.byID {
		ids = append(ids, id)
	}
	m.mu.Unlock()
	var errs []error
	for _, id := range ids {
		errs = append(errs, m.Teardown(ctx, id))
	}
	m.sweep(nil)
	errs = append(errs, m.tab.Delete(), netns.UnshareDir(m.cfg.NetnsDir))
	return errors.Join(errs...)
}

func ipnet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: net.IP(p.Addr().AsSlice()), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}

// hostAddrs tells the daemon's own addresses by asking the kernel how it
// would route to an address (RTM_GETROUTE): a local or broadcast route
// means the host itself. Unlike a list of the interfaces' addresses, the
// answer cannot be stale or cut short by a concurrent change. Answers are
// cached a second.
type hostAddrs struct {
	mu    sync.Mutex
	cache map[netip.Addr]hostAnswer
}

type hostAnswer struct {
	local bool
	at    time.Time
}

func (h *hostAddrs) has(a netip.Addr) bool {
	now := time.Now()
	h.mu.Lock()
	if ans, ok := h.cache[a]; ok && now.Sub(ans.at) < time.Second {
		h.mu.Unlock()
		return ans.local
	}
	h.mu.Unlock()
	local := false
	if routes, err := netlink.RouteGet(net.IP(a.AsSlice())); err == nil {
		for _, r := range routes {
			local = local || r.Type == unix.RTN_LOCAL || r.Type == unix.RTN_BROADCAST
		}
	}
	h.mu.Lock()
	if h.cache == nil || len(h.cache) > 4096 {
		h.cache = map[netip.Addr]hostAnswer{}
	}
	h.cache[a] = hostAnswer{local, now}
	h.mu.Unlock()
	return local
}
