package kernels

import (
	"strings"
	"testing"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/internal/testenv"
)

// TestPythonTracebackSourceOfEarlierCells: a function defined in an
// earlier cell shows its source line in a later cell's traceback, after
// many cells that defined nothing (the kernel keeps the source only of
// cells that define code, so an exception saved by a cell that defined
// nothing shows its line without the source), and a cell's own error
// shows its line.
func TestPythonTracebackSourceOfEarlierCells(t *testing.T) {
	testenv.RequireBinary(t, "/usr/bin/python3")
	m := needs(t, agent.Python)
	r := runIn(t, m, agent.RunCodeParams{Language: agent.Python, Code: "def g():\n    return 1 / 0  # in g"})
	if r.Error != nil {
		t.Fatalf("def: %+v", r.Error)
	}
	for i := 0; i < 30; i++ {
		if r = runIn(t, m, agent.RunCodeParams{Language: agent.Python, Code: "x = 1\nx + 1"}); r.Error != nil {
			t.Fatalf("cell %d: %+v", i, r.Error)
		}
	}
	r = runIn(t, m, agent.RunCodeParams{Language: agent.Python, Code: "y = 2\ng()  # the call"})
	if r.Error == nil || r.Error.Name != "ZeroDivisionError" || !strings.Contains(r.Error.Traceback, "return 1 / 0  # in g") || !strings.Contains(r.Error.Traceback, "g()  # the call") {
		t.Fatalf("traceback: %+v", r.Error)
	}
	// A cell that defines nothing is not kept: an exception it saved and
	// a later cell raised shows its line without the source.
	r = runIn(t, m, agent.RunCodeParams{Language: agent.Python, Code: "try:\n    1 / 0  # saved here\nexcept Exception as e:\n    saved = e"})
	if r.Error != nil {
		t.Fatalf("save: %+v", r.Error)
	}
	r = runIn(t, m, agent.RunCodeParams{Language: agent.Python, Code: "raise saved"})
	if r.Error == nil || r.Error.Name != "ZeroDivisionError" || !strings.Contains(r.Error.Traceback, "raise saved") || strings.Contains(r.Error.Traceback, "# saved here") {
		t.Fatalf("saved: %+v", r.Error)
	}
	// linecache, which tracebacks read the cells from, holds no more than
	// the cells kept: errors in cells that define nothing do not pile up.
	for i := 0; i < 20; i++ {
		if r = runIn(t, m, agent.RunCodeParams{Language: agent.Python, Code: "1 / 0"}); r.Error == nil {
			t.Fatalf("error cell %d: no error", i)
		}
	}
	r = runIn(t, m, agent.RunCodeParams{Language: agent.Python, Code: `sum(k.startswith("<cell-") for k in __import__("linecache").cache)`})
	if r.Error != nil || len(texts(r)) != 1 || texts(r)[0] != "2" {
		t.Fatalf("cells in linecache after 20 errors: %+v error %+v, want 2 (g's and the last error's)", texts(r), r.Error)
	}
	r = runIn(t, m, agent.RunCodeParams{Language: agent.Python, Code: "z = [1]\nz[5]  # out of range"})
	if r.Error == nil || r.Error.Name != "IndexError" || !strings.Contains(r.Error.Traceback, "z[5]  # out of range") {
		t.Fatalf("own traceback: %+v", r.Error)
	}
}
