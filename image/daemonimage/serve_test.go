package daemonimage_test

import (
	"archive/tar"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"

	"github.com/sandlot/sandlot/client"
	"github.com/sandlot/sandlot/image/daemonimage"
	"github.com/sandlot/sandlot/image/debian/debiantest"
	"github.com/sandlot/sandlot/internal/testenv"
)

// TestDaemonImageServes runs the daemon image as docs/install.md's run
// line does (privileged: every capability the host has, no seccomp, the
// host's network and cgroups, devices allowed), with runc and the real
// Debian base, and runs python through it: the daemon starts in the
// image, finds its runtime (crun in the image), and its sandbox answers.
func TestDaemonImageServes(t *testing.T) {
	testenv.RequireRoot(t)
	runc := testenv.RequireBinary(t, "runc")
	ctx := context.Background()
	debiantest.Default(t) // the default template's image, which the daemon finds in the shared store
	s, base := debiantest.Image(t, daemonimage.BaseConfig(), "sandlot-daemon-base")
	b, err := s.V1(ctx, base.Digest)
	if err != nil {
		t.Fatal(err)
	}
	agent, err := os.ReadFile(testenv.AgentBinary(t))
	if err != nil {
		t.Fatal(err)
	}
	img, err := daemonimage.Build(ctx, b, staticSandlot(t), agent, "test")
	if err != nil {
		t.Fatal(err)
	}
	rootfs := filepath.Join(t.TempDir(), "rootfs")
	extract(t, img, rootfs)

	data, bundle := t.TempDir(), t.TempDir()
	port := freePort(t)
	spec := privileged(t, rootfs, []string{daemonimage.SandlotPath, "serve", "--addr", "127.0.0.1:" + port,
		"--pool-size", "0", "--image-gc-interval", "0"}, [][2]string{
		{data, daemonimage.DataDir},
		{debiantest.StoreDir(), daemonimage.DataDir + "/images"}, // no GC there: --image-gc-interval 0
	})
	if err := os.WriteFile(filepath.Join(bundle, "config.json"), spec, 0o600); err != nil {
		t.Fatal(err)
	}
	id := "sandlot-daemonimage-" + strconv.Itoa(os.Getpid())
	logPath := filepath.Join(t.TempDir(), "daemon.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	cmd := exec.Command(runc, "run", "--bundle", bundle, id)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// The daemon stops as an operator stops it (SIGTERM), or is killed
	// when it does not within a minute: killed, it leaves its sandboxes'
	// cgroups on the host (its pid namespace takes their processes).
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	stopped := false
	stop := func() error {
		if stopped {
			return nil
		}
		stopped = true
		_ = exec.Command(runc, "kill", id, "TERM").Run()
		select {
		case err := <-waited:
			return err
		case <-time.After(time.Minute):
			_ = exec.Command(runc, "kill", id, "KILL").Run()
			<-waited
			return errors.New("the daemon did not stop within a minute of SIGTERM")
		}
	}
	t.Cleanup(func() {
		stop()
		_ = exec.Command(runc, "delete", "-f", id).Run()
	})
	url := "http://127.0.0.1:" + port
	log := func() string { b, _ := os.ReadFile(logPath); return string(b) }
	deadline := time.Now().Add(3 * time.Minute)
	for {
		resp, err := http.Get(url + "/readyz")
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK && strings.Contains(string(body), `"ready":true`) {
				break
			}
		}
		if time.Now().After(deadline) || cmd.ProcessState != nil {
			t.Fatalf("the daemon in its image is not ready after 3 minutes: %v\n%s", err, log())
		}
		time.Sleep(200 * time.Millisecond)
	}
	key, err := os.ReadFile(filepath.Join(data, "api-key"))
	if err != nil {
		t.Fatalf("the daemon wrote no API key in its data dir: %v\n%s", err, log())
	}
	c := client.New(url, client.WithAPIKey(strings.TrimSpace(string(key))))
	res, err := c.RunCode(ctx, client.RunCodeRequest{Language: "python", Code: "import sys; print(sys.version_info[0] * 14)"})
	if err != nil {
		t.Fatalf("run_code through the daemon in its image: %v\n%s", err, log())
	}
	if !strings.Contains(res.Stdout, "42") {
		t.Errorf("stdout %q, want 42", res.Stdout)
	}
	// Its context is deleted through the API, then the daemon stops: the
	// delete's teardown left no cgroup of the sandbox on the host. This
	// does not tell a clean stop from a killed one (the sandbox is gone
	// before the stop); what a stop with live contexts leaves is removed
	// by the next daemon's reconcile (runtime/oci's TestDeleteVanished).
	l, err := c.ListContexts(ctx, client.ListOptions{Status: []string{"active"}})
	if err != nil || len(l.Contexts) != 1 {
		t.Fatalf("contexts: %v %v", l, err)
	}
	sb := l.Contexts[0].SandboxID
	if err := c.DeleteContext(ctx, l.Contexts[0].ID); err != nil {
		t.Fatal(err)
	}
	if err := stop(); err != nil {
		t.Fatalf("stop: %v\n%s", err, log())
	}
	if sb == "" {
		t.Fatalf("the context named no sandbox: %+v", l.Contexts[0])
	}
	if dirs := testenv.SandboxCgroups(sb); len(dirs) != 0 {
		t.Errorf("the daemon left its sandbox's cgroups: %v", dirs)
	}
}

