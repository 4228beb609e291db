// Package network gives a sandbox a network of its own: a network
// namespace (bind-mounted, so the OCI runtime joins it by path), a veth
// pair to the daemon's namespace, an address from the sandbox pool, and
// the nftables rules (package nft) that confine it. What may leave is
// decided by the egress proxy and the resolver (packages egress and
// resolver) against the sandbox's policy (package policy); this package
// builds and removes the plumbing and keeps one record per sandbox network
// so a restarted daemon finds, rebuilds or removes it.
//
// Addressing: every host-side veth carries the same gateway address G (the
// pool's first host address, as a /32); each sandbox gets one /32 S from
// the pool, a host route "S dev <veth>" and, inside, "default via G
// onlink". One proxy listener and one resolver on G serve every sandbox,
// and a sandbox is told apart by its source address, which the kernel
// rules pin to its veth.
package network

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/internal/logkey"
	"github.com/sandlot/sandlot/network/ca"
	"github.com/sandlot/sandlot/network/nft"
	"github.com/sandlot/sandlot/network/policy"
)

// Defaults of Config.
var (
	DefaultPool     = netip.MustParsePrefix("10.254.0.0/16")
	DefaultNetnsDir = "/run/sandlot/netns"
)

// Default ports of the proxy and the resolver on the gateway address.
const (
	DefaultProxyPort = 15001
	DefaultDNSPort   = 15053
)

// Config configures a Manager. StateDir is required.
type Config struct {
	// StateDir holds one record per sandbox network (0700; records are
	// 0600, since they hold the sandbox CA's key).
	StateDir string
	// NetnsDir is where namespaces are bind-mounted (default
	// /run/sandlot/netns). Keep it on a tmpfs: after a reboot the
	// namespaces are gone and their records are removed at Start.
	NetnsDir string
	// Pool is the IPv4 range sandboxes take their addresses from (default
	// 10.254.0.0/16). Its first host address is the gateway. It must not
	// overlap a network the host reaches.
	Pool netip.Prefix
	// ProxyPort and DNSPort are where the kernel sends the sandboxes' TCP
	// and DNS, on the gateway address (defaults 15001, 15053).
	ProxyPort, DNSPort uint16
	// Table and IfPrefix name the nftables table (default "sandlot") and
	// the host-side veths (default "sl-").
	Table, IfPrefix string
	// CAValidity is the lifetime of a sandbox CA (default ca.DefaultValidity).
	CAValidity time.Duration
	// RouteMark is the socket mark of the daemon's own connections to
	// sandboxes (DialSandbox), the only ones the host may open to a
	// sandbox's address (default nft.DefaultRouteMark).
	RouteMark uint32
	// Spares is how many networks to keep built ahead of need (namespace,
	// veth, addresses, CA), so Setup only adds the rules and the record.
	// Zero builds every network on demand.
	Spares int
	Log    *slog.Logger
}

// Net is one sandbox's network. Treat it as read-only: Update returns a
// new one.
type Net struct {
	SandboxID string
	// Path is the network namespace for the OCI spec:
	// {"type": "network", "path": Path}.
	Path    string
	Addr    netip.Addr // the sandbox's address
	Gateway netip.Addr // its default gateway and name server
	Iface   string     // the host-side veth
	Policy  *policy.Effective
	// CA is the sandbox's certificate authority; CA.CertPEM() goes into
	// the sandbox's trust store.
	CA   *ca.CA
	slot uint32
}

// ResolvConf is the /etc/resolv.conf the sandbox should see. Any address
// would do (every DNS packet is redirected to the resolver); the gateway
// is the honest one.
func (n *Net) ResolvConf() []byte {
	return []byte("nameserver " + n.Gateway.String() + "\noptions edns0 trust-ad\n")
}

// Manager builds and removes sandbox networks. Its methods are safe for
// concurrent use.
type Manager struct {
	cfg     Config
	gateway netip.Addr
	first   uint32 // lowest slot
	last    uint32 // highest slot
	tab     *nft.Table
	lock    *os.File // lockHost's, from Start to Close
	log     *slog.Logger
	host    hostAddrs

	stop, done chan struct{} // the spare filler's; nil without spares
	refill     chan struct{}

	mu     sync.Mutex
	spares []spare
	byID   map[string]*Net
	bySlot map[uint32]string // slot → sandbox id ("" while being built)
	byAddr map[netip.Addr]*Net
	next   uint32 // where the search for a free slot starts
}

