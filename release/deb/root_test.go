package deb

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The install tests' Debian root: mmdebstrap's apt variant of Debian's
// suite with the package's dependencies (their first alternatives) and
// systemd (deb-systemd-helper, systemd-analyze), made once per machine and
// kept as a tarball beside the tests' images (SANDLOT_TEST_IMAGES, like
// image/debian/debiantest's). Each test extracts a fresh copy.
const (
	rootSuite  = "bookworm"
	rootMirror = "http://deb.debian.org/debian"
	// rootRecipe changes when the way the root is made changes.
	rootRecipe = "1"
)

func cacheDir() string {
	if d := os.Getenv("SANDLOT_TEST_IMAGES"); d != "" {
		return d
	}
	return "/var/cache/sandlot-test"
}

// rootPackages are what the root holds beyond the apt variant.
func rootPackages() []string {
	pkgs := []string{"systemd"}
	for _, d := range Depends {
		first, _, _ := strings.Cut(d, "|")
		pkgs = append(pkgs, strings.TrimSpace(first))
	}
	return pkgs
}

// baseRoot returns the cached root tarball, making it first when no test
// has (minutes: mmdebstrap downloads and installs the packages), under an
// exclusive lock other test processes wait on.
func baseRoot(t *testing.T) string {
	t.Helper()
	mmdebstrap := requireBinary(t, "mmdebstrap")
	h := sha256.Sum256([]byte(strings.Join(append([]string{rootRecipe, rootSuite, rootMirror}, rootPackages()...), "\n")))
	dir := cacheDir()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	tarball := filepath.Join(dir, "deb-root-"+hex.EncodeToString(h[:])[:16]+".tar")
	lock, err := os.OpenFile(filepath.Join(dir, "deb-root.lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(tarball); err == nil {
		return tarball
	}
	start := time.Now()
	// mmdebstrap writes a tarball only to a name ending in .tar (any
	// other is a directory).
	tmp := strings.TrimSuffix(tarball, ".tar") + ".tmp.tar"
	// In a mount namespace of its own: mmdebstrap mounts /proc, /sys and
	// /dev into its tree, and a run that is killed would leave them on the
	// host.
	cmd := exec.Command("unshare", "--mount", "--propagation", "private", "--",
		mmdebstrap, "--variant=apt", "--mode=root", "--include="+strings.Join(rootPackages(), ","), rootSuite, tmp, rootMirror)
	cmd.Env = append(os.Environ(), "SOURCE_DATE_EPOCH=1700000000")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		os.Remove(tmp)
		t.Fatalf("mmdebstrap: %v\n%s", err, tail(stderr.String(), 30))
	}
	if err := os.Rename(tmp, tarball); err != nil {
		t.Fatal(err)
	}
	t.Logf("made the Debian root %s in %s", tarball, time.Since(start).Round(time.Second))
	return tarball
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// newRoot extracts the base root into a new directory.
func newRoot(t *testing.T, tarball string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "root")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("tar", "-C", dir, "--same-owner", "-xpf", tarball).CombinedOutput(); err != nil {
		t.Fatalf("tar: %v\n%s", err, out)
	}
	return dir
}

// inRoot runs a shell script chrooted into root, in a mount namespace of
// its own with /proc, /sys and /dev (gone with the namespace), and returns
// its output; a failure fails t.
func inRoot(t *testing.T, root, script string) string {
	t.Helper()
	out, err := inRootErr(root, script)
	if err != nil {
		t.Fatalf("in the root: %s: %v\n%s", script, err, out)
	}
	return out
}

func inRootErr(root, script string) (string, error) {
	const setup = `set -e
R=$1
mount -t proc proc "$R/proc"
mount --rbind /sys "$R/sys"
mount --rbind /dev "$R/dev"
exec chroot "$R" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive /bin/sh -ec "$2"`
	cmd := exec.Command("unshare", "--mount", "--propagation", "private", "--", "/bin/sh", "-c", setup, "sh", root, script)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// unit is the [Service] section of an installed unit: each key's values
// in order.
type unit map[string][]string

func readUnit(t *testing.T, path string) unit {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	u := unit{}
	section := ""
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";") {
			continue
		}
		if strings.HasPrefix(line, "[") {
			section = line
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if ok && section == "[Service]" {
			u[k] = append(u[k], v)
		}
	}
	return u
}

func (u unit) one(t *testing.T, key string) string {
	t.Helper()
	if len(u[key]) != 1 {
		t.Fatalf("the unit has %d %s lines, want one", len(u[key]), key)
	}
	return u[key][0]
}

// daemon is the installed unit's ExecStart running from a root.
type daemon struct {
	cmd  *exec.Cmd
	url  string
	log  *bytes.Buffer
	done chan struct{}
}

