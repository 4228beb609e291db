package network

import (
	"context"
	"errors"
	"fmt"
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
)

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
		if f := strings.Fields(line); len(f) > 4 && strings.HasPrefix(f[4], m.cfg.NetnsDir+"/") {
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
	if len(last.Links)+len(last.Mounts)+len(last.Files)+len(last.Guards)+len(last.Fwds) != 0 || len(last.Sets) != 3 || len(last.Chains) != 6 {
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

	// The daemon restarts (m1 is dropped without a word: its process died
	// and the kernel dropped its host lock); sb-c's sandbox did not
	// survive.
	m1.lock.Close()
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
