package stack

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/vishvananda/netlink"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/network/nft"
	"github.com/sandlot/sandlot/network/policy"
)

// traces is what sandbox networks leave on the host.
type traces struct {
	Links, Mounts, Files []string
	Nft                  nft.State
}

func takeTraces(t *testing.T, e *env) traces {
	t.Helper()
	var s traces
	links, err := netlink.LinkList()
	for i := 0; errors.Is(err, netlink.ErrDumpInterrupted) && i < 10; i++ {
		links, err = netlink.LinkList()
	}
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range links {
		if strings.HasPrefix(l.Attrs().Name, "sl-") {
			s.Links = append(s.Links, l.Attrs().Name)
		}
	}
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(mi), "\n") {
		if f := strings.Fields(line); len(f) > 4 && strings.HasPrefix(f[4], e.cfg.Network.NetnsDir+"/") {
			s.Mounts = append(s.Mounts, f[4])
		}
	}
	for _, dir := range []string{e.cfg.Network.StateDir, e.cfg.Network.NetnsDir} {
		ents, _ := os.ReadDir(dir)
		for _, en := range ents {
			s.Files = append(s.Files, filepath.Join(dir, en.Name()))
		}
	}
	m := e.st.Manager()
	tab, err := nft.New(nft.Config{Gateway: m.Gateway(), Pool: m.Pool(), ProxyPort: m.ProxyAddr().Port(), DNSPort: m.DNSAddr().Port()})
	if err != nil {
		t.Fatal(err)
	}
	if s.Nft, err = tab.State(); err != nil {
		t.Fatal(err)
	}
	for _, l := range [][]string{s.Links, s.Mounts, s.Files, s.Nft.Chains, s.Nft.Sets, s.Nft.Guards, s.Nft.Fwds} {
		slices.Sort(l)
	}
	return s
}

// TestNothingLeftBehind: 200 sandboxes (crun) created with a network and
// deleted, in every mode, leave no veth, namespace, mount, record, nft
// chain, set element or rule, and no CA bundle in the runtime's share.
func TestNothingLeftBehind(t *testing.T) {
	e := newEnv(t, 0)
	p := newProvider(t, "crun", e.st)
	ctx := context.Background()
	before := takeTraces(t, e)
	caBefore := bundleNames(p.Runtime().(interface{ ShareDir() string }).ShareDir())
	pols := []policy.Policy{
		{Mode: policy.None},
		{Mode: policy.Allowlist, Allow: rules("*.example.test", "203.0.113.0/24:80")},
		{Mode: policy.Open, Deny: rules("203.0.113.20")},
	}
	n := 200
	if testing.Short() {
		n = 20
	}
	start := time.Now()
	for i := range n {
		pol := pols[i%len(pols)]
		cctx, cancel := context.WithTimeout(ctx, time.Minute)
		sb, err := p.Create(cctx, contexts.Spec{Network: &pol, Labels: map[string]string{contexts.LabelTenant: "t1"}})
		cancel()
		if err != nil {
			t.Fatalf("cycle %d: %v", i, err)
		}
		sb.Close()
		if err := p.Destroy(ctx, sb.ID()); err != nil {
			t.Fatalf("cycle %d: destroy: %v", i, err)
		}
	}
	t.Logf("%d create/delete cycles in %s", n, time.Since(start).Round(time.Millisecond))
	after := takeTraces(t, e)
	if diff := cmp.Diff(before, after); diff != "" {
		t.Errorf("%d create/delete cycles left traces (-before +after):\n%s", n, diff)
	}
	if len(after.Links)+len(after.Mounts)+len(after.Files) != 0 {
		t.Errorf("traces with no sandbox: %+v", after)
	}
	shared := p.Runtime().(interface{ ShareDir() string }).ShareDir()
	if left := unmountedBundles(t, shared, caBefore); len(left) != 0 {
		t.Errorf("%d CA bundles left in the runtime's share %s: %v", len(left), shared, left)
	}
}

// unmountedBundles lists the CA bundles in the host's share that were not
// there before (skip) and that no process mounts. The share is one per
// host: other test packages' networked sandboxes, running at the same time,
// have bundles of their own there, each mounted by its sandbox; a bundle
// this test's sandboxes left would be mounted by none.
func unmountedBundles(t *testing.T, share string, skip map[string]bool) []string {
	t.Helper()
	cas, _ := filepath.Glob(filepath.Join(share, "net", "ca-*"))
	mounted := map[string]bool{}
	infos, _ := filepath.Glob("/proc/[0-9]*/mountinfo")
	for _, mi := range infos {
		b, err := os.ReadFile(mi)
		if err != nil {
			continue // the process ended
		}
		for _, line := range strings.Split(string(b), "\n") {
			if f := strings.Fields(line); len(f) > 3 && strings.HasPrefix(f[3], "/net/ca-") {
				mounted[filepath.Base(f[3])] = true
			}
		}
	}
	var left []string
	for _, ca := range cas {
		if name := filepath.Base(ca); !skip[name] && !mounted[name] {
			left = append(left, name)
		}
	}
	return left
}

// bundleNames is the set of CA bundles in the share now.
func bundleNames(share string) map[string]bool {
	cas, _ := filepath.Glob(filepath.Join(share, "net", "ca-*"))
	names := map[string]bool{}
	for _, ca := range cas {
		names[filepath.Base(ca)] = true
	}
	return names
}
