package local

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
)

// installAgent copies the agent binary into the state directory as
// root-owned and execute-only (0711; mode is 0755 only for runsc, see
// oci.Runtime.AgentMode), named by its digest, and returns the
// copy's path. The sandbox user can run it but not read it, and the kernel
// makes a process started from an unreadable binary non-dumpable: user
// code (same uid as the agent) then cannot open /proc/1/mem or ptrace the
// agent even if the agent forgets to protect itself.
//
// The copy is named by the source's identity (path, inode, size, mtime) so
// a restart finds it without reading the binary again.
func installAgent(src, stateDir string, mode os.FileMode) (string, error) {
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
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%d\x00%d\x00%d", src, ino, fi.Size(), fi.ModTime().UnixNano())
	if mode != 0o711 {
		fmt.Fprintf(h, "\x00%o", mode) // runsc's readable copy sits beside the 0711 one
	}
	dir := filepath.Join(stateDir, "agent")
	dst := filepath.Join(dir, "sandlot-agent-"+hex.EncodeToString(h.Sum(nil))[:16])
	if fi, err := os.Stat(dst); err == nil && fi.Mode().Perm() == mode {
		return dst, nil
	}
	if err := os.MkdirAll(dir, 0o711); err != nil {
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
	if err := tmp.Chmod(mode); err != nil {
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
