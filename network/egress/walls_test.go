package egress

import (
	"bufio"
	"context"
	"crypto/subtle"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/internal/testenv"
	"github.com/sandlot/sandlot/network/nettest"
	"github.com/sandlot/sandlot/network/policy"
	"github.com/sandlot/sandlot/network/ports"
)

// lowerNofile sets the soft RLIMIT_NOFILE of this process (the one that
// holds the proxy, as `prlimit --nofile` would for a daemon) for the rest
// of the test.
func lowerNofile(t *testing.T, n uint64) {
	t.Helper()
	var old unix.Rlimit
	if err := unix.Prlimit(0, unix.RLIMIT_NOFILE, nil, &old); err != nil {
		t.Fatal(err)
	}
	if err := unix.Prlimit(0, unix.RLIMIT_NOFILE, &unix.Rlimit{Cur: n, Max: old.Max}, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Prlimit(0, unix.RLIMIT_NOFILE, &old, nil) })
}

// holdScript is tenant A's attack, run inside its sandbox: a server on
// port 8000 that accepts and never answers, and n connections to the
// gateway's port 80 that each send one ports-route request for that
// server and hold it. It prints "ready <connected>" and holds everything
// until its stdin closes.
const holdScript = `
import resource, socket, sys, threading
resource.setrlimit(resource.RLIMIT_NOFILE, (16384, 16384))
host, n, gw = sys.argv[1], int(sys.argv[2]), sys.argv[3]
srv = socket.socket()
srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind(("0.0.0.0", 8000))
srv.listen(4096)
held = []
def serve():
    while True:
        c, _ = srv.accept()
        held.append(c)
threading.Thread(target=serve, daemon=True).start()
req = ("GET / HTTP/1.1\r\nHost: %s\r\n\r\n" % host).encode()
ok = 0
for i in range(n):
    try:
        c = socket.create_connection((gw, 80), timeout=2)
        c.sendall(req)
        held.append(c)
        ok += 1
    except OSError:
        pass
print("ready", ok, flush=True)
sys.stdin.read()
`

// python3 is Debian's, which scripts/deps.sh installs (not whatever
// comes first on PATH).
const python3 = "/usr/bin/python3"

// inSandbox starts a python3 script in a sandbox's network namespace and
// returns its stdin (closing it ends the script) and its stdout lines.
func inSandbox(t *testing.T, sb *sandbox, script string, args ...string) (io.WriteCloser, *bufio.Scanner) {
	t.Helper()
	cmd := exec.Command("nsenter", append([]string{"--net=" + sb.Path, "--", python3, "-c", script}, args...)...)
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		in.Close()
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	})
	return in, bufio.NewScanner(out)
}

// line reads the script's next line within d.
func line(t *testing.T, sc *bufio.Scanner, d time.Duration) string {
	t.Helper()
	got := make(chan string, 1)
	go func() {
		if sc.Scan() {
			got <- sc.Text()
		} else {
			got <- fmt.Sprintf("(no line: %v)", sc.Err())
		}
	}()
	select {
	case s := <-got:
		return s
	case <-time.After(d):
		t.Fatalf("no line from the script within %s", d)
		return ""
	}
}

