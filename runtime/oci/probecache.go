package oci

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// probeRecord remembers a successful probe in the state dir, so that a
// short-lived process (sandlot run) does not pay a throwaway container
// (~50-100 ms) each time. It is valid for one runtime binary, kernel and
// seccomp profile; the state dir lives on /run, so a reboot forgets it.
type probeRecord struct {
	Key        string `json:"key"`
	SeccompBPF string `json:"seccompBpf,omitempty"`
}

func (r *Runtime) probeKey() (string, error) {
	fi, err := os.Stat(r.bin)
	if err != nil {
		return "", err
	}
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return "", err
	}
	prof, err := seccompProfile()
	if err != nil {
		return "", err
	}
	pj, err := json.Marshal(prof)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00%d\x00%d\x00%s\x00%s\x00", r.kind, r.bin, fi.Size(), fi.ModTime().UnixNano(),
		unix.ByteSliceToString(u.Release[:]), r.rootfs)
	h.Write(pj)
	return hex.EncodeToString(h.Sum(nil)), nil
}

// probeCached runs probe unless a record for the same key says it worked.
func (r *Runtime) probeCached(ctx context.Context) error {
	key, err := r.probeKey()
	if err != nil {
		return r.probe(ctx)
	}
	path := filepath.Join(r.stateDir, "probe-"+r.kind+".json")
	if b, err := os.ReadFile(path); err == nil {
		var rec probeRecord
		if json.Unmarshal(b, &rec) == nil && rec.Key == key {
			r.seccompBPF = rec.SeccompBPF
			return nil
		}
	}
	if err := r.probe(ctx); err != nil {
		return err
	}
	b, _ := json.Marshal(probeRecord{Key: key, SeccompBPF: r.seccompBPF})
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err == nil {
		os.Rename(tmp, path)
	}
	return nil
}
