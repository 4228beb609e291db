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
	// python3 -S: no site-packages, so no IPython.
	py := filepath.Join(dir, "python3")
	if err := os.WriteFile(py, []byte("#!/bin/sh\nexec /usr/bin/python3 -S \"$@\"\n"), 0o755); err != nil {
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