// TestWallDescriptors attacks the daemon's descriptors through the egress
// proxy, as an outside review did on a real daemon: tenant A's sandbox
// holds ports-route requests to its own server, which never answers,
// until the process holding the proxy (under a low RLIMIT_NOFILE, as with
// `prlimit --nofile`) runs out of descriptors. Tenant B's egress must
// keep working during the attack and after it, and the proxy must keep
// accepting after accept(2) failed with EMFILE.
func TestWallDescriptors(t *testing.T) {
	nettest.Require(t)
	testenv.RequireBinary(t, python3)
	// Before the proxy exists: it sizes its default bounds from the limit,
	// as a daemon started under prlimit does.
	lowerNofile(t, 512)
	e := newEnv(t)
	a := e.sandbox(t, "fd-a", "ta", policy.Policy{})
	b := e.sandbox(t, "fd-b", "tb", policy.Policy{Mode: policy.Allowlist, Allow: rules("*.example.test")})
	h, err := ports.New(ports.Config{
		Lookup: func(ctx context.Context, id string) (ports.Target, error) {
			if id != "fd-a" {
				return ports.Target{}, fmt.Errorf("sandbox %s: %w", id, errdefs.ErrNotFound)
			}
			return ports.Target{Addr: a.Addr, Ingress: policy.Ingress{Public: true}, Tenant: "ta"}, nil
		},
		Authorize: func(ctx context.Context, id, token string) error {
			if subtle.ConstantTimeCompare([]byte(token), []byte("unused")) != 1 {
				return errdefs.ErrPermissionDenied
			}
			return nil
		},
		Dial: e.m.DialSandbox,
	})
	if err != nil {
		t.Fatal(err)
	}
	e.px.SetPorts(ports.DefaultDomain, h)
	egressWorks := func(when string) {
		t.Helper()
		code, body, r := b.curl(t, "http://www.example.test/fd")
		if code != "200" {
			t.Fatalf("%s: tenant B's egress got %s %q (%v, %s)", when, code, body, r.Err, r.Stderr)
		}
	}
	egressWorks("before the attack")

	stdin, out := inSandbox(t, a, holdScript, "8000-fd-a."+ports.DefaultDomain, "1500", a.Gateway.String())
	if got := line(t, out, 2*time.Minute); !strings.HasPrefix(got, "ready") {
		t.Fatalf("the attack did not start: %q", got)
	}
	egressWorks("while tenant A holds ports-route requests")
	held, _ := os.ReadDir("/proc/self/fd")
	refused := 0
	for _, ev := range e.eventsFor("fd-a") {
		if strings.HasPrefix(ev.Reason, "too many connections") {
			refused++
		}
	}
	if refused == 0 {
		t.Fatalf("no connection of tenant A was refused by a bound: %s", e.allEvents())
	}
	t.Logf("during the attack: %d descriptors open in the process, %d of A's connections refused, limits %+v", len(held), refused, e.px.Limits())
	stdin.Close()
	e.idle(t)
	egressWorks("after the attack")

	t.Run("the proxy accepts again after EMFILE", func(t *testing.T) {
		// A client in B waits for a line, then sends one request through
		// the proxy and prints the status line it gets.
		const client = `
import socket, sys
sys.stdin.readline()
c = socket.create_connection(("203.0.113.10", 80), timeout=30)
c.settimeout(30)
c.sendall(b"GET /emfile HTTP/1.1\r\nHost: www.example.test\r\nConnection: close\r\n\r\n")
print(c.recv(4096).decode(errors="replace").splitlines()[0], flush=True)
`
		in, out := inSandbox(t, b, client)
		fill := exhaust(t)
		if _, err := io.WriteString(in, "go\n"); err != nil {
			t.Fatal(err)
		}
		// Wait until the proxy's accept(2) has failed with EMFILE.
		deadline := time.Now().Add(20 * time.Second)
		for !strings.Contains(e.logs.String(), "too many open files") {
			if time.Now().After(deadline) {
				fill.release()
				t.Fatalf("the proxy never met EMFILE; logs:\n%s", e.logs.String())
			}
			fill.more()
			time.Sleep(20 * time.Millisecond)
		}
		fill.release()
		if got := line(t, out, 45*time.Second); !strings.Contains(got, " 200 ") {
			t.Fatalf("after EMFILE the client got %q, want a 200", got)
		}
		egressWorks("after EMFILE")
	})
}

// filler holds every descriptor the process may still open.
type filler struct{ fs []*os.File }

// exhaust opens /dev/null until the process's descriptors run out.
func exhaust(t *testing.T) *filler {
	f := &filler{}
	f.more()
	t.Cleanup(f.release)
	return f
}

// more opens /dev/null until EMFILE (again: others may have closed one).
func (f *filler) more() {
	for {
		fd, err := os.Open(os.DevNull)
		if err != nil {
			return
		}
		f.fs = append(f.fs, fd)
	}
}

func (f *filler) release() {
	for _, fd := range f.fs {
		fd.Close()
	}
	f.fs = nil
}

// TestLimits holds connections open until each bound refuses one: the
// tenant's across its sandboxes, the daemon's across tenants, and the
// process's watermark.
func TestLimits(t *testing.T) {
	echo := "203.0.113.20:7"
	allow := policy.Policy{Mode: policy.Allowlist, Allow: rules("203.0.113.20/32:7")}
	tests := []struct {
		name   string
		limits Limits
		// holders open one connection each, in order, and keep it; then
		// the last sandbox's next connection must be refused for reason.
		holders []string // tenant of each sandbox
		reason  string
	}{
		{"per tenant, across its sandboxes", Limits{PerSandbox: 10 * Legs, PerTenant: 2 * Legs, Total: 100 * Legs}, []string{"t1", "t1"}, "too many connections of this tenant"},
		{"in all, across tenants", Limits{PerSandbox: 10 * Legs, PerTenant: 10 * Legs, Total: 2 * Legs}, []string{"t1", "t2"}, "too many connections on this daemon"},
		{"the process's watermark", Limits{Watermark: 1}, []string{"t1"}, "the daemon is short of descriptors"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, func(c *Config) { c.Limits = tt.limits })
			var sbs []*sandbox
			for i, tenant := range tt.holders {
				sbs = append(sbs, e.sandbox(t, fmt.Sprintf("lim-%d", i), tenant, allow))
			}
			if tt.limits.Watermark == 0 {
				for _, sb := range sbs {
					c, err := sb.dial(t, echo)
					if err != nil {
						t.Fatal(err)
					}
					defer c.Close()
					c.SetDeadline(time.Now().Add(5 * time.Second))
					c.Write([]byte("x"))
					if _, err := c.Read(make([]byte, 1)); err != nil {
						t.Fatalf("held connection: %v", err)
					}
				}
			}
			last := sbs[len(sbs)-1]
			if last.echo(t, echo) {
				t.Fatal("a connection passed the bound")
			}
			deadline := time.Now().Add(10 * time.Second)
			for {
				found := false
				for _, ev := range e.eventsFor(last.SandboxID) {
					found = found || ev.Reason == tt.reason
				}
				if found {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("no refusal %q in the audit trail: %s", tt.reason, e.allEvents())
				}
				time.Sleep(20 * time.Millisecond)
			}
		})
	}
}
