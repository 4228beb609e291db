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
	// A measurement (at least a record's worth, with its goal), or rows
	// that say they are none (heldRows; TestHeldRows).
	measured := held.Met != nil && held.Value >= 0.2 && held.Unit == "KiB" && fits.Met != nil && fits.Value > 0
	unmeasured := held.Met == nil && fits.Met == nil && held.Value == 0 && fits.Value == 0 &&
		strings.HasPrefix(held.Note, "not measured") && strings.HasPrefix(fits.Note, "not measured")
	if !measured && !unmeasured {
		t.Errorf("held %+v, per 2 GiB %+v", held, fits)
	}
	if ids, _ := p.List(context.Background()); len(ids) != 0 {
		t.Errorf("sandboxes left running: %v", ids)
	}
}

// TestHeldRows: the files-only rows of the memory a suspended context
// holds say "not measured" (no value, no goal met) when the reads found
// nothing (the GC shrank the heap between them, no process or tmpfs left)
// or less than a context's record: 40 bytes once read as 53 million
// contexts per 2 GiB, "met".
func TestHeldRows(t *testing.T) {
	const mib = 1 << 20
	for _, tc := range []struct {
		name          string
		before, after uint64
		sandbox       int64
		measured      bool
	}{
		{"heap shrank, nothing left", 100 * mib, 90 * mib, 0, false},
		{"heap unchanged, nothing left", 100 * mib, 100 * mib, 0, false},
		{"40 bytes each", 100 * mib, 100*mib + 5*40, 0, false},
		{"255 bytes each", 100 * mib, 100*mib + 5*255, 0, false},
		{"0.7 KiB each (a steady reading)", 100 * mib, 100*mib + 5*717, 0, true},
		{"3 KiB each", 100 * mib, 100*mib + 5*3<<10, 0, true},
		{"heap shrank, a process left", 100 * mib, 90 * mib, 5 * mib, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rows := heldRows("files only", 5, tc.before, tc.after, tc.sandbox, 0)
			if len(rows) != 2 {
				t.Fatalf("rows %+v", rows)
			}
			held, fits := rows[0], rows[1]
			if !strings.Contains(held.Name, "(files only)") || !strings.Contains(fits.Name, "per 2 GiB") {
				t.Fatalf("names %q %q", held.Name, fits.Name)
			}
			if !tc.measured {
				if held.Value != 0 || fits.Value != 0 || held.Met != nil || fits.Met != nil ||
					!strings.HasPrefix(held.Note, "not measured") || !strings.HasPrefix(fits.Note, "not measured") {
					t.Errorf("held %+v, fits %+v", held, fits)
				}
				return
			}
			if held.Value < 0.2 || held.Met == nil || fits.Value <= 0 || fits.Met == nil {
				t.Errorf("held %+v, fits %+v", held, fits)
			}
		})
	}
}
