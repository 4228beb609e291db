package nft

import (
	"net/netip"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/sandlot/sandlot/network/nettest"
)

func TestMain(m *testing.M) { nettest.Main(m) }

func testConfig() Config {
	return Config{
		Table:     "sandlot",
		Gateway:   netip.MustParseAddr("10.254.0.1"),
		Pool:      netip.MustParsePrefix("10.254.0.0/16"),
		ProxyPort: 15001,
		DNSPort:   15053,
		Forbidden: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("169.254.0.0/16"), netip.MustParsePrefix("240.0.0.0/4")},
	}
}

func TestIntervals(t *testing.T) {
	els := intervals([]netip.Prefix{
		netip.MustParsePrefix("10.0.0.0/8"),
		netip.MustParsePrefix("10.254.0.0/16"), // inside the previous: merged
		netip.MustParsePrefix("11.0.0.0/8"),    // adjacent: merged
		netip.MustParsePrefix("240.0.0.0/4"),   // ends at the top: no end element
		netip.MustParsePrefix("2001:db8::/32"), // IPv6: skipped
	})
	type el struct {
		Key string
		End bool
	}
	var got []el
	for _, e := range els {
		a, _ := netip.AddrFromSlice(e.Key)
		got = append(got, el{a.String(), e.IntervalEnd})
	}
	want := []el{{"10.0.0.0", false}, {"12.0.0.0", true}, {"240.0.0.0", false}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("intervals (-want +got):\n%s", diff)
	}
}

func TestTableLifecycle(t *testing.T) {
	nettest.Require(t)
	tab, err := New(testConfig())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tab.Delete() })
	a := Sandbox{Key: "2", Iface: "sl-2", Addr: netip.MustParseAddr("10.254.0.2"), Egress: EgressNone}
	b := Sandbox{Key: "3", Iface: "sl-3", Addr: netip.MustParseAddr("10.254.0.3"), Egress: EgressProxy}
	c := Sandbox{Key: "4", Iface: "sl-4", Addr: netip.MustParseAddr("10.254.0.4"), Egress: EgressOpen,
		Deny: []netip.Prefix{netip.MustParsePrefix("203.0.113.99/32")}, Reach: []netip.Prefix{netip.MustParsePrefix("10.9.9.0/24")}}

	if err := tab.Install(nil); err != nil {
		t.Fatal(err)
	}
	base, err := tab.State()
	if err != nil {
		t.Fatal(err)
	}
	if err := tab.Install([]Sandbox{a}); err != nil {
		t.Fatal(err)
	}
	first, _ := tab.State()
	// Installing again replaces the table instead of failing or doubling it.
	if err := tab.Install(nil); err != nil {
		t.Fatal(err)
	}
	if err := tab.Add(a); err != nil {
		t.Fatal(err)
	}
	again, _ := tab.State()
	if diff := cmp.Diff(first, again); diff != "" {
		t.Errorf("reinstall changed the table (-first +second):\n%s", diff)
	}
	for _, sb := range []Sandbox{b, c} {
		if err := tab.Add(sb); err != nil {
			t.Fatal(err)
		}
	}
	st, _ := tab.State()
	for _, name := range []string{"guard", "dnat", "input", "forward", "output", "snat", "s-2", "s-3", "s-4", "f-4"} {
		if !slices.Contains(st.Chains, name) {
			t.Errorf("chain %s missing: %v", name, st.Chains)
		}
	}
	for _, name := range []string{"guards", "fwds", "forbidden4", "d-4", "r-4"} {
		if !slices.Contains(st.Sets, name) {
			t.Errorf("set %s missing: %v", name, st.Sets)
		}
	}
	slices.Sort(st.Guards)
	if diff := cmp.Diff([]string{"sl-2", "sl-3", "sl-4"}, st.Guards); diff != "" {
		t.Errorf("guards map (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"sl-4"}, st.Fwds); diff != "" {
		t.Errorf("fwds map (-want +got):\n%s", diff)
	}
	if st.Rules["s-2"] != st.Rules["s-3"]+4 {
		t.Errorf("mode none adds four rules to the guard chain (the ports route's HTTP and DNS, then the drop): %v", st.Rules)
	}

	// Open → proxy: the forward chain and sets go, the guard stays.
	c2 := c
	c2.Egress = EgressProxy
	if err := tab.Replace(c, c2); err != nil {
		t.Fatal(err)
	}
	st, _ = tab.State()
	if slices.Contains(st.Chains, "f-4") || slices.Contains(st.Sets, "d-4") || len(st.Fwds) != 0 {
		t.Errorf("replace left mode open objects: %+v", st)
	}
	for _, sb := range []Sandbox{a, b, c2, c2} { // the second c2: Remove is idempotent
		if err := tab.Remove(sb); err != nil {
			t.Fatal(err)
		}
	}
	st, _ = tab.State()
	if diff := cmp.Diff(base.Chains, st.Chains); diff != "" {
		t.Errorf("chains after removing all (-want +got):\n%s", diff)
	}
	if len(st.Guards) != 0 || len(st.Fwds) != 0 || len(st.Sets) != 3 {
		t.Errorf("left behind: %+v", st)
	}
	if err := tab.Delete(); err != nil {
		t.Fatal(err)
	}
	if st, _ := tab.State(); st.Exists {
		t.Error("table still exists after Delete")
	}
	if err := tab.Remove(a); err != nil {
		t.Errorf("Remove without a table: %v", err)
	}
}

func TestConfigRejects(t *testing.T) {
	for name, mut := range map[string]func(*Config){
		"gateway outside pool": func(c *Config) { c.Gateway = netip.MustParseAddr("10.1.0.1") },
		"ipv6 pool":            func(c *Config) { c.Pool = netip.MustParsePrefix("fd00::/64") },
		"same ports":           func(c *Config) { c.DNSPort = c.ProxyPort },
		"long prefix":          func(c *Config) { c.IfPrefix = "sandlot-veth-" },
	} {
		cfg := testConfig()
		mut(&cfg)
		if _, err := New(cfg); err == nil {
			t.Errorf("%s: New accepted %+v", name, cfg)
		}
	}
}