// staticSandlot builds cmd/sandlot as make images does (CGO_ENABLED=0,
// -trimpath): make build's sandlot is dynamically linked.
func staticSandlot(t *testing.T) []byte {
	t.Helper()
	out := filepath.Join(t.TempDir(), "sandlot")
	cmd := exec.Command("go", "build", "-trimpath", "-o", out, "github.com/sandlot/sandlot/cmd/sandlot")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("static sandlot: %v\n%s", err, b)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// extract writes img's flattened root into dir with owners and modes.
func extract(t *testing.T, img v1.Image, dir string) {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, filepath.Clean("/"+h.Name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		switch h.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(p, 0o755)
		case tar.TypeReg:
			var f *os.File
			if f, err = os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600); err == nil {
				_, err = io.Copy(f, tr)
				f.Close()
			}
		case tar.TypeSymlink:
			err = os.Symlink(h.Linkname, p)
		case tar.TypeLink:
			err = os.Link(filepath.Join(dir, filepath.Clean("/"+h.Linkname)), p)
		default:
			continue // devices and FIFOs: runc makes the container's /dev
		}
		if err != nil {
			t.Fatalf("%s: %v", h.Name, err)
		}
		if err := os.Lchown(p, h.Uid, h.Gid); err != nil {
			t.Fatal(err)
		}
		if h.Typeflag != tar.TypeSymlink && h.Typeflag != tar.TypeLink {
			if err := os.Chmod(p, h.FileInfo().Mode()); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
}

// capNames are the capabilities by number (linux/capability.h).
var capNames = []string{"CHOWN", "DAC_OVERRIDE", "DAC_READ_SEARCH", "FOWNER", "FSETID", "KILL", "SETGID", "SETUID",
	"SETPCAP", "LINUX_IMMUTABLE", "NET_BIND_SERVICE", "NET_BROADCAST", "NET_ADMIN", "NET_RAW", "IPC_LOCK", "IPC_OWNER",
	"SYS_MODULE", "SYS_RAWIO", "SYS_CHROOT", "SYS_PTRACE", "SYS_PACCT", "SYS_ADMIN", "SYS_BOOT", "SYS_NICE",
	"SYS_RESOURCE", "SYS_TIME", "SYS_TTY_CONFIG", "MKNOD", "LEASE", "AUDIT_WRITE", "AUDIT_CONTROL", "SETFCAP",
	"MAC_OVERRIDE", "MAC_ADMIN", "SYSLOG", "WAKE_ALARM", "BLOCK_SUSPEND", "AUDIT_READ", "PERFMON", "BPF", "CHECKPOINT_RESTORE"}

// hostCaps are the capabilities in this process's bounding set: what a
// privileged container gets (a container cannot have more).
func hostCaps(t *testing.T) []string {
	t.Helper()
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	var bnd uint64
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "CapBnd:"); ok {
			if bnd, err = strconv.ParseUint(strings.TrimSpace(v), 16, 64); err != nil {
				t.Fatal(err)
			}
		}
	}
	var out []string
	for i, n := range capNames {
		if bnd&(1<<i) != 0 {
			out = append(out, "CAP_"+n)
		}
	}
	return out
}

// privileged is the OCI runtime spec of `podman run --privileged
// --network host --cgroupns host`: the host's capabilities, no seccomp,
// no masked or read-only paths, all devices allowed, the host's network
// and cgroup namespaces with /sys (and its cgroups) writable, and binds
// ({host path, container path}, parents first).
func privileged(t *testing.T, rootfs string, args []string, binds [][2]string) []byte {
	t.Helper()
	caps := hostCaps(t)
	mounts := []map[string]any{
		{"destination": "/proc", "type": "proc", "source": "proc"},
		{"destination": "/dev", "type": "tmpfs", "source": "tmpfs", "options": []string{"nosuid", "strictatime", "mode=755", "size=65536k"}},
		{"destination": "/dev/pts", "type": "devpts", "source": "devpts", "options": []string{"nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620"}},
		{"destination": "/dev/shm", "type": "tmpfs", "source": "shm", "options": []string{"nosuid", "noexec", "nodev", "mode=1777", "size=65536k"}},
		{"destination": "/dev/mqueue", "type": "mqueue", "source": "mqueue", "options": []string{"nosuid", "noexec", "nodev"}},
		{"destination": "/sys", "type": "bind", "source": "/sys", "options": []string{"rbind", "rw"}},
		{"destination": "/run/sandlot", "type": "tmpfs", "source": "tmpfs", "options": []string{"nosuid", "nodev", "mode=755"}},
	}
	for _, b := range binds {
		mounts = append(mounts, map[string]any{"destination": b[1], "type": "bind", "source": b[0], "options": []string{"rbind", "rw"}})
	}
	spec := map[string]any{
		"ociVersion": "1.0.2",
		"process": map[string]any{
			"user":         map[string]any{"uid": 0, "gid": 0},
			"args":         args,
			"env":          []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8", "SANDLOT_DATA_DIR=" + daemonimage.DataDir},
			"cwd":          "/",
			"capabilities": map[string]any{"bounding": caps, "effective": caps, "permitted": caps},
		},
		"root":     map[string]any{"path": rootfs},
		"hostname": "sandlot",
		"mounts":   mounts,
		"linux": map[string]any{
			"namespaces": []map[string]string{{"type": "pid"}, {"type": "ipc"}, {"type": "uts"}, {"type": "mount"}},
			"resources":  map[string]any{"devices": []map[string]any{{"allow": true, "access": "rwm"}}},
		},
	}
	b, err := json.MarshalIndent(spec, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	return b
}
