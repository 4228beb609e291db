package daemon

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/runtime/oci"
)

// nodesDir holds one node id file per state dir in the data dir.
const nodesDir = "nodes"

// resolveNode returns the daemon's node id: id when given (Config.Node,
// which the CLI fills from --node or $SANDLOT_NODE), else the id kept in
// DATA/nodes/ for this state dir, created on first start.
//
// Why per state dir: sandlot serve and sandlot mcp on one data dir are two
// daemons on one store and must be two nodes, while a restart of either
// must stay the node it was (to reconcile its own records). One state dir
// is held by one daemon at a time (LockStateDir), so the pair (data dir,
// state dir) names exactly one daemon.
func resolveNode(id, dataDir, stateDir string) (string, error) {
	if id != "" {
		return id, checkNode(id, "--node")
	}
	if stateDir == "" {
		stateDir = oci.DefaultStateDir
	}
	abs, err := filepath.Abs(stateDir)
	if err != nil {
		return "", fmt.Errorf("state dir %s: %w", stateDir, err)
	}
	sum := sha256.Sum256([]byte(abs))
	path := filepath.Join(dataDir, nodesDir, hex.EncodeToString(sum[:8]))
	if id, err := readNodeID(path); !errors.Is(err, fs.ErrNotExist) {
		return id, err
	}
	return createNodeID(path, abs)
}

// readNodeID reads the id on the first line of path.
func readNodeID(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	id := strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0])
	return id, checkNode(id, path)
}

// createNodeID writes a new node id to path, unless another process wrote
// one first: the file is linked into place, which fails if it exists.
func createNodeID(path, stateDir string) (string, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return "", fmt.Errorf("node id: %w", err)
	}
	id := newNodeID()
	tmp, err := os.CreateTemp(filepath.Dir(path), ".node-")
	if err != nil {
		return "", fmt.Errorf("node id: %w", err)
	}
	defer os.Remove(tmp.Name())
	_, werr := fmt.Fprintf(tmp, "%s\n# the sandlot node of state dir %s; see docs/contexts-nodes.md, Nodes\n", id, stateDir)
	if err := errors.Join(werr, tmp.Close()); err != nil {
		return "", fmt.Errorf("node id: %w", err)
	}
	if err := os.Link(tmp.Name(), path); errors.Is(err, fs.ErrExist) {
		return readNodeID(path)
	} else if err != nil {
		return "", fmt.Errorf("node id: %w", err)
	}
	return id, nil
}

// newNodeID is the host name (so operators recognize it) and a random
// suffix (so two daemons on one host differ).
func newNodeID() string {
	host, _ := os.Hostname()
	host = sanitizeNode(host)
	if len(host) > 48 {
		host = host[:48]
	}
	if host == "" {
		host = "node"
	}
	b := make([]byte, 4)
	rand.Read(b)
	return host + "-" + hex.EncodeToString(b)
}

// sanitizeNode replaces every byte a node id may not hold with '-'.
func sanitizeNode(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !nodeByte(c) {
			b[i] = '-'
		}
	}
	return string(b)
}

func nodeByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-'
}

// checkNode accepts 1 to 128 bytes of [A-Za-z0-9._-]: a node id appears
// in errors, logs and E2B metadata filters, where it must read the same
// after any escaping.
func checkNode(id, from string) error {
	ok := id != "" && len(id) <= 128
	for i := 0; ok && i < len(id); i++ {
		ok = nodeByte(id[i])
	}
	if !ok {
		return fmt.Errorf("node id %q from %s: want 1 to 128 bytes of A-Z, a-z, 0-9, '.', '_' or '-': %w",
			id, from, errdefs.ErrInvalidArgument)
	}
	return nil
}
