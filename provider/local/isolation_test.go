package local

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/runtime/runtimetest"
)

// TestIsolation runs hostile commands through the real agent, as user code
// would, and checks that each is refused.
func TestIsolation(t *testing.T) {
	for _, kind := range testKinds {
		t.Run(kind, func(t *testing.T) { testIsolation(t, kind) })
	}
}

func testIsolation(t *testing.T, kind string) {
	p := newProvider(t, kind, contexts.Limits{})
	port := runtimetest.ListenLoopback(t)
	c := create(t, p, contexts.Spec{})

	// Beyond the runtime's list: the provider's own files.
	mustFail := append(runtimetest.Hostile(port), []runtimetest.Case{
		{Name: "read host state dir", Cmd: "ls " + p.stateDir},
		{Name: "write agent binary", Cmd: "echo x >> /opt/sandlot/sandlot-agent"},
		{Name: "read agent binary", Cmd: "head -c 4 /opt/sandlot/sandlot-agent"},
	}...)
	for _, tc := range mustFail {
		t.Run(tc.Name, func(t *testing.T) {
			if kind == "runsc" && tc.Name == "read agent binary" {
				// gVisor loads only readable binaries (oci.Runtime.AgentMode);
				// "ptrace agent", "agent memory" and "agent not dumpable"
				// check the protection that matters.
				return
			}
			if r := sh(t, c, tc.Cmd); r.ExitCode == 0 {
				t.Errorf("%q succeeded inside the sandbox: %s%s", tc.Cmd, r.Stdout, r.Stderr)
			}
		})
	}

	mustPass := []struct{ name, cmd, want string }{
		{"uid 1000", "id -u; id -g", "1000\n1000\n"},
		{"seccomp and no_new_privs", "grep -E '^(Seccomp|NoNewPrivs):' /proc/self/status | tr -s '\\t' ' '", "NoNewPrivs: 1\nSeccomp: 2\n"},
		{"no capabilities", "grep -E '^CapEff:' /proc/self/status | tr -s '\\t' ' '", "CapEff: 0000000000000000\n"},
		{"only lo", "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' ' | tr '\\n' ' '", "lo "}, // not /sys/class/net: gVisor's sysfs has none

		{"pid 1 is the agent", "tr '\\0' ' ' < /proc/1/cmdline | cut -d' ' -f1", "/opt/sandlot/sandlot-agent\n"},
		{"write home and tmp", "echo a > ~/f && echo b > /tmp/f && cat ~/f /tmp/f", "a\nb\n"},
	}
	for _, tc := range mustPass {
		t.Run(tc.name, func(t *testing.T) {
			r := sh(t, c, tc.cmd)
			if r.ExitCode != 0 || r.Stdout != tc.want {
				t.Errorf("%q = %q (exit %d, %s), want %q", tc.cmd, r.Stdout, r.ExitCode, r.Stderr, tc.want)
			}
		})
	}
	t.Run("agent not dumpable", func(t *testing.T) {
		// A non-dumpable task's /proc files belong to root of the user
		// namespace its memory is tied to. The agent's binary is
		// unreadable to the sandbox, so the kernel ties it to the host's
		// (init) namespace, whose root shows as nobody (65534) inside;
		// gVisor, where the agent makes itself non-dumpable, shows 0.
		// Never the sandbox user.
		r := sh(t, c, "stat -c %u /proc/1/mem")
		want := "65534\n"
		if kind == "runsc" {
			want = "0\n"
		}
		if r.ExitCode != 0 || r.Stdout != want {
			t.Errorf("owner of /proc/1/mem = %q (exit %d, %s), want %q", r.Stdout, r.ExitCode, r.Stderr, want)
		}
	})
	t.Run("own namespaces", func(t *testing.T) {
		nss := []string{"pid", "mnt", "ipc", "uts", "net", "user", "cgroup"}
		if kind == "runsc" {
			// gVisor has no cgroup namespace file; its /proc/self/cgroup
			// is its own (TestNoHostNames).
			nss = nss[:len(nss)-1]
		}
		for _, ns := range nss {
			host, err := os.Readlink("/proc/self/ns/" + ns)
			if err != nil {
				t.Fatal(err)
			}
			r := sh(t, c, "readlink /proc/self/ns/"+ns)
			if in := strings.TrimSpace(r.Stdout); r.ExitCode != 0 || !strings.HasPrefix(in, ns+":[") || in == host {
				t.Errorf("%s namespace inside = %q (exit %d), host %q", ns, in, r.ExitCode, host)
			}
		}
	})
	t.Run("ps shows only the sandbox", func(t *testing.T) {
		r := sh(t, c, "ps -e -o pid= | wc -l; ps -e -o comm=")
		n, _ := strconv.Atoi(strings.TrimSpace(strings.SplitN(r.Stdout, "\n", 2)[0]))
		if r.ExitCode != 0 || n == 0 || n > 6 {
			t.Errorf("ps sees %d processes: %s%s", n, r.Stdout, r.Stderr)
		}
	})
}