// New validates cfg and returns a Manager. It changes nothing on the host
// until Start.
func New(cfg Config) (*Manager, error) {
	if cfg.StateDir == "" {
		return nil, fmt.Errorf("network: StateDir is required: %w", errdefs.ErrInvalidArgument)
	}
	if cfg.NetnsDir == "" {
		cfg.NetnsDir = DefaultNetnsDir
	}
	if !cfg.Pool.IsValid() {
		cfg.Pool = DefaultPool
	}
	cfg.Pool = cfg.Pool.Masked()
	if !cfg.Pool.Addr().Is4() || cfg.Pool.Bits() > 29 || cfg.Pool.Bits() < 8 {
		return nil, fmt.Errorf("network: pool %s must be an IPv4 range from /8 to /29: %w", cfg.Pool, errdefs.ErrInvalidArgument)
	}
	if cfg.ProxyPort == 0 {
		cfg.ProxyPort = DefaultProxyPort
	}
	if cfg.DNSPort == 0 {
		cfg.DNSPort = DefaultDNSPort
	}
	if cfg.IfPrefix == "" {
		cfg.IfPrefix = "sl-"
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Spares < 0 {
		return nil, fmt.Errorf("network: negative spares: %w", errdefs.ErrInvalidArgument)
	}
	size := uint32(1) << (32 - cfg.Pool.Bits())
	gw := cfg.Pool.Addr().Next()
	tab, err := nft.New(nft.Config{
		Table: cfg.Table, IfPrefix: cfg.IfPrefix, Gateway: gw, Pool: cfg.Pool,
		ProxyPort: cfg.ProxyPort, DNSPort: cfg.DNSPort, Forbidden: policy.Forbidden4(), RouteMark: cfg.RouteMark,
	})
	if err != nil {
		return nil, fmt.Errorf("%v: %w", err, errdefs.ErrInvalidArgument)
	}
	return &Manager{
		cfg: cfg, gateway: gw, first: 2, last: size - 2, tab: tab, log: cfg.Log,
		byID: map[string]*Net{}, bySlot: map[uint32]string{}, byAddr: map[netip.Addr]*Net{}, next: 2,
		refill: make(chan struct{}, 1),
	}, nil
}

// Gateway is the address every sandbox routes through, where the proxy
// and the resolver listen.
func (m *Manager) Gateway() netip.Addr { return m.gateway }

// ProxyAddr is where the egress proxy must listen.
func (m *Manager) ProxyAddr() netip.AddrPort { return netip.AddrPortFrom(m.gateway, m.cfg.ProxyPort) }

// DNSAddr is where the resolver must listen (UDP and TCP).
func (m *Manager) DNSAddr() netip.AddrPort { return netip.AddrPortFrom(m.gateway, m.cfg.DNSPort) }

// Pool is the sandbox address range.
func (m *Manager) Pool() netip.Prefix { return m.cfg.Pool }

// Get returns the network of a sandbox.
func (m *Manager) Get(sandboxID string) (*Net, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, ok := m.byID[sandboxID]
	return n, ok
}

// List returns every sandbox network, in no particular order.
func (m *Manager) List() []*Net {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]*Net, 0, len(m.byID))
	for _, n := range m.byID {
		out = append(out, n)
	}
	return out
}

// BySource returns the network whose sandbox has address a.
func (m *Manager) BySource(a netip.Addr) (*Net, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, ok := m.byAddr[a.Unmap()]
	return n, ok
}

// Internal says why a is internal to this host (the sandbox pool, an
// address of the host), or "". The proxy refuses such destinations.
func (m *Manager) Internal(a netip.Addr) string {
	a = a.Unmap()
	if m.cfg.Pool.Contains(a) {
		return "sandbox network"
	}
	if m.host.has(a) {
		return "host address"
	}
	return ""
}

// ValidID reports whether id can name a sandbox network (it becomes a
// file name).
func ValidID(id string) error {
	if id == "" || len(id) > 128 || id == "." || id == ".." {
		return fmt.Errorf("sandbox id %q: %w", id, errdefs.ErrInvalidArgument)
	}
	for _, c := range id {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return fmt.Errorf("sandbox id %q: only letters, digits, '-', '_' and '.': %w", id, errdefs.ErrInvalidArgument)
		}
	}
	return nil
}

