package main

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/agent/podchannel"
	"github.com/sandlot/sandlot/internal/testenv"
)

// startPod runs `sandlot-pod-agent pod` (as a pod image runs it) on a loopback port with args and
// returns the address it listens on.
func startPod(t *testing.T, bin string, args ...string) string {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"pod", "--listen", "127.0.0.1:0", "--health", "", "--home", filepath.Join(t.TempDir(), "home")}, args...)...)
	cmd.Env = append(os.Environ(), "TMPDIR="+t.TempDir()) // where an enrollment's CA bundle goes
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
		return a
	case <-time.After(30 * time.Second):
		t.Fatal("the agent did not listen")
		return ""
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
