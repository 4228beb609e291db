package kernels

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/internal/testenv"
)

// TestIPythonMissing: in an image without IPython (a custom template) an
// IPython cell still runs, in the plain kernel, and stderr says why once.
func TestIPythonMissing(t *testing.T) {
	testenv.RequireBinary(t, "/usr/bin/python3")
	dir := t.TempDir()
	// An IPython package first on the path that is not there: the kernel
	// sets up site-packages itself (it runs with -S), so -S in a wrapper
	// would no longer hide the host's IPython.
	shadow := filepath.Join(dir, "shadow", "IPython")
	if err := os.MkdirAll(shadow, 0o755); err != nil {
		t.Fatal(err)
	}
	missing := "raise ModuleNotFoundError(\"No module named 'IPython'\", name='IPython')\n"
	if err := os.WriteFile(filepath.Join(shadow, "__init__.py"), []byte(missing), 0o644); err != nil {
		t.Fatal(err)
	}
	py := filepath.Join(dir, "python3")
	wrapper := "#!/bin/sh\nPYTHONPATH=" + filepath.Dir(shadow) + " exec /usr/bin/python3 \"$@\"\n"
	if err := os.WriteFile(py, []byte(wrapper), 0o755); err != nil {
		t.Fatal(err)
	}
	m := New(Config{Home: dir, Python: py})
	defer m.Close()
	ctx := context.Background()
	r, err := m.Run(ctx, agent.RunCodeParams{Language: agent.Python, Code: "x = 40\nx + 2", IPython: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.Error != nil || len(r.Results) != 1 || r.Results[0].Text != "42" || !strings.Contains(r.Stderr, "IPython is not installed") {
		t.Fatalf("first cell: %+v error %+v", r, r.Error)
	}
	r, err = m.Run(ctx, agent.RunCodeParams{Language: agent.Python, Code: "x", IPython: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.Stderr != "" || len(r.Results) != 1 || r.Results[0].Text != "40" {
		t.Fatalf("second cell: %+v error %+v", r, r.Error)
	}
}