func (m *Manager) addr(slot uint32) netip.Addr {
	b := m.cfg.Pool.Addr().As4()
	v := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
	v += slot
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}

func key(slot uint32) string { return strconv.FormatUint(uint64(slot), 16) }

func (m *Manager) iface(slot uint32) string { return m.cfg.IfPrefix + key(slot) }

func (m *Manager) slotOfIface(name string) (uint32, bool) {
	k, ok := strings.CutPrefix(name, m.cfg.IfPrefix)
	if !ok {
		return 0, false
	}
	v, err := strconv.ParseUint(k, 16, 32)
	return uint32(v), err == nil
}

// allocate reserves a free slot, round robin from the last one handed out,
// so a freed address is not reused at once (stale conntrack entries and
// peers' caches of the old sandbox age out first). Caller holds m.mu.
func (m *Manager) allocate() (uint32, error) {
	n := m.last - m.first + 1
	for i := uint32(0); i < n; i++ {
		s := m.first + (m.next-m.first+i)%n
		if _, used := m.bySlot[s]; !used {
			m.next = s + 1
			if m.next > m.last {
				m.next = m.first
			}
			return s, nil
		}
	}
	return 0, fmt.Errorf("network: all %d sandbox addresses of %s are in use: %w", n, m.cfg.Pool, errdefs.ErrResourceExhausted)
}

// egressOf maps a policy onto what the kernel enforces.
func egressOf(p *policy.Effective) nft.Egress {
	switch p.Mode() {
	case policy.Allowlist:
		return nft.EgressProxy
	case policy.Open:
		return nft.EgressOpen
	}
	return nft.EgressNone
}

func (m *Manager) kernel(n *Net) nft.Sandbox {
	return nft.Sandbox{
		Key: key(n.slot), Iface: n.Iface, Addr: n.Addr, Egress: egressOf(n.Policy),
		Deny: n.Policy.DenyNets(), Reach: n.Policy.KernelReach(),
	}
}

// record is what StateDir keeps per sandbox network.
type record struct {
	SandboxID string            `json:"sandboxId"`
	Slot      uint32            `json:"slot"`
	Path      string            `json:"path"`
	Policy    *policy.Effective `json:"policy"`
	CACert    string            `json:"caCert"`
	CAKey     string            `json:"caKey"`
}

func (m *Manager) recordPath(slot uint32) string {
	return filepath.Join(m.cfg.StateDir, "net-"+key(slot)+".json")
}

func (m *Manager) writeRecord(n *Net) error {
	keyPEM, err := n.CA.KeyPEM()
	if err != nil {
		return err
	}
	b, err := json.Marshal(record{SandboxID: n.SandboxID, Slot: n.slot, Path: n.Path, Policy: n.Policy,
		CACert: string(n.CA.CertPEM()), CAKey: string(keyPEM)})
	if err != nil {
		return err
	}
	p := m.recordPath(n.slot)
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, p)
}

func (m *Manager) readRecords() ([]record, []string, error) {
	ents, err := os.ReadDir(m.cfg.StateDir)
	if err != nil {
		return nil, nil, err
	}
	var recs []record
	var bad []string
	for _, e := range ents {
		name := e.Name()
		if !strings.HasPrefix(name, "net-") {
			continue
		}
		p := filepath.Join(m.cfg.StateDir, name)
		if !strings.HasSuffix(name, ".json") {
			bad = append(bad, p) // a .tmp of an interrupted write
			continue
		}
		b, err := os.ReadFile(p)
		var r record
		if err == nil {
			err = json.Unmarshal(b, &r)
		}
		if err == nil && (ValidID(r.SandboxID) != nil || m.recordPath(r.Slot) != p || r.Slot < m.first || r.Slot > m.last) {
			err = errors.New("inconsistent record")
		}
		if err != nil {
			m.log.Warn("network: dropping unreadable record", logkey.Path, p, logkey.Err, err)
			bad = append(bad, p)
			continue
		}
		recs = append(recs, r)
	}
	return recs, bad, nil
}
