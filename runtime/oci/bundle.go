package oci

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/runtime"
)

// A bundle (bundles/<id>/) is the record of one sandbox: config.json (with
// its id mappings), runtime (which binary made it), pid (its init, written
// by the runtime), secret (Spec.Secret, root only) and the runtime's log.
// A fresh process finds everything it needs there.

// sandboxInfo is what a bundle records about its sandbox.
type sandboxInfo struct {
	kind string
	ids  IDRange
	uid  uint32 // the init's uid inside (Spec.User)
}

// bundleConfigs maps every bundle's (and probe's) id to its config.json.
func bundleConfigs(stateDir string) map[string]string {
	out := map[string]string{}
	for _, sub := range []string{"bundles", "probe"} {
		ents, _ := os.ReadDir(filepath.Join(stateDir, sub))
		for _, e := range ents {
			if e.IsDir() {
				out[e.Name()] = filepath.Join(stateDir, sub, e.Name(), "config.json")
			}
		}
	}
	return out
}

// sandboxInfo returns what sandbox id's bundle records (cached).
func (r *Runtime) sandboxInfo(id string) (*sandboxInfo, error) {
	if v, ok := r.info.Load(id); ok {
		return v.(*sandboxInfo), nil
	}
	cfg := filepath.Join(r.bundle(id), "config.json")
	ids, err := readIDRange(cfg)
	if err != nil {
		return nil, fmt.Errorf("sandbox %s: %w", id, errdefs.ErrNotFound)
	}
	uid, err := readInitUID(cfg)
	if err != nil {
		return nil, fmt.Errorf("sandbox %s: %w", id, errdefs.ErrNotFound)
	}
	info := &sandboxInfo{kind: r.driverFor(id).kind, ids: ids, uid: uid}
	r.info.Store(id, info)
	return info, nil
}

// cacheInfo records what a bundle being created holds (its config sp), so
// that the dial after it reads nothing back: the same as sandboxInfo
// would read from config.json (a new process still reads it from there).
func (r *Runtime) cacheInfo(id string, sp *specs.Spec) {
	m := sp.Linux.UIDMappings
	if len(m) != 1 || m[0].ContainerID != 0 {
		return // sandboxInfo says why
	}
	r.info.Store(id, &sandboxInfo{kind: r.kind, ids: IDRange{Base: m[0].HostID, Size: m[0].Size}, uid: sp.Process.User.UID})
}

// IDRange returns sandbox id's host uid/gid range.
func (r *Runtime) IDRange(id string) (IDRange, error) {
	if err := runtime.CheckID(id); err != nil {
		return IDRange{}, err
	}
	info, err := r.sandboxInfo(id)
	if err != nil {
		return IDRange{}, err
	}
	return info.ids, nil
}

// Secret implements runtime.Runtime.
func (r *Runtime) Secret(id string) ([]byte, error) {
	if err := runtime.CheckID(id); err != nil {
		return nil, err
	}
	b, err := os.ReadFile(filepath.Join(r.bundle(id), "secret"))
	if err != nil {
		return nil, fmt.Errorf("sandbox %s secret: %w", id, errdefs.ErrNotFound)
	}
	return b, nil
}

// bundle is sandbox id's bundle directory.
func (r *Runtime) bundle(id string) string { return filepath.Join(r.stateDir, "bundles", id) }

// secretPipe returns the read end of a pipe that holds b and then ends.
func secretPipe(b []byte) (*os.File, error) {
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer pw.Close()
	if len(b) > 4096 { // within the pipe's buffer: the write must not block
		pr.Close()
		return nil, fmt.Errorf("secret of %d bytes: %w", len(b), errdefs.ErrInvalidArgument)
	}
	if _, err := pw.Write(b); err != nil {
		pr.Close()
		return nil, err
	}
	return pr, nil
}

// readInitUID returns the uid inside of a bundle's init process.
func readInitUID(configPath string) (uint32, error) {
	b, err := os.ReadFile(configPath)
	if err != nil {
		return 0, err
	}
	var sp struct {
		Process struct {
			User struct {
				UID uint32 `json:"uid"`
			} `json:"user"`
		} `json:"process"`
	}
	if err := json.Unmarshal(b, &sp); err != nil {
		return 0, err
	}
	return sp.Process.User.UID, nil
}
