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

// TestRunscCases runs gVisor's cases at small sizes on real runsc over the
// default image: creates from the warm pool to a first result, beside the
// 150 ms goal; idle contexts the manager's own cleanup loop suspended with
// their memory, the host memory each holds and how many fit in 2 GiB
// beside the goal of 150; each woken by its next call with its variable.
// They join the report only on runsc.
func TestRunscCases(t *testing.T) {
	testenv.RequireRoot(t)
	testenv.RequireBinary(t, "runsc")
	if names := caseNames(Cases(Env{}, Sizes{})); strings.Contains(names, "runsc:") {
		t.Fatalf("runsc cases without runsc: %s", names)
	}
	if names := caseNames(Cases(Env{Runtime: RuntimeRunsc}, Sizes{})); !strings.Contains(names, "runsc: create from the warm pool") ||
		!strings.Contains(names, "runsc: idle contexts with idle suspend") {
		t.Fatalf("no runsc cases on runsc: %s", names)
	}
	imgs, _ := debiantest.Default(t)
	st := memory.New()
	if err := st.CreateTenant(context.Background(), &tenant.Tenant{ID: Tenant}, tenant.HashKey("k-bench-runsc")); err != nil {
		t.Fatal(err)
	}
	cat := templates.New(templates.Config{Store: st, Images: imgs, Snapshots: st})
	p := localtest.New(t, local.Config{Runtime: "runsc", Images: imgs, Templates: cat})
	env := Env{Provider: p, ImageProvider: p, ImageCatalog: cat, Runtime: RuntimeRunsc}
	sz := Sizes{Pool: 3, Cold: 5}
	byName := map[string]Figure{}
	for _, c := range runscCases(env, sz) {
		figs, err := c.Run(context.Background())
		if err != nil {
			t.Fatalf("%s: %v", c.Name, err)
		}
		for _, f := range figs {
			byName[f.Name] = f
			t.Logf("%s: n=%d p50=%.1f ms value=%g %s %s", f.Name, f.N, f.P50, f.Value, f.Unit, f.Note)
		}
	}
	for _, c := range []struct {
		name   string
		n      int
		target string
	}{
		{"runsc: GetOrCreate from the warm pool", 3, ""},
		{"runsc: create from the warm pool to first python result (kernel prestarted)", 3, "p50 < 150 ms"},
		{"runsc: wake of an idle-suspended context to first python result (its variable kept)", 5, "p50 < 300 ms"},
	} {
		f, ok := byName[c.name]
		if !ok || f.N != c.n || f.P50 <= 0 || f.Target != c.target || (c.target != "") != (f.Met != nil) {
			t.Errorf("%s: %+v", c.name, f)
		}
	}
	held := byName["runsc: host memory an idle-suspended context holds, python kernel up (memory kept, mean of 5)"]
	fits := byName["runsc: idle contexts per 2 GiB with idle suspend (memory kept)"]
	// Five suspended contexts hold a few KiB of the daemon's heap in all,
	// which the heap's own noise can hide: the rows then say "not
	// measured", with no goal met or missed (suspendedRows), as the
	// suspend rows do (TestSuspendCases). Either is a consistent reading.
	measured := held.Unit == "KiB" && held.Value > 0 && fits.Met != nil && fits.Target == ">= 150" && fits.Value > 0
	unmeasured := held.Value == 0 && fits.Value == 0 && held.Met == nil && fits.Met == nil &&
		strings.HasPrefix(held.Note, "not measured") && strings.HasPrefix(fits.Note, "not measured")
	if !measured && !unmeasured {
		t.Errorf("held %+v, per 2 GiB %+v", held, fits)
	}
	if ids, _ := p.List(context.Background()); len(ids) != 0 {
		t.Errorf("sandboxes left running: %v", ids)
	}
}

func caseNames(cs []Case) string {
	var b strings.Builder
	for _, c := range cs {
		b.WriteString(c.Name + "; ")
	}
	return b.String()
}

// TestSuspendedRowsNotMeasured: when nothing measured held anything (the
// GC shrank the heap between the reads, no process or tmpfs left), the
// rows say not measured instead of 2 GiB / 1 byte contexts "met".
func TestSuspendedRowsNotMeasured(t *testing.T) {
	for _, tc := range []struct {
		name          string
		before, after uint64
		sandbox       int64
		measured      bool
	}{
		{"heap shrank, nothing left", 100 << 20, 90 << 20, 0, false},
		{"heap unchanged, nothing left", 100 << 20, 100 << 20, 0, false},
		{"heap grew", 100 << 20, 100<<20 + 5*64<<10, 0, true},
		{"heap shrank, a process left", 100 << 20, 90 << 20, 5 * 1 << 20, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			held, fits := suspendedRows(5, tc.before, tc.after, tc.sandbox, 0, "n")
			if !tc.measured {
				if held.Value != 0 || fits.Value != 0 || fits.Met != nil || !strings.HasPrefix(held.Note, "not measured") || !strings.HasPrefix(fits.Note, "not measured") {
					t.Errorf("held %+v, fits %+v", held, fits)
				}
				return
			}
			if held.Value <= 0 || fits.Value <= 0 || fits.Met == nil || !strings.Contains(held.Note, "page cache") {
				t.Errorf("held %+v, fits %+v", held, fits)
			}
		})
	}
}
