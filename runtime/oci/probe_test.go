package oci

import (
	"bufio"
	"context"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandlot/sandlot/runtime"
)

// The test binary doubles as a stand-in agent: started with probeEnv set,
// it runs as the sandbox's PID 1, listens on the socket in /run/sandlot and
// runs one shell command per line, answering with probeReply. This keeps the
// runtime tests independent of the real agent.
const probeEnv = "SANDLOT_OCI_PROBE"

type probeReply struct {
	Out  string `json:"out"`
	Code int    `json:"code"`
}

func TestMain(m *testing.M) {
	if os.Getenv(probeEnv) == "1" {
		probeMain()
		return
	}
	os.Exit(m.Run())
}

func probeMain() {
	signal.Ignore(syscall.SIGTERM) // like an init: only SIGKILL ends it
	// Like the real agent: same uid as user code, so it must not be
	// dumpable or /proc/1/mem would let user code rewrite it.
	unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
	l, err := net.Listen("unix", "/run/sandlot/agent.sock")
	if err != nil {
		os.Exit(3)
	}
	for {
		c, err := l.Accept()
		if err != nil {
			os.Exit(4)
		}
		go func(c net.Conn) {
			defer c.Close()
			sc := bufio.NewScanner(c)
			sc.Buffer(make([]byte, 1<<20), 1<<20)
			enc := json.NewEncoder(c)
			for sc.Scan() {
				cmd := exec.Command("/bin/sh", "-c", sc.Text())
				out, err := cmd.CombinedOutput()
				r := probeReply{Out: string(out)}
				if ee, ok := err.(*exec.ExitError); ok {
					r.Code = ee.ExitCode()
				} else if err != nil {
					r.Code, r.Out = -1, err.Error()
				}
				enc.Encode(r)
			}
		}(c)
	}
}

// probeConn talks to a probe.
type probeConn struct {
	c   net.Conn
	sc  *bufio.Scanner
	dir string
}

// sockDir makes the per-sandbox socket directory, writable by the sandbox user.
func sockDir(t testing.TB, base, id string) string {
	t.Helper()
	d := filepath.Join(base, "sock", id)
	if err := os.MkdirAll(d, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(d, UID, GID); err != nil {
		t.Fatal(err)
	}
	return d
}

// probeSpec is a spec that runs the test binary as the sandbox's init.
func probeSpec(t testing.TB, id, sock string) runtime.Spec {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return runtime.Spec{
		ID:   id,
		Args: []string{AgentPath},
		Env:  map[string]string{probeEnv: "1"},
		Mounts: []runtime.Mount{
			{Source: self, Destination: AgentPath, ReadOnly: true},
			{Source: sock, Destination: "/run/sandlot"},
		},
		Limits: runtime.Limits{MemoryBytes: 256 << 20, PIDs: 64, DiskBytes: 16 << 20},
	}
}

// dialProbe waits for the probe's socket and connects.
func dialProbe(t testing.TB, ctx context.Context, dir string) *probeConn {
	t.Helper()
	p := filepath.Join(dir, "agent.sock")
	for delay := 200 * time.Microsecond; ; delay = min(delay*2, 20*time.Millisecond) {
		c, err := net.Dial("unix", p)
		if err == nil {
			sc := bufio.NewScanner(c)
			sc.Buffer(make([]byte, 1<<20), 1<<20)
			t.Cleanup(func() { c.Close() })
			return &probeConn{c: c, sc: sc, dir: dir}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("probe socket %s: %v", p, err)
		case <-time.After(delay):
		}
	}
}

// sh runs a shell command in the sandbox.
func (p *probeConn) sh(t testing.TB, cmd string) probeReply {
	t.Helper()
	p.c.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := p.c.Write([]byte(cmd + "\n")); err != nil {
		t.Fatalf("probe write: %v", err)
	}
	if !p.sc.Scan() {
		t.Fatalf("probe read: %v", p.sc.Err())
	}
	var r probeReply
	if err := json.Unmarshal(p.sc.Bytes(), &r); err != nil {
		t.Fatal(err)
	}
	return r
}
