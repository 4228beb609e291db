package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandlot/sandlot/bench"
	"github.com/sandlot/sandlot/errdefs"
)

// TestBenchStores: --store sqlite gives each manager and daemon a SQLite
// file of its own (two open at once do not share one); memory gives none;
// anything else is refused.
func TestBenchStores(t *testing.T) {
	dir := t.TempDir()
	b, err := newBenchStores("sqlite", dir)
	if err != nil {
		t.Fatal(err)
	}
	if u1, u2 := b.url("e2b"), b.url("e2b"); u1 == u2 || !strings.HasPrefix(u1, "sqlite://"+dir) {
		t.Fatalf("two daemons' stores: %q and %q", u1, u2)
	}
	open := b.open()
	st, closeStore, err := open(context.Background(), "manager")
	if err != nil {
		t.Fatal(err)
	}
	defer closeStore()
	if _, err := st.Get(context.Background(), "no-such-context"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("a fresh store's Get: %v", err)
	}
	if files, _ := filepath.Glob(filepath.Join(dir, "manager-*.db")); len(files) != 1 {
		t.Fatalf("manager's SQLite files: %v", files)
	}
	m, err := newBenchStores("memory", dir)
	if err != nil || m.open() != nil || m.url("http") != "memory:" {
		t.Fatalf("memory: %v, url %q", err, m.url("http"))
	}
	if _, err := newBenchStores("postgres", dir); err == nil {
		t.Fatal("--store postgres accepted")
	}
}

// TestBenchWarmOnSQLite: the warm rows measured with every manager on a
// SQLite store (serve's default), and the report says so.
func TestBenchWarmOnSQLite(t *testing.T) {
	lrunNeedAgent(t)
	var out, errw bytes.Buffer
	err := Run(context.Background(), []string{"bench", "--json", "--store", "sqlite", "--cases", "^warm round trip", "--floor-n", "50",
		"--warm-n", "20", "--http-n", "20", "--peer-n", "0", "--desktop-n", "0", "--e2b-n", "0",
		"--images-dir", filepath.Join(t.TempDir(), "none")}, nil, &out, &errw)
	if err != nil {
		t.Fatalf("bench: %v\n%s", err, errw.String())
	}
	var rep bench.Report
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("bench --json output: %v\n%s", err, out.String())
	}
	if rep.Store != "sqlite" {
		t.Errorf("report's store %q", rep.Store)
	}
	for _, name := range []string{"warm run_code python (1+1), Go API", "warm run_code python (1+1), HTTP loopback keep-alive"} {
		found := false
		for _, f := range rep.Figures {
			if f.Name == name {
				found = true
				if f.N != 20 || f.P50 <= 0 {
					t.Errorf("%s: %+v", name, f)
				}
			}
		}
		if !found {
			t.Errorf("no figure %q", name)
		}
	}
	var md bytes.Buffer
	if err := Run(context.Background(), []string{"bench", "--markdown", "-"}, bytes.NewReader(out.Bytes()), &md, &errw); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(md.String(), ", store sqlite)") {
		t.Errorf("markdown does not name the store:\n%s", md.String())
	}
}
