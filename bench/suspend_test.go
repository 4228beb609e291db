package bench

import (
	"context"
	"strings"
	"testing"

	"github.com/sandlot/sandlot/image/debian/debiantest"
	"github.com/sandlot/sandlot/internal/testenv"
	"github.com/sandlot/sandlot/provider/local"
	"github.com/sandlot/sandlot/provider/local/localtest"
	"github.com/sandlot/sandlot/store/memory"
	"github.com/sandlot/sandlot/templates"
	"github.com/sandlot/sandlot/tenant"
)

// TestSuspendCases runs the suspend and fork figures at small sizes on
// crun over the default image: each latency has its samples, the memory a
// suspended context holds is a figure (not negative) with its goal, and the
// names say files only (crun keeps no memory).
func TestSuspendCases(t *testing.T) {
	testenv.RequireRoot(t)
	testenv.RequireBinary(t, "crun")
	imgs, _ := debiantest.Default(t)
	st := memory.New()
	if err := st.CreateTenant(context.Background(), &tenant.Tenant{ID: Tenant}, tenant.HashKey("k-bench")); err != nil {
		t.Fatal(err)
	}
	cat := templates.New(templates.Config{Store: st, Images: imgs, Snapshots: st})
	p := localtest.New(t, local.Config{Runtime: "crun", Images: imgs, Templates: cat})
	env := Env{Provider: p, ImageProvider: p, ImageCatalog: cat}
	sz := Sizes{Cold: 5} // 3 samples each, 5 contexts held
	var figs []Figure
	for _, c := range suspendCases(env, sz) {
		f, err := c.Run(context.Background())
		if err != nil {
			t.Fatalf("%s: %v", c.Name, err)
		}
		figs = append(figs, f...)
	}
	byName := map[string]Figure{}
	for _, f := range figs {
		if !strings.Contains(f.Name, "(files only)") {
			t.Errorf("figure %q does not say files only", f.Name)
		}
		byName[f.Name] = f
		t.Logf("%s: n=%d p50=%.1f ms value=%g %s %s", f.Name, f.N, f.P50, f.Value, f.Unit, f.Note)
	}
	for _, name := range []string{
		"suspend (files only): suspend, 1 MiB written", "suspend (files only): wake to first python result, 32 MiB written",
		"fork (files only): onto a path to first python result, 1 MiB written",
	} {
		if f, ok := byName[name]; !ok || f.N != 3 || f.P50 <= 0 {
			t.Errorf("%s: %+v", name, f)
		}
	}
	held := byName["suspend (files only): host memory a suspended context holds, 1 MiB written (mean of 5)"]
	fits := byName["suspend (files only): suspended contexts per 2 GiB (by the host memory each holds)"]
	if held.Met == nil || held.Value < 0 || held.Unit != "KiB" || fits.Met == nil || fits.Value <= 0 {
		t.Errorf("held %+v, per 2 GiB %+v", held, fits)
	}
	if ids, _ := p.List(context.Background()); len(ids) != 0 {
		t.Errorf("sandboxes left running: %v", ids)
	}
}
