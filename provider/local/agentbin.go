package local

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// agentTTL is how long an agent copy in the share may go unused before any
// provider removes it. A provider marks its copy used at install and, at
// most hourly, at create (touchEvery); a removed copy lives on in the
// sandboxes that mount it.
//
// A host where agents change often (a developer's, or CI running many
// builds) can fill the share within agentTTL; when less than a quarter of
// it is free, copies unused for agentTTLLow go as well. A provider in use
// touches its copy at least every touchEvery, so a copy that old belongs to
// no running provider, and one removed anyway is installed again at the
// next create.
const (
	agentTTL    = 24 * time.Hour
	agentTTLLow = 3 * touchEvery
	touchEvery  = time.Hour
)

// installAgent copies the agent binary into the host's share (runtime/oci)
// as a root-owned file of mode (0711, execute-only; 0755 only for runsc,
// see oci.Runtime.AgentMode) and returns the copy's path. The sandbox user
// can run it but not read it, and the kernel makes a process started from
// an unreadable binary non-dumpable: user code cannot open /proc/1/mem or
// ptrace the agent even if the agent forgets to protect itself.
//
// The share serves every daemon on the host, so the copy is named by its
// content: identical builds share one copy. A small index (.src/<identity
// of the source: path, inode, size, mtime>) finds it again without reading
// the binary. Copies unused for agentTTL are removed.
func installAgent(src, share string, mode os.FileMode) (string, error) {
	f, err := os.Open(src)
	if err != nil {
		return "", fmt.Errorf("agent binary: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", fmt.Errorf("agent binary: %w", err)
	}
	var ino uint64
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		ino = st.Ino
	}
	dir := filepath.Join(share, "agent")
	if err := os.MkdirAll(filepath.Join(dir, ".src"), 0o711); err != nil {
		return "", err
	}
	idh := sha256.Sum256(fmt.Appendf(nil, "%s\x00%d\x00%d\x00%d\x00%o", src, ino, fi.Size(), fi.ModTime().UnixNano(), mode))
	index := filepath.Join(dir, ".src", hex.EncodeToString(idh[:8]))
	if b, err := os.ReadFile(index); err == nil {
		dst := filepath.Join(dir, filepath.Base(strings.TrimSpace(string(b))))
		if fi, err := os.Stat(dst); err == nil && fi.Mode().Perm() == mode {
			touch(dst)
			return dst, nil
		}
	}
	tmp, err := os.CreateTemp(dir, ".agent-")
	if err != nil {
		return "", err
	}
	defer os.Remove(tmp.Name())
	h := sha256.New()
	if _, err := io.Copy(io.MultiWriter(tmp, h), f); err != nil {
		tmp.Close()
		return "", err
	}
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return "", err
	}
	if err := tmp.Close(); err != nil {
		return "", err
	}
	name := fmt.Sprintf("sandlot-agent-%s-%o", hex.EncodeToString(h.Sum(nil))[:16], mode)
	dst := filepath.Join(dir, name)
	if err := os.Rename(tmp.Name(), dst); err != nil {
		return "", err
	}
	if err := os.WriteFile(index, []byte(name), 0o600); err != nil {
		return "", err
	}
	removeUnused(dir, unusedCutoff(dir, time.Now()))
	return dst, nil
}

// touch marks a copy used now.
func touch(p string) {
	now := time.Now()
	os.Chtimes(p, now, now)
}

// unusedCutoff is the last-use time before which a copy in dir is removed:
// agentTTL ago, or agentTTLLow ago when less than a quarter of the share is
// free.
func unusedCutoff(dir string, now time.Time) time.Time {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err == nil && st.Blocks > 0 && st.Bavail < st.Blocks/4 {
		return now.Add(-agentTTLLow)
	}
	return now.Add(-agentTTL)
}

// removeUnused removes agent copies and index entries last used before
// cutoff.
func removeUnused(dir string, cutoff time.Time) {
	for _, d := range []string{dir, filepath.Join(dir, ".src")} {
		ents, _ := os.ReadDir(d)
		for _, e := range ents {
			if e.IsDir() {
				continue
			}
			if info, err := e.Info(); err == nil && info.ModTime().Before(cutoff) {
				os.Remove(filepath.Join(d, e.Name()))
			}
		}
	}
}

// agentCopy returns the provider's agent copy in the share, installing it
// again if another provider removed it (copies unused for agentTTL go),
// and marks it used.
func (p *Provider) agentCopy() (string, error) {
	p.agentMu.Lock()
	defer p.agentMu.Unlock()
	fi, err := os.Stat(p.agentPath)
	if err == nil {
		if time.Since(fi.ModTime()) > touchEvery {
			touch(p.agentPath)
		}
		return p.agentPath, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	path, err := installAgent(p.agentSrc, p.rt.ShareDir(), p.rt.AgentMode())
	if err != nil {
		return "", fmt.Errorf("agent binary: %w", err)
	}
	p.agentPath = path
	return path, nil
}
