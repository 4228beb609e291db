package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/agent/podchannel"
	"github.com/sandlot/sandlot/internal/testenv"
)

// startPod runs `sandlot-pod-agent pod` (as a pod image runs it) on a
// loopback port with args and returns the address it listens on.
func startPod(t *testing.T, bin string, args ...string) string {
	t.Helper()
	addr, _ := startPodAs(t, bin, nil, t.TempDir(), args...)
	return addr
}

// startPodAs is startPod as cred (nil: this process's user), with home and
// TMPDIR under dir; it returns the agent's pid too.
func startPodAs(t *testing.T, bin string, cred *syscall.Credential, dir string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"pod", "--listen", "127.0.0.1:0", "--health", "", "--home", filepath.Join(dir, "home")}, args...)...)
	cmd.Env = append(os.Environ(), "TMPDIR="+dir) // where an enrollment's CA bundle goes
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		_ = cmd.Wait()
	})
	addr := make(chan string, 1)
	go func() {
		re := regexp.MustCompile(`agent listening" address=(\S+)`)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				addr <- m[1]
			}
		}
	}()
	select {
	case a := <-addr:
		return a, cmd.Process.Pid
	case <-time.After(30 * time.Second):
		t.Fatal("the agent did not listen")
		return "", 0
	}
}

// TestNotDumpable: the pod agent runs as the pod's user, uid 1000, as the
// user code it starts does; it makes itself non-dumpable, so
// /proc/<pid>/mem belongs to root and that code cannot ptrace or read it.
func TestNotDumpable(t *testing.T) {
	testenv.RequireRoot(t) // to run the agent as uid 1000
	dir := t.TempDir()
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o777); err != nil {
			t.Fatal(err)
		}
	}
	key := filepath.Join(dir, "key")
	if err := os.WriteFile(key, []byte("a pod's sandbox key, 32 bytes.."), 0o444); err != nil {
		t.Fatal(err)
	}
	_, pid := startPodAs(t, testenv.PodAgentBinary(t), &syscall.Credential{Uid: 1000, Gid: 1000}, dir, "--key-file", key)
	st, err := os.Stat(fmt.Sprintf("/proc/%d/mem", pid))
	if err != nil {
		t.Fatal(err)
	}
	if uid := st.Sys().(*syscall.Stat_t).Uid; uid != 0 {
		t.Fatalf("/proc/<pod agent>/mem owned by uid %d: the agent is dumpable", uid)
	}
}

// TestPodMode: sandlot-pod-agent serves the pod channel. A cold pod
// serves the key of its --key-file and nothing else; a warm pod serves
// nobody until one enrollment, which brings the sandbox's key and its
// environment, and refuses another.
func TestPodMode(t *testing.T) {
	dir := t.TempDir()
	bin := testenv.PodAgentBinary(t)
	key := []byte("0123456789abcdef0123456789abcdef")
	pool := []byte("pool-key-of-the-template-0123456")
	other := []byte("another key, 32 bytes long......")
	for name, data := range map[string][]byte{"key": key, "pool": pool} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o400); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	served := func(addr string, k []byte) bool {
		c, err := podchannel.DialPod(ctx, addr, agent.ClientConfig{SandboxID: "pod", Key: k})
		if err != nil {
			return false
		}
		defer c.Close()
		return c.Ping(ctx) == nil
	}

	t.Run("cold", func(t *testing.T) {
		addr := startPod(t, bin, "--key-file", filepath.Join(dir, "key"))
		if !served(addr, key) {
			t.Fatal("the sandbox key was not served")
		}
		if served(addr, other) {
			t.Fatal("a peer without the key was served")
		}
		if err := podchannel.Enroll(ctx, addr, key, agent.Enrollment{Key: other}); err == nil {
			t.Fatal("a cold pod took an enrollment")
		}
	})
	t.Run("pool", func(t *testing.T) {
		addr := startPod(t, bin, "--pool-key-file", filepath.Join(dir, "pool"))
		if served(addr, pool) {
			t.Fatal("the pool key was served before the enrollment")
		}
		e := agent.Enrollment{Key: key, Env: map[string]string{"GREETING": "hello from the claim"}, CACerts: []byte("-----BEGIN CERTIFICATE-----\nthe proxy's CA\n-----END CERTIFICATE-----\n")}
		if err := podchannel.Enroll(ctx, addr, pool, e); err != nil {
			t.Fatalf("enroll: %v", err)
		}
		if err := podchannel.Enroll(ctx, addr, pool, agent.Enrollment{Key: other}); err == nil {
			t.Fatal("a second enrollment was taken")
		}
		if served(addr, pool) {
			t.Fatal("the pool key was served after the enrollment")
		}
		c, err := podchannel.DialPod(ctx, addr, agent.ClientConfig{SandboxID: "pod", Key: key})
		if err != nil {
			t.Fatalf("dial with the enrolled key: %v", err)
		}
		defer c.Close()
		r, err := c.Exec(ctx, agent.ExecParams{Shell: "echo $GREETING"}, nil)
		if err != nil || strings.TrimSpace(r.Stdout) != "hello from the claim" {
			t.Fatalf("exec: %+v, %v; want the enrolled environment", r, err)
		}
		// The CA joins the bundle the usual variables point at.
		r, err = c.Exec(ctx, agent.ExecParams{Shell: `test "$SSL_CERT_FILE" = "$REQUESTS_CA_BUNDLE" && grep -c "the proxy's CA" "$SSL_CERT_FILE"`}, nil)
		if err != nil || strings.TrimSpace(r.Stdout) != "1" {
			t.Fatalf("exec: %+v, %v; want the enrolled CA in the bundle", r, err)
		}
	})
	t.Run("pool, one connection", func(t *testing.T) {
		addr := startPod(t, bin, "--pool-key-file", filepath.Join(dir, "pool"))
		e := agent.Enrollment{Key: key, Env: map[string]string{"GREETING": "hello on the enrollment's connection"}}
		c, err := podchannel.EnrollSession(ctx, addr, pool, e, agent.ClientConfig{SandboxID: "pod", Key: key})
		if err != nil || c == nil {
			t.Fatalf("enroll session: %v, %v", c, err)
		}
		defer c.Close()
		r, err := c.Exec(ctx, agent.ExecParams{Shell: "echo $GREETING"}, nil)
		if err != nil || strings.TrimSpace(r.Stdout) != "hello on the enrollment's connection" {
			t.Fatalf("exec on the enrollment's connection: %+v, %v", r, err)
		}
		if served(addr, pool) {
			t.Fatal("the pool key was served after the enrollment")
		}
		if !served(addr, key) {
			t.Fatal("the enrolled key was not served on a new connection")
		}
	})
}
