package oci

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandlot/sandlot/internal/logkey"
	"github.com/sandlot/sandlot/runtime"
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

// probe creates (without starting) a throwaway container, which exercises
// namespaces, mounts and cgroups. With crun it also keeps the seccomp
// filter crun compiled for it (the profile is the same for every sandbox).
func (r *Runtime) probe(ctx context.Context) error {
	dir := filepath.Join(r.stateDir, "probe")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	r.removeStaleProbes(ctx, dir)
	var b [4]byte
	rand.Read(b[:])
	id := "probe-" + hex.EncodeToString(b[:])
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	bdir := filepath.Join(dir, id)
	if err := r.create(ctx, bdir, runtime.Spec{ID: id, Args: []string{"/usr/bin/true"}}, "create", ""); err != nil {
		return err
	}
	if r.kind == KindCrun && r.seccompBPF == "" {
		if b, err := os.ReadFile(filepath.Join(r.stateDir, r.kind, id, "seccomp.bpf")); err == nil && len(b) > 0 && len(b)%8 == 0 {
			r.seccompBPF = base64.StdEncoding.EncodeToString(b)
		}
	}
	return r.deleteBundle(ctx, r.driver(""), id, bdir)
}

// removeStaleProbes deletes probe containers that a process which died
// mid-probe left behind (a created container waits forever). Fresh ones
// may belong to a concurrent process and are left alone.
func (r *Runtime) removeStaleProbes(ctx context.Context, dir string) {
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		info, err := e.Info()
		if err != nil || time.Since(info.ModTime()) < time.Minute {
			continue
		}
		bdir := filepath.Join(dir, e.Name())
		kind, _ := os.ReadFile(filepath.Join(bdir, "runtime"))
		if err := r.deleteBundle(ctx, r.driver(strings.TrimSpace(string(kind))), e.Name(), bdir); err != nil {
			r.log.Warn("remove stale probe", "probe", e.Name(), logkey.Err, err)
		}
	}
}