// startUnit runs the installed unit's ExecStart line from root as systemd
// would start it, as far as its mount protections go (systemd is not PID
// 1 here): a mount namespace where the root is read-only
// (ProtectSystem=strict) but for its ReadWritePaths, /home and /root are
// empty and read-only (ProtectHome), /tmp and /var/tmp are private
// (PrivateTmp), /run holds the RuntimeDirectory and is kept across starts of
// the same root (RuntimeDirectoryPreserve=yes), and
// root becomes the namespace's root with pivot_root: a chrooted process may
// not make user namespaces (clone(2), EPERM), and every sandbox is one. The environment adds the address it listens on and the tests'
// shared image store (its default template, so no first-start build;
// no image GC there), which the process may write; both are settings the
// config file leaves to them ($SANDLOT_ADDR, $SANDLOT_IMAGES_DIR outrank
// the file).
func startUnit(t *testing.T, root, images string) *daemon {
	t.Helper()
	u := readUnit(t, filepath.Join(root, Unit))
	exec0 := u.one(t, "ExecStart")
	if u.one(t, "ProtectSystem") != "strict" || u.one(t, "ProtectHome") != "yes" || u.one(t, "PrivateTmp") != "yes" {
		t.Fatalf("the unit's protections changed; this emulation knows ProtectSystem=strict, ProtectHome=yes, PrivateTmp=yes")
	}
	var rw []string
	for _, v := range u["ReadWritePaths"] {
		rw = append(rw, strings.Fields(v)...)
	}
	port := freePort(t)
	const mnt = "/srv/sandlot-test-images"
	if err := os.MkdirAll(filepath.Join(root, mnt), 0o755); err != nil {
		t.Fatal(err)
	}
	var s strings.Builder
	fmt.Fprintf(&s, "set -e\nR=%q\n", root)
	s.WriteString("mount --bind \"$R\" \"$R\"\nmount -o remount,bind,ro \"$R\"\n")
	s.WriteString("mount -t proc proc \"$R/proc\"\nmount --rbind /sys \"$R/sys\"\nmount --rbind /dev \"$R/dev\"\n")
	// /run keeps the RuntimeDirectory across starts of the same root
	// (RuntimeDirectoryPreserve=yes): a restart takes its sandboxes back.
	run := filepath.Join(filepath.Dir(root), filepath.Base(root)+".run")
	if err := os.MkdirAll(run, 0o755); err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(&s, "mount --bind %q \"$R/run\"\n", run)
	for _, p := range rw {
		if p == "/run" {
			continue // bound above
		}
		fmt.Fprintf(&s, "mount --bind \"$R%s\" \"$R%s\"\nmount -o remount,bind,rw \"$R%s\" \"$R%s\"\n", p, p, p, p)
	}
	for _, d := range u["RuntimeDirectory"] {
		fmt.Fprintf(&s, "mkdir -p \"$R/run/%s\"\nchmod 0700 \"$R/run/%s\"\n", d, d)
	}
	s.WriteString("for d in /home /root; do mount -t tmpfs -o ro,mode=0755 tmpfs \"$R$d\"; done\n")
	s.WriteString("for d in /tmp /var/tmp; do mount -t tmpfs -o mode=1777 tmpfs \"$R$d\"; done\n")
	fmt.Fprintf(&s, "mount --bind %q \"$R%s\"\n", images, mnt)
	// The host's root goes under /mnt for the switch and is then detached.
	s.WriteString("cd \"$R\"\npivot_root . mnt\ncd /\n/usr/bin/umount -l /mnt\n")
	fmt.Fprintf(&s, "exec /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin SANDLOT_ADDR=127.0.0.1:%d SANDLOT_IMAGES_DIR=%s SANDLOT_IMAGE_GC_INTERVAL=0 %s\n", port, mnt, exec0)

	d := &daemon{url: fmt.Sprintf("http://127.0.0.1:%d", port), log: &bytes.Buffer{}, done: make(chan struct{})}
	d.cmd = exec.Command("unshare", "--mount", "--propagation", "private", "--", "/bin/sh", "-c", s.String())
	d.cmd.Stdout, d.cmd.Stderr = d.log, d.log
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { d.cmd.Wait(); close(d.done) }()
	t.Cleanup(func() { d.stop(t) })
	// Ready: the store open, a runtime chosen, the default template there.
	deadline := time.Now().Add(3 * time.Minute)
	for {
		select {
		case <-d.done:
			t.Fatalf("the daemon exited: %v\n%s", d.cmd.ProcessState, tail(d.log.String(), 40))
		default:
		}
		resp, err := http.Get(d.url + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return d
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the daemon was not ready in 3 minutes: %v\n%s", err, tail(d.log.String(), 40))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// stop sends SIGTERM, as systemctl stop does (KillMode=mixed), and waits
// for the daemon to end; a daemon that does not end within the unit's
// TimeoutStopSec fails t.
func (d *daemon) stop(t *testing.T) {
	t.Helper()
	select {
	case <-d.done:
		return
	default:
	}
	d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.done:
		if !d.cmd.ProcessState.Success() {
			t.Errorf("the daemon ended with %v after SIGTERM\n%s", d.cmd.ProcessState, tail(d.log.String(), 20))
		}
	case <-time.After(90 * time.Second):
		d.cmd.Process.Kill()
		<-d.done
		t.Errorf("the daemon did not end within 90s of SIGTERM\n%s", tail(d.log.String(), 20))
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// call makes one request to the daemon with the API key and returns the
// body; a status other than want fails t.
func (d *daemon) call(t *testing.T, key, method, path, contentType string, body []byte, want int) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, d.url+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", method, path, err, tail(d.log.String(), 20))
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	b.ReadFrom(resp.Body)
	if resp.StatusCode != want {
		t.Fatalf("%s %s: %d, want %d: %s\n%s", method, path, resp.StatusCode, want, b.String(), tail(d.log.String(), 20))
	}
	return b.Bytes()
}
