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

// probeAddrEnv is where the probe listens: the runtime's channel.
const probeAddrEnv = "SANDLOT_OCI_PROBE_ADDR"

type probeReply struct {
	Out  string `json:"out"`
	Code int    `json:"code"`
}

func TestMain(m *testing.M) {
	if os.Getenv(probeEnv) == "1" {
		probeMain()
		return
	}
	if f := os.Getenv(fakeDetachEnv); f != "" {
		fakeDetachMain(f)
		return
	}
	if f := os.Getenv(fakeForkExitEnv); f != "" {
		fakeForkExitMain(f)
		return
	}
	os.Exit(m.Run())
}

func probeMain() {
	signal.Ignore(syscall.SIGTERM) // like an init: only SIGKILL ends it
	// Like the real agent: same uid as user code, so it must not be
	// dumpable or /proc/1/mem would let user code rewrite it.
	unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
	l, err := net.Listen("unix", os.Getenv(probeAddrEnv))
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
	c  net.Conn
	sc *bufio.Scanner
}

// probeSpec is a spec that runs the test binary as the sandbox's init,
// listening on r's channel.
func probeSpec(t testing.TB, r *Runtime, id string) runtime.Spec {
	t.Helper()
	return runtime.Spec{
		ID:   id,
		Args: []string{AgentPath},
		Env:  map[string]string{probeEnv: "1", probeAddrEnv: r.Channel()},
		Mounts: []runtime.Mount{
			{Source: probeBinary(t, r), Destination: AgentPath, ReadOnly: true},
		},
		Limits: runtime.Limits{MemoryBytes: 256 << 20, PIDs: 64, DiskBytes: 16 << 20},
	}
}

// createProbe creates a new sandbox of probeSpec on r and returns its id.
func createProbe(t testing.TB, ctx context.Context, r *Runtime) string {
	t.Helper()
	id := runtime.NewID()
	if err := r.Create(ctx, probeSpec(t, r, id)); err != nil {
		t.Fatal(err)
	}
	return id
}

// probeBinary is a copy of the test binary in r's state dir, where the
// sandboxes' root users (unprivileged host ids) can reach it; the go
// build cache directory is private to the host's root.
func probeBinary(t testing.TB, r *Runtime) string {
	t.Helper()
	dst := filepath.Join(r.StateDir(), "probe-bin")
	if _, err := os.Stat(dst); err == nil {
		return dst
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	tmp := dst + ".tmp"
	if err := os.WriteFile(tmp, b, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, dst); err != nil {
		t.Fatal(err)
	}
	return dst
}

// dialProbe waits for the probe to listen and connects through r.Dial.
func dialProbe(t testing.TB, ctx context.Context, r *Runtime, id string) *probeConn {
	t.Helper()
	for delay := 200 * time.Microsecond; ; delay = min(delay*2, 20*time.Millisecond) {
		c, err := r.Dial(ctx, id)
		if err == nil {
			// The probe has no key to prove; seal as the provider does
			// once the agent has proved its key.
			if err := r.Seal(id); err != nil {
				c.Close()
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Close() })
			return &probeConn{c: c, sc: newScanner(c)}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("probe channel of %s: %v", id, err)
		case <-time.After(delay):
		}
	}
}

func newScanner(c net.Conn) *bufio.Scanner {
	sc := bufio.NewScanner(c)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	return sc
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
