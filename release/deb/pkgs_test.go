package deb

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sandlot/sandlot/release/dist"
)

// moduleRoot is sandlot's module root, two levels up.
func moduleRoot(t *testing.T) string {
	t.Helper()
	r, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(r, "cmd/sandlot")); err != nil {
		t.Fatalf("%s is not sandlot's module root: %v", r, err)
	}
	return r
}

// buildPackage builds sandlot from src with make dist's build (this
// machine's architecture) and packages it as version.
func buildPackage(t *testing.T, src, version, commit string) string {
	t.Helper()
	out := t.TempDir()
	epoch := time.Unix(1795938546, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	start := time.Now()
	// A source from before a binary was added (the upgrade's previous
	// release) builds and packages the ones it has.
	bins := map[string]string{}
	for name, pkg := range dist.Binaries {
		if _, err := os.Stat(filepath.Join(src, pkg)); err == nil {
			bins[name] = pkg
		}
	}
	podAgent := ""
	if _, ok := bins["sandlot-pod-agent"]; ok {
		podAgent = filepath.Join(out, dist.FileName("sandlot-pod-agent", runtime.GOARCH))
	}
	if err := dist.Build(ctx, dist.Config{Src: src, Out: out, Version: version, Commit: commit, Epoch: epoch, Arches: []string{runtime.GOARCH}, Binaries: bins}); err != nil {
		t.Fatal(err)
	}
	name, err := FileName(version, runtime.GOARCH)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(out, name)
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := Build(Config{
		Version: version, Arch: runtime.GOARCH, MTime: epoch, Compression: "gzip",
		Sandlot:  filepath.Join(out, dist.FileName("sandlot", runtime.GOARCH)),
		Agent:    filepath.Join(out, dist.FileName("sandlot-agent", runtime.GOARCH)),
		PodAgent: podAgent,
	}, f); err != nil {
		t.Fatal(err)
	}
	t.Logf("built and packaged %s in %s", name, time.Since(start).Round(time.Second))
	return p
}

// previousSource is the tree of previousCommit, from git.
func previousSource(t *testing.T, repo string) string {
	t.Helper()
	dir := t.TempDir()
	archive := exec.Command("git", "-C", repo, "archive", "--format=tar", previousCommit)
	untar := exec.Command("tar", "-C", dir, "-x")
	pipe, err := archive.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	untar.Stdin = pipe
	var stderr bytes.Buffer
	archive.Stderr = &stderr
	if err := untar.Start(); err != nil {
		t.Fatal(err)
	}
	if err := archive.Run(); err != nil {
		t.Fatalf("git archive %s (the previous schema's commit must be in this repository): %v\n%s", previousCommit, err, stderr.String())
	}
	if err := untar.Wait(); err != nil {
		t.Fatal(err)
	}
	return dir
}

// dockerArchive is a one-layer image as `docker save` writes it, holding
// one file: a template for the store that needs no registry.
func dockerArchive(t *testing.T) []byte {
	t.Helper()
	var layer bytes.Buffer
	lw := tar.NewWriter(&layer)
	content := []byte("made before the upgrade\n")
	lw.WriteHeader(&tar.Header{Name: "etc/", Typeflag: tar.TypeDir, Mode: 0o755})
	lw.WriteHeader(&tar.Header{Name: "etc/upgrade-test", Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(content))})
	lw.Write(content)
	lw.Close()
	diff := sha256.Sum256(layer.Bytes())
	config, _ := json.Marshal(map[string]any{
		"architecture": runtime.GOARCH, "os": "linux",
		"config": map[string]any{"Cmd": []string{"/bin/sh"}},
		"rootfs": map[string]any{"type": "layers", "diff_ids": []string{"sha256:" + hex.EncodeToString(diff[:])}},
	})
	manifest, _ := json.Marshal([]map[string]any{{"Config": "config.json", "RepoTags": []string{"upgrade-test:latest"}, "Layers": []string{"layer.tar"}}})
	var out bytes.Buffer
	w := tar.NewWriter(&out)
	for _, f := range []struct {
		name string
		b    []byte
	}{{"config.json", config}, {"layer.tar", layer.Bytes()}, {"manifest.json", manifest}} {
		w.WriteHeader(&tar.Header{Name: f.name, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(f.b))})
		w.Write(f.b)
	}
	w.Close()
	return out.Bytes()
}

// testImages is the tests' shared image store, which must hold the
// default template (the main module's tests build it:
// image/debian/debiantest), so the daemons here start without building it.
func testImages(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(cacheDir(), "images")
	b, err := os.ReadFile(filepath.Join(dir, "refs.json"))
	var refs map[string]json.RawMessage
	if err != nil || json.Unmarshal(b, &refs) != nil || refs["default"] == nil {
		missing(t, "the tests' image store "+dir+" has no default image: run the main module's tests first (make test does), e.g. go test -run TestServeAndMCPOneDataDir ./cli")
	}
	return dir
}

// runCode runs python through the daemon in a conversation and returns the
// response.
func (d *daemon) runCode(t *testing.T, key, conversation, code string) string {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"conversationId": conversation, "args": map[string]string{"language": "python", "code": code}})
	return string(d.call(t, key, "POST", "/v1/tools/run_code", "application/json", body, 200))
}

// endContexts ends every context of key's tenant before the daemon's
// last stop: a stop leaves contexts running (a restart takes them back),
// and this emulation's /run, their state, dies with its mount namespace,
// which would leave their sandboxes running on the host.
func (d *daemon) endContexts(t *testing.T, key string) {
	t.Helper()
	var list struct {
		Contexts []struct {
			ID        string `json:"id"`
			SandboxID string `json:"sandboxId"`
		} `json:"contexts"`
	}
	if err := json.Unmarshal(d.call(t, key, "GET", "/v1/contexts", "", nil, 200), &list); err != nil {
		t.Fatal(err)
	}
	for _, c := range list.Contexts {
		d.call(t, key, "DELETE", "/v1/contexts/"+c.ID, "", nil, 204)
		if c.SandboxID == "" {
			t.Errorf("context %s has no sandbox id", c.ID)
			continue
		}
		// Ended means no process of it is left on the host, once the
		// kernel has reaped them (bounded).
		for deadline := time.Now().Add(30 * time.Second); ; {
			left := sandboxProcs(c.SandboxID)
			if left == "" {
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("context %s ended, its sandbox %s still runs: %q", c.ID, c.SandboxID, left)
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// sandboxProcs lists the processes in sandbox id's cgroup on the host:
// pids/sandlot/<id> on cgroup v1, sandlot/<id> on v2 ("" when none, or no
// such cgroup).
func sandboxProcs(id string) string {
	for _, dir := range []string{"/sys/fs/cgroup/pids/sandlot", "/sys/fs/cgroup/sandlot"} {
		if b, err := os.ReadFile(filepath.Join(dir, id, "cgroup.procs")); err == nil {
			return string(bytes.TrimSpace(b))
		}
	}
	return ""
}

func fileMode(t *testing.T, path string) (os.FileMode, uint32) {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Errorf("%v", err)
		return 0, 0
	}
	st := fi.Sys().(*syscall.Stat_t)
	return fi.Mode(), st.Uid
}

func readKey(t *testing.T, root string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, StateDir, "api-key"))
	if err != nil {
		t.Fatal(err)
	}
	key := strings.TrimSpace(string(b))
	if len(key) < 20 {
		t.Fatalf("api-key holds %q", key)
	}
	return key
}
