package oci

import (
	"strconv"
	"strings"
	"testing"

	"github.com/sandlot/sandlot/runtime"
	"github.com/sandlot/sandlot/runtime/runtimetest"
)

// TestIsolation runs hostile commands as the sandbox user (from the
// sandbox's PID 1, like the agent) and checks each is refused.
func TestIsolation(t *testing.T) {
	for _, kind := range testKinds {
		t.Run(kind, func(t *testing.T) { testIsolation(t, kind) })
	}
}

func testIsolation(t *testing.T, kind string) {
	r := newRuntime(t, kind)
	port := runtimetest.ListenLoopback(t)
	_, p := startProbe(t, r, runtime.Limits{})

	py := runtimetest.Py
	for _, tc := range runtimetest.Hostile(port) {
		t.Run(tc.Name, func(t *testing.T) {
			if got := p.sh(t, tc.Cmd); got.Code == 0 {
				t.Errorf("%q succeeded inside the sandbox: %s", tc.Cmd, got.Out)
			}
		})
	}

	mustPass := []struct{ name, cmd, want string }{
		{"uid", "id -u", "1000\n"},
		{"user name", "whoami", "user\n"},
		{"home", "echo $HOME && cd && pwd", "/home/user\n/home/user\n"},
		{"write home", "echo hi > ~/f && cat ~/f", "hi\n"},
		{"write tmp", "echo hi > /tmp/f && cat /tmp/f", "hi\n"},
		{"curated passwd", "cut -d: -f1 /etc/passwd | tr '\\n' ' '", "root user nobody "},
		{"seccomp filter", "grep -E '^(Seccomp|NoNewPrivs):' /proc/self/status | tr -s '\\t' ' '", "NoNewPrivs: 1\nSeccomp: 2\n"},
		{"no capabilities", "grep -E '^Cap(Eff|Prm|Bnd):' /proc/self/status | tr -s '\\t' ' '", "CapPrm: 0000000000000000\nCapEff: 0000000000000000\nCapBnd: 0000000000000000\n"},
		{"only lo", "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' ' | tr '\\n' ' '", "lo "}, // not /sys/class/net: gVisor's sysfs has none
		{"no route", "tail -n +2 /proc/net/route | wc -l", "0\n"},
		{"loopback works", py("import socket; s=socket.socket(); s.bind(('127.0.0.1',0)); s.listen(); c=socket.create_connection(s.getsockname()); print('ok')"), "ok\n"},
		{"pid 1 is the agent", "cat /proc/1/cmdline | tr '\\0' ' '", AgentPath + " "},
		{"usr readable", "test -x /usr/bin/python3 && echo ok", "ok\n"},
		{"ca certs", "test -s /etc/ssl/certs/ca-certificates.crt && echo ok", "ok\n"},
		{"alternatives", "awk 'BEGIN{print \"ok\"}'", "ok\n"},
		{"numpy", py("import numpy; print(numpy.arange(3).sum())"), "3\n"},
		{"matplotlib", py("import matplotlib.pyplot as plt; plt.plot([1,2]); plt.savefig('/tmp/a.png'); print(plt.get_backend())"), "agg\n"},
		{"node", "node -e 'console.log(1+1)'", "2\n"},
		{"resolv.conf: no name server, and why", "grep -v '^#' /etc/resolv.conf | wc -c; grep -c 'This sandbox has no network' /etc/resolv.conf", "0\n1\n"},
	}
	for _, tc := range mustPass {
		t.Run(tc.name, func(t *testing.T) {
			got := p.sh(t, tc.cmd)
			if got.Code != 0 {
				t.Fatalf("%q: exit %d: %s", tc.cmd, got.Code, got.Out)
			}
			if tc.want != "" && !strings.EqualFold(got.Out, tc.want) {
				t.Errorf("%q = %q, want %q", tc.cmd, got.Out, tc.want)
			}
		})
	}
	// The probe, sh and ls: a handful of pids, none of the host's.
	got := p.sh(t, "ls /proc | grep -c '^[0-9]'")
	if n, err := strconv.Atoi(strings.TrimSpace(got.Out)); err != nil || n > 5 {
		t.Errorf("sandbox sees %q processes", got.Out)
	}
}
