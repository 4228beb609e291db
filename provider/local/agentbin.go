package local

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// installAgent copies the agent binary into the state directory as
// root-owned and execute-only (0711), named by its digest, and returns the
// copy's path. The sandbox user can run it but not read it, and the kernel
// makes a process started from an unreadable binary non-dumpable: user
// code (same uid as the agent) then cannot open /proc/1/mem or ptrace the
// agent even if the agent forgets to protect itself.
func installAgent(src, stateDir string) (string, error) {
	f, err := os.Open(src)
	if err != nil {
		return "", fmt.Errorf("agent binary: %w", err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("agent binary: %w", err)
	}
	dir := filepath.Join(stateDir, "agent")
	dst := filepath.Join(dir, "sandlot-agent-"+hex.EncodeToString(h.Sum(nil))[:16])
	if fi, err := os.Stat(dst); err == nil && fi.Mode().Perm() == 0o711 {
		return dst, nil
	}
	if err := os.MkdirAll(dir, 0o711); err != nil {
		return "", err
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return "", err
	}
	tmp, err := os.CreateTemp(dir, ".agent-")
	if err != nil {
		return "", err
	}
	defer os.Remove(tmp.Name())
	if _, err := io.Copy(tmp, f); err != nil {
		tmp.Close()
		return "", err
	}
	if err := tmp.Chmod(0o711); err != nil {
		tmp.Close()
		return "", err
	}
	if err := tmp.Close(); err != nil {
		return "", err
	}
	if err := os.Rename(tmp.Name(), dst); err != nil {
		return "", err
	}
	return dst, nil
}
