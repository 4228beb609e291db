package stack

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandlot/sandlot/network/netns"
	"github.com/sandlot/sandlot/network/policy"
)

// hostNetDirs are where this host's sysfs keeps its network interfaces
// (name, MAC address, counters): /sys/class/net's entries resolved into
// /sys/devices, the hardware ones included.
func hostNetDirs(t *testing.T) []string {
	t.Helper()
	ents, err := os.ReadDir("/sys/class/net")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		p, err := filepath.EvalSymlinks(filepath.Join("/sys/class/net", e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, p)
	}
	if len(out) == 0 {
		t.Fatal("this host's /sys/class/net is empty: nothing to attack")
	}
	return out
}

// TestWallSysNet attacks what a network sandbox learns of the host from
// the host's /sys, which crun and runc sandboxes with a network get
// (read-only, docs/network.md "The runtime"): the host's network cards
// (name, MAC address, traffic counters) under /sys/devices, the hardware
// ones included, and under /sys/class/net. gVisor's /sys is its own.
func TestWallSysNet(t *testing.T) {
	e := newEnv(t, 0)
	dirs := hostNetDirs(t)
	var cmd strings.Builder
	for _, d := range dirs {
		cmd.WriteString("ls " + d + " 2>/dev/null; ls " + filepath.Dir(d) + " 2>/dev/null; cat " + d + "/address 2>/dev/null; ")
	}
	cmd.WriteString("ls /sys/class/net 2>/dev/null; find /sys/devices -maxdepth 7 -path '*/net/*' -name address 2>/dev/null; echo end")
	for _, kind := range kinds {
		t.Run(kind, func(t *testing.T) {
			p := newProvider(t, kind, e.st)
			sb := create(t, p, "t1", &policy.Policy{})
			out, code := sh(t, sb, cmd.String())
			if code != 0 || strings.TrimSpace(out) != "end" {
				t.Errorf("the sandbox saw the host's network interfaces (%v):\n%s", dirs, out)
			}
		})
	}
}

// TestWallStricterUpdate attacks a policy update: a sandbox opens
// connections while its policy allows them, then its tenant (or the
// operator) takes that permission away. Connections the new policy
// forbids must be cut, not only refused next time; those it still allows
// keep going.
func TestWallStricterUpdate(t *testing.T) {
	e := newEnv(t, 0)
	ctx := context.Background()
	rules := func(ss ...string) []policy.Rule {
		var out []policy.Rule
		for _, s := range ss {
			out = append(out, policy.MustRule(s))
		}
		return out
	}
	tests := []struct {
		name          string
		before, after policy.Policy
		cut, kept     string // the request lines of a kept-alive HTTP connection each
	}{
		{"allowlist loses a name",
			policy.Policy{Mode: policy.Allowlist, Allow: rules("*.example.test", "api.test")},
			policy.Policy{Mode: policy.Allowlist, Allow: rules("api.test")},
			"www.example.test", "api.test"},
		{"open becomes an allowlist",
			policy.Policy{Mode: policy.Open},
			policy.Policy{Mode: policy.Allowlist, Allow: rules("api.test")},
			"www.example.test", "api.test"},
		{"allowlist becomes none",
			policy.Policy{Mode: policy.Allowlist, Allow: rules("*.example.test")},
			policy.Policy{},
			"www.example.test", ""},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id := fmt.Sprintf("upd-%d", i)
			rn, _, err := e.st.Setup(ctx, id, "t1", "", tt.before)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { e.st.Teardown(ctx, id) })
			open := func(host string) *keptAlive {
				t.Helper()
				c, err := netns.Dialer(rn.Path)(ctx, "tcp4", "203.0.113.10:80")
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { c.Close() })
				k := &keptAlive{c: c, r: bufio.NewReader(c), host: host}
				if err := k.get(); err != nil {
					t.Fatalf("%s before the update: %v", host, err)
				}
				return k
			}
			cut := open(tt.cut)
			var kept *keptAlive
			if tt.kept != "" {
				kept = open(tt.kept)
			}
			if _, err := e.st.Update(ctx, id, "t1", tt.after); err != nil {
				t.Fatal(err)
			}
			if err := cut.get(); err == nil {
				t.Errorf("%s: a connection the new policy forbids still works", tt.cut)
			}
			if kept != nil {
				if err := kept.get(); err != nil {
					t.Errorf("%s: a connection the new policy allows was cut: %v", tt.kept, err)
				}
			}
			deadline := time.Now().Add(10 * time.Second)
			for !cutAudited(e, id) {
				if time.Now().After(deadline) {
					t.Fatalf("the audit trail does not say the connection was closed by the update: %+v", e.auditEvents())
				}
				time.Sleep(20 * time.Millisecond)
			}
		})
	}
}

// keptAlive is a kept-alive HTTP connection from inside a sandbox.
type keptAlive struct {
	c    net.Conn
	r    *bufio.Reader
	host string
}

// get sends one request on the connection and reads its answer's status
// line and headers (the world's servers answer small bodies).
func (k *keptAlive) get() error {
	k.c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := fmt.Fprintf(k.c, "GET /kept HTTP/1.1\r\nHost: %s\r\n\r\n", k.host); err != nil {
		return err
	}
	resp, err := readResponse(k.r)
	if err != nil {
		return err
	}
	if resp != 200 {
		return fmt.Errorf("status %d", resp)
	}
	return nil
}

func readResponse(r *bufio.Reader) (int, error) {
	resp, err := http.ReadResponse(r, nil)
	if err != nil {
		return 0, err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}

func cutAudited(e *env, sandboxID string) bool {
	for _, ev := range e.auditEvents() {
		if ev.SandboxID == sandboxID && strings.HasSuffix(ev.Reason, "; closed by a policy update") {
			return true
		}
	}
	return false
}
