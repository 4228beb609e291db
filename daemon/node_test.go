package daemon

import (
	"errors"
	"strings"
	"testing"

	"github.com/sandlot/sandlot/errdefs"
)

// TestResolveNode: the node id is the one given (Config.Node: --node or
// $SANDLOT_NODE), else the data dir's, where it is kept per state dir: a
// restart keeps it, and serve and mcp on one data dir (different state
// dirs) get two.
func TestResolveNode(t *testing.T) {
	data := t.TempDir()
	serveID, err := resolveNode("", data, "")
	if err != nil || checkNode(serveID, "test") != nil {
		t.Fatalf("first start: %q, %v", serveID, err)
	}
	again, err := resolveNode("", data, "/run/sandlot")
	if err != nil || again != serveID {
		t.Fatalf("restart: %q, %v; want %q", again, err, serveID)
	}
	mcpID, err := resolveNode("", data, "/run/sandlot/mcp")
	if err != nil || mcpID == serveID {
		t.Fatalf("another state dir on the same data dir: %q, %v; want a node other than %q", mcpID, err, serveID)
	}
	if id, err := resolveNode("", t.TempDir(), ""); err != nil || id == serveID {
		t.Fatalf("another data dir: %q, %v; want a node other than %q", id, err, serveID)
	}
	if id, err := resolveNode("web.1", data, ""); err != nil || id != "web.1" {
		t.Fatalf("--node: %q, %v", id, err)
	}
	for _, bad := range []string{"a b", "x/y", strings.Repeat("n", 129), "é"} {
		if _, err := resolveNode(bad, data, ""); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("--node %q: %v, want invalid_argument", bad, err)
		}
	}
}
