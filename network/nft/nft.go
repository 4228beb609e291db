// Package nft owns sandlot's nftables table: one inet table (default
// "sandlot") in the daemon's network namespace that confines every
// sandbox veth. It talks netlink through github.com/google/nftables; no
// nft or iptables binary is involved.
//
// Base chains, shared by all sandboxes (IfPrefix is the veth name prefix,
// G the gateway address every host-side veth carries):
//
//	guard   filter prerouting -150  iifname vmap @guards (→ goto s-<key>); iifname IfPrefix* drop
//	dnat    nat prerouting -100     from IfPrefix*: udp/tcp dport 53 redirect :DNSPort; tcp redirect :ProxyPort
//	input   filter input 0          from IfPrefix*: ct established,related accept; to G:ProxyPort, G:DNSPort accept; drop
//	                                to G from anywhere else: drop
//	forward filter forward 0        iifname vmap @fwds (→ goto f-<key>); from IfPrefix*: drop; to IfPrefix*: only established
//	output  filter output 0         to IfPrefix*: ct established,related accept; meta mark RouteMark accept; drop
//	snat    nat postrouting 100     from IfPrefix* to anything else: masquerade
//
// Per sandbox (key is the sandbox's slot):
//
//	s-<key>  IPv4 only, source must be the sandbox's address; mode none drops every new connection
//	         but TCP to G:PortsRoutePort and DNS to G:53 (the daemon's ports route and its names)
//	f-<key>  mode open only: drop @d-<key> (its denylist), accept @r-<key> (ranges the operator
//	         opened), drop @forbidden4, drop tcp (it always goes to the proxy), accept
//
// Every change is one netlink batch, which the kernel applies atomically.
package nft

import (
	"fmt"
	"net/netip"
	"strings"
	"sync"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// Egress is what a sandbox may send, as far as the kernel is concerned.
type Egress int

const (
	// EgressNone drops every connection the sandbox opens but plain
	// HTTP and DNS to the gateway (the daemon's ports route and its
	// names, PortsRoutePort);
	// replies to connections into the sandbox (its served ports) pass.
	EgressNone Egress = iota
	// EgressProxy sends TCP to the proxy and DNS to the resolver; nothing
	// else leaves (mode allowlist).
	EgressProxy
	// EgressOpen is EgressProxy plus forwarding (masqueraded) of the
	// sandbox's other traffic (UDP, ICMP) to public addresses (mode open).
	EgressOpen
)

// PortsRoutePort is the gateway's port a sandbox in mode none may still
// open connections to: the proxy answers only the daemon's ports route
// there (egress.Proxy.SetPorts), refusing everything else as in mode
// none.
const PortsRoutePort = 80

// Config names the table and the fixed points of the rules.
type Config struct {
	Table     string       // default "sandlot"
	IfPrefix  string       // host-side veth name prefix, default "sl-"
	Gateway   netip.Addr   // the address every host-side veth carries
	Pool      netip.Prefix // the sandbox addresses (never reachable from a sandbox)
	ProxyPort uint16       // where TCP is redirected
	DNSPort   uint16       // where DNS is redirected
	// Forbidden lists the IPv4 ranges mode open never forwards to unless
	// the operator opened them (policy.Forbidden4); Pool is added.
	Forbidden []netip.Prefix
	// RouteMark is the socket mark (SO_MARK) of the daemon's own
	// connections to sandboxes (the ports route): the only new
	// connections from the host that reach a sandbox (default
	// DefaultRouteMark). Setting a mark takes CAP_NET_ADMIN, so no other
	// account on the host can forge it.
	RouteMark uint32
}

// DefaultRouteMark is Config.RouteMark's default ("sl" and 1). A host
// that routes by firewall marks must leave this value free.
const DefaultRouteMark = 0x736c0001

// Sandbox is one sandbox's kernel state.
type Sandbox struct {
	Key    string // short unique key, part of chain and set names
	Iface  string // host-side veth
	Addr   netip.Addr
	Egress Egress
	Deny   []netip.Prefix // mode open: forwarded traffic to these is dropped (IPv4 only)
	Reach  []netip.Prefix // mode open: internal ranges opened by the operator (IPv4 only)
}

// Table is the handle on the table. Its methods are safe for concurrent
// use; they serialize on one lock, since the nftables library keeps
// batch state per connection (and a set id counter per process).
type Table struct {
	cfg   Config
	table *nftables.Table
}

// batchMu serializes batch building across all Tables of the process: the
// nftables library allocates set ids from a package-level counter.
var batchMu sync.Mutex

// New checks cfg and returns a handle; it changes nothing in the kernel.
func New(cfg Config) (*Table, error) {
	if cfg.Table == "" {
		cfg.Table = "sandlot"
	}
	if cfg.IfPrefix == "" {
		cfg.IfPrefix = "sl-"
	}
	if !cfg.Gateway.Is4() || !cfg.Pool.Addr().Is4() || !cfg.Pool.Contains(cfg.Gateway) {
		return nil, fmt.Errorf("nft: gateway %s must be an IPv4 address in pool %s", cfg.Gateway, cfg.Pool)
	}
	if cfg.ProxyPort == 0 || cfg.DNSPort == 0 || cfg.ProxyPort == cfg.DNSPort {
		return nil, fmt.Errorf("nft: proxy port %d and DNS port %d must be set and differ", cfg.ProxyPort, cfg.DNSPort)
	}
	if cfg.RouteMark == 0 {
		cfg.RouteMark = DefaultRouteMark
	}
	if len(cfg.IfPrefix) > 8 {
		return nil, fmt.Errorf("nft: interface prefix %q is longer than 8 bytes", cfg.IfPrefix)
	}
	return &Table{cfg: cfg, table: &nftables.Table{Name: cfg.Table, Family: nftables.TableFamilyINet}}, nil
}

// Config returns the table's configuration (with defaults filled in).
func (t *Table) Config() Config { return t.cfg }

func (t *Table) conn() (*nftables.Conn, error) {
	return nftables.New()
}

// Install replaces the table (if any) with the base chains and sets plus
// every sandbox in sbs, in one transaction: packets see either the old
// table or the new one, never none.
func (t *Table) Install(sbs []Sandbox) error {
	batchMu.Lock()
	defer batchMu.Unlock()
	c, err := t.conn()
	if err != nil {
		return err
	}
	if tabs, err := c.ListTablesOfFamily(nftables.TableFamilyINet); err == nil {
		for _, tab := range tabs {
			if tab.Name == t.cfg.Table {
				c.DelTable(t.table)
			}
		}
	}
	c.AddTable(t.table)
	base, err := t.addBase(c)
	if err != nil {
		return err
	}
	for _, sb := range sbs {
		if err := t.addSandbox(c, base, sb); err != nil {
			return err
		}
	}
	if err := c.Flush(); err != nil {
		return fmt.Errorf("nft: install table %s: %w", t.cfg.Table, err)
	}
	return nil
}

// Delete removes the whole table. A missing table is not an error.
func (t *Table) Delete() error {
	batchMu.Lock()
	defer batchMu.Unlock()
	c, err := t.conn()
	if err != nil {
		return err
	}
	if !t.exists(c) {
		return nil
	}
	c.DelTable(t.table)
	if err := c.Flush(); err != nil {
		return fmt.Errorf("nft: delete table %s: %w", t.cfg.Table, err)
	}
	return nil
}

func (t *Table) exists(c *nftables.Conn) bool {
	tabs, err := c.ListTablesOfFamily(nftables.TableFamilyINet)
	if err != nil {
		return false
	}
	for _, tab := range tabs {
		if tab.Name == t.cfg.Table {
			return true
		}
	}
	return false
}

// Add installs one sandbox's chains, sets and map entries.
func (t *Table) Add(sb Sandbox) error {
	batchMu.Lock()
	defer batchMu.Unlock()
	c, err := t.conn()
	if err != nil {
		return err
	}
	if err := t.addSandbox(c, t.baseRefs(), sb); err != nil {
		return err
	}
	if err := c.Flush(); err != nil {
		return fmt.Errorf("nft: add sandbox %s: %w", sb.Key, err)
	}
	return nil
}

// Replace swaps a sandbox's objects for new ones in one transaction (a
// policy update). old and sb must have the same Key and Iface.
func (t *Table) Replace(old, sb Sandbox) error {
	batchMu.Lock()
	defer batchMu.Unlock()
	c, err := t.conn()
	if err != nil {
		return err
	}
	base := t.baseRefs()
	t.delSandbox(c, base, old, t.present(c, old))
	if err := t.addSandbox(c, base, sb); err != nil {
		return err
	}
	if err := c.Flush(); err != nil {
		return fmt.Errorf("nft: replace sandbox %s: %w", sb.Key, err)
	}
	return nil
}

// Remove deletes a sandbox's objects. What is already gone is skipped, so
// Remove is safe to repeat and to run on a half-built sandbox.
func (t *Table) Remove(sb Sandbox) error {
	batchMu.Lock()
	defer batchMu.Unlock()
	c, err := t.conn()
	if err != nil {
		return err
	}
	if !t.exists(c) {
		return nil
	}
	p := t.present(c, sb)
	if p.none() {
		return nil
	}
	t.delSandbox(c, t.baseRefs(), sb, p)
	if err := c.Flush(); err != nil {
		return fmt.Errorf("nft: remove sandbox %s: %w", sb.Key, err)
	}
	return nil
}

// refs are the table's shared objects as rules and elements refer to them.
type refs struct {
	guards, fwds, forbidden *nftables.Set
}

func (t *Table) baseRefs() refs {
	return refs{
		guards:    &nftables.Set{Table: t.table, Name: "guards", IsMap: true, KeyType: nftables.TypeIFName, DataType: nftables.TypeVerdict},
		fwds:      &nftables.Set{Table: t.table, Name: "fwds", IsMap: true, KeyType: nftables.TypeIFName, DataType: nftables.TypeVerdict},
		forbidden: &nftables.Set{Table: t.table, Name: "forbidden4", Interval: true, KeyType: nftables.TypeIPAddr},
	}
}

// The names of one sandbox's objects.
func chainS(key string) string { return "s-" + key }
func chainF(key string) string { return "f-" + key }
func setD(key string) string   { return "d-" + key }
func setR(key string) string   { return "r-" + key }

// presence records which of a sandbox's objects exist.
type presence struct {
	guard, fwd, s, f, d, r bool
}

func (p presence) none() bool { return !(p.guard || p.fwd || p.s || p.f || p.d || p.r) }

func (t *Table) present(c *nftables.Conn, sb Sandbox) presence {
	var p presence
	if chains, err := c.ListChainsOfTableFamily(nftables.TableFamilyINet); err == nil {
		for _, ch := range chains {
			if ch.Table.Name != t.cfg.Table {
				continue
			}
			p.s = p.s || ch.Name == chainS(sb.Key)
			p.f = p.f || ch.Name == chainF(sb.Key)
		}
	}
	if sets, err := c.GetSets(t.table); err == nil {
		for _, s := range sets {
			p.d = p.d || s.Name == setD(sb.Key)
			p.r = p.r || s.Name == setR(sb.Key)
		}
	}
	key := ifname(sb.Iface)
	base := t.baseRefs()
	if els, err := c.GetSetElements(base.guards); err == nil {
		for _, e := range els {
			p.guard = p.guard || string(e.Key) == string(key)
		}
	}
	if els, err := c.GetSetElements(base.fwds); err == nil {
		for _, e := range els {
			p.fwd = p.fwd || string(e.Key) == string(key)
		}
	}
	return p
}

func (t *Table) delSandbox(c *nftables.Conn, base refs, sb Sandbox, p presence) {
	key := ifname(sb.Iface)
	if p.guard {
		c.SetDeleteElements(base.guards, []nftables.SetElement{{Key: key}})
	}
	if p.fwd {
		c.SetDeleteElements(base.fwds, []nftables.SetElement{{Key: key}})
	}
	for _, ch := range []struct {
		name string
		ok   bool
	}{{chainS(sb.Key), p.s}, {chainF(sb.Key), p.f}} {
		if ch.ok {
			chain := &nftables.Chain{Table: t.table, Name: ch.name}
			c.FlushChain(chain)
			c.DelChain(chain)
		}
	}
	if p.d {
		c.DelSet(&nftables.Set{Table: t.table, Name: setD(sb.Key)})
	}
	if p.r {
		c.DelSet(&nftables.Set{Table: t.table, Name: setR(sb.Key)})
	}
}

func (t *Table) addSandbox(c *nftables.Conn, base refs, sb Sandbox) error {
	if !sb.Addr.Is4() || sb.Key == "" || sb.Iface == "" || len(sb.Iface) > 15 {
		return fmt.Errorf("nft: sandbox %q: bad address %s or interface %q", sb.Key, sb.Addr, sb.Iface)
	}
	s := c.AddChain(&nftables.Chain{Table: t.table, Name: chainS(sb.Key)})
	add := func(ch *nftables.Chain, e ...expr.Any) {
		c.AddRule(&nftables.Rule{Table: t.table, Chain: ch, Exprs: e})
	}
	// Not IPv4, or not from its own address: dropped (no spoofing a
	// neighbour, no IPv6 to the host's link-local addresses).
	add(s, append(loadNFProto(), cmpNeq([]byte{unix.NFPROTO_IPV4}), drop())...)
	add(s, append(loadSaddr(), cmpNeq(sb.Addr.AsSlice()), drop())...)
	if sb.Egress == EgressNone {
		// The one way out of mode none: the daemon's own ports route,
		// plain HTTP to the gateway (the proxy answers nothing else there
		// in mode none) and its names from the resolver (which answers
		// nothing else in mode none, and never asks upstream for it).
		gw := cat(loadDaddr(), cmpEq(t.cfg.Gateway.AsSlice()))
		add(s, cat(gw, loadL4(), cmpEq([]byte{unix.IPPROTO_TCP}), loadDport(), cmpEq(port(PortsRoutePort)), accept())...)
		add(s, cat(gw, loadL4(), cmpEq([]byte{unix.IPPROTO_UDP}), loadDport(), cmpEq(port(53)), accept())...)
		add(s, cat(gw, loadL4(), cmpEq([]byte{unix.IPPROTO_TCP}), loadDport(), cmpEq(port(53)), accept())...)
		add(s, append(ctStateIn(expr.CtStateBitESTABLISHED|expr.CtStateBitRELATED, false), drop())...)
	}
	add(s, accept())
	if err := c.SetAddElements(base.guards, []nftables.SetElement{{Key: ifname(sb.Iface), VerdictData: &expr.Verdict{Kind: expr.VerdictGoto, Chain: s.Name}}}); err != nil {
		return err
	}
	if sb.Egress != EgressOpen {
		return nil
	}
	d := &nftables.Set{Table: t.table, Name: setD(sb.Key), Interval: true, KeyType: nftables.TypeIPAddr}
	if err := c.AddSet(d, intervals(sb.Deny)); err != nil {
		return fmt.Errorf("nft: deny set of %s: %w", sb.Key, err)
	}
	r := &nftables.Set{Table: t.table, Name: setR(sb.Key), Interval: true, KeyType: nftables.TypeIPAddr}
	if err := c.AddSet(r, intervals(sb.Reach)); err != nil {
		return fmt.Errorf("nft: reach set of %s: %w", sb.Key, err)
	}
	f := c.AddChain(&nftables.Chain{Table: t.table, Name: chainF(sb.Key)})
	add(f, cat(loadNFProto(), cmpNeq([]byte{unix.NFPROTO_IPV4}), drop())...)
	add(f, append(loadDaddr(), lookup(d), drop())...)
	add(f, append(loadL4(), cmpEq([]byte{unix.IPPROTO_TCP}), drop())...)
	add(f, append(loadDaddr(), lookup(r), accept())...)
	add(f, append(loadDaddr(), lookup(base.forbidden), drop())...)
	add(f, accept())
	return c.SetAddElements(base.fwds, []nftables.SetElement{{Key: ifname(sb.Iface), VerdictData: &expr.Verdict{Kind: expr.VerdictGoto, Chain: f.Name}}})
}

func (t *Table) addBase(c *nftables.Conn) (refs, error) {
	base := t.baseRefs()
	for _, s := range []*nftables.Set{base.guards, base.fwds} {
		if err := c.AddSet(s, nil); err != nil {
			return refs{}, err
		}
	}
	forbidden := append(append([]netip.Prefix(nil), t.cfg.Forbidden...), t.cfg.Pool)
	if err := c.AddSet(base.forbidden, intervals(forbidden)); err != nil {
		return refs{}, err
	}
	policyAccept := nftables.ChainPolicyAccept
	chain := func(name string, typ nftables.ChainType, hook *nftables.ChainHook, prio *nftables.ChainPriority) *nftables.Chain {
		return c.AddChain(&nftables.Chain{Table: t.table, Name: name, Type: typ, Hooknum: hook, Priority: prio, Policy: &policyAccept})
	}
	add := func(ch *nftables.Chain, e ...expr.Any) {
		c.AddRule(&nftables.Rule{Table: t.table, Chain: ch, Exprs: e})
	}
	fromSandbox := t.ifPrefix(expr.MetaKeyIIFNAME, true)
	gw := t.cfg.Gateway.AsSlice()

	guard := chain("guard", nftables.ChainTypeFilter, nftables.ChainHookPrerouting, nftables.ChainPriorityMangle)
	add(guard, append(fromSandbox, vmap(base.guards)...)...)
	add(guard, append(fromSandbox, drop())...)

	dnat := chain("dnat", nftables.ChainTypeNAT, nftables.ChainHookPrerouting, nftables.ChainPriorityNATDest)
	add(dnat, cat(fromSandbox, loadL4(), cmpEq([]byte{unix.IPPROTO_UDP}), loadDport(), cmpEq(port(53)), redirect(t.cfg.DNSPort))...)
	add(dnat, cat(fromSandbox, loadL4(), cmpEq([]byte{unix.IPPROTO_TCP}), loadDport(), cmpEq(port(53)), redirect(t.cfg.DNSPort))...)
	add(dnat, cat(fromSandbox, loadL4(), cmpEq([]byte{unix.IPPROTO_TCP}), redirect(t.cfg.ProxyPort))...)

	input := chain("input", nftables.ChainTypeFilter, nftables.ChainHookInput, nftables.ChainPriorityFilter)
	add(input, cat(fromSandbox, ctStateIn(expr.CtStateBitESTABLISHED|expr.CtStateBitRELATED, true), accept())...)
	toGW := cat(loadNFProto(), cmpEq([]byte{unix.NFPROTO_IPV4}), loadDaddr(), cmpEq(gw))
	add(input, cat(fromSandbox, toGW, loadL4(), cmpEq([]byte{unix.IPPROTO_TCP}), loadDport(), cmpEq(port(t.cfg.ProxyPort)), accept())...)
	add(input, cat(fromSandbox, toGW, loadL4(), cmpEq([]byte{unix.IPPROTO_TCP}), loadDport(), cmpEq(port(t.cfg.DNSPort)), accept())...)
	add(input, cat(fromSandbox, toGW, loadL4(), cmpEq([]byte{unix.IPPROTO_UDP}), loadDport(), cmpEq(port(t.cfg.DNSPort)), accept())...)
	add(input, cat(fromSandbox, drop())...)
	// The listeners on G serve sandboxes only: the host's weak host model
	// would otherwise accept packets for G on any interface.
	add(input, cat(t.ifPrefix(expr.MetaKeyIIFNAME, false), toGW, drop())...)

	forward := chain("forward", nftables.ChainTypeFilter, nftables.ChainHookForward, nftables.ChainPriorityFilter)
	add(forward, append(fromSandbox, vmap(base.fwds)...)...)
	add(forward, cat(fromSandbox, drop())...)
	toSandbox := t.ifPrefix(expr.MetaKeyOIFNAME, true)
	add(forward, cat(toSandbox, ctStateIn(expr.CtStateBitESTABLISHED|expr.CtStateBitRELATED, true), accept())...)
	add(forward, cat(toSandbox, drop())...)

	// Nothing on the host opens a connection to a sandbox but the
	// daemon's route, whose sockets carry RouteMark: a local account
	// would otherwise reach a sandbox's private ports without its traffic
	// token. Replies to the sandbox's own connections (to the proxy, the
	// resolver) are established.
	output := chain("output", nftables.ChainTypeFilter, nftables.ChainHookOutput, nftables.ChainPriorityFilter)
	add(output, cat(toSandbox, ctStateIn(expr.CtStateBitESTABLISHED|expr.CtStateBitRELATED, true), accept())...)
	add(output, cat(toSandbox, loadMark(), cmpEq(mark(t.cfg.RouteMark)), accept())...)
	add(output, cat(toSandbox, drop())...)

	snat := chain("snat", nftables.ChainTypeNAT, nftables.ChainHookPostrouting, nftables.ChainPriorityNATSource)
	add(snat, cat(fromSandbox, t.ifPrefix(expr.MetaKeyOIFNAME, false), &expr.Masq{})...)
	return base, nil
}

// State is what the table holds, for checks that nothing is left behind.
type State struct {
	Exists bool
	Chains []string       // every chain, base and per sandbox
	Sets   []string       // every named set and map
	Guards []string       // interfaces in the guards map
	Fwds   []string       // interfaces in the fwds map
	Rules  map[string]int // rule count per chain
}

// State lists the table's objects.
func (t *Table) State() (State, error) {
	batchMu.Lock()
	defer batchMu.Unlock()
	c, err := t.conn()
	if err != nil {
		return State{}, err
	}
	var st State
	if !t.exists(c) {
		return st, nil
	}
	st.Exists = true
	st.Rules = map[string]int{}
	chains, err := c.ListChainsOfTableFamily(nftables.TableFamilyINet)
	if err != nil {
		return st, err
	}
	for _, ch := range chains {
		if ch.Table.Name != t.cfg.Table {
			continue
		}
		st.Chains = append(st.Chains, ch.Name)
		rules, err := c.GetRules(t.table, ch)
		if err != nil {
			return st, err
		}
		st.Rules[ch.Name] = len(rules)
	}
	sets, err := c.GetSets(t.table)
	if err != nil {
		return st, err
	}
	for _, s := range sets {
		st.Sets = append(st.Sets, s.Name)
	}
	base := t.baseRefs()
	for _, m := range []struct {
		set *nftables.Set
		out *[]string
	}{{base.guards, &st.Guards}, {base.fwds, &st.Fwds}} {
		els, err := c.GetSetElements(m.set)
		if err != nil {
			return st, err
		}
		for _, e := range els {
			*m.out = append(*m.out, strings.TrimRight(string(e.Key), "\x00"))
		}
	}
	return st, nil
}
