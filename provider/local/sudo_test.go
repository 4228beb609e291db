package local

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/image/debian/debiantest"
)

// TestSudoOnImage: the default image has sudo, and its user may use it
// without a password, as on E2B. sudo makes the user root of the sandbox's
// user namespace, no more: after sudo, the host, another sandbox, the
// agent's binary, memory and socket stay out of reach, and the setuid sudo
// is nothing a host account can run. The host template has no sudo.
func TestSudoOnImage(t *testing.T) {
	s, _ := debiantest.Default(t)
	for _, kind := range testKinds {
		t.Run(kind, func(t *testing.T) {
			p := newImageProvider(t, kind, s, true)
			c := create(t, p, contexts.Spec{})
			other := create(t, p, contexts.Spec{})
			ctx := context.Background()
			if kind == "runsc" {
				// gVisor has no set-id bits: no sudo, and the user's
				// file calls keep the user's ids.
				if r := sh(t, c, "sudo id -u"); r.ExitCode == 0 || !strings.Contains(r.Stderr, "no new privileges") {
					t.Errorf("sudo under runsc: %+v", r)
				}
				if _, err := c.WriteFile(ctx, agent.WriteParams{Path: "/0/x", Data: []byte("x")}); !errors.Is(err, errdefs.ErrPermissionDenied) {
					t.Errorf("user writes in / under runsc: %v", err)
				}
				return
			}
			if r := sh(t, other, "echo b-secret > /home/user/b; sleep 300 >/dev/null 2>&1 &"); r.ExitCode != 0 {
				t.Fatalf("b: %+v", r)
			}
			if r := sh(t, c, "sudo id -u; sudo -u user id -un; sudo -n true && echo ok"); r.Stdout != "0\nuser\nok\n" || r.Stderr != "" || r.ExitCode != 0 {
				t.Fatalf("sudo: %q %q", r.Stdout, r.Stderr)
			}
			if r := sh(t, c, "sudo touch /made-by-sudo && stat -c %U /made-by-sudo && sudo apt-get --version >/dev/null && echo apt"); r.Stdout != "root\napt\n" {
				t.Errorf("root's work: %q %q", r.Stdout, r.Stderr)
			}
			// After sudo: root of the namespace only.
			py := func(code string) string { return "python3 -c '" + code + "'" }
			libc := "import ctypes, os, sys; l = ctypes.CDLL(None, use_errno=True); "
			attacks := []string{
				"cat /proc/1/environ",                                                              // the agent is not dumpable
				"head -c 1 /proc/1/mem",                                                            // nor traceable
				"sh -c 'echo x > /opt/sandlot/sandlot-agent'",                                      // read-only, host root's
				"cat /opt/sandlot/sandlot-agent",                                                   // execute-only
				py(libc + `sys.exit(l.mount(b"none", b"/mnt", b"tmpfs", 0, None) != 0)`),           // no CAP_SYS_ADMIN
				py(libc + `sys.exit(l.unshare(0x10000000) != 0)`),                                  // no user namespace (seccomp)
				py(libc + `sys.exit(l.setns(os.open("/proc/1/ns/mnt", os.O_RDONLY), 0) != 0)`),     // no setns
				"sh -c 'echo 1 > /proc/sys/kernel/sysrq'",                                          // read-only /proc/sys
				"sh -c 'ls /run/sandlot/* && touch /run/sandlot/x'",                                // runsc: the sealed channel directory
				"grep -rs b-secret /proc/1/root/home /tmp",                                         // the other sandbox's files
				"sh -c 'for p in /proc/[0-9]*; do grep -qx sleep $p/comm && exit 0; done; exit 1'", // its processes
				"sh -c 'for s in " + everySignal + "; do kill -$s 1; done; sleep 1; ! kill -0 1'",  // the agent takes no signal (Ping below: nor stops)
				"curl -s -m 3 http://127.0.0.1:1/",                                                 // no network
				"ls /proc/1/root/var/cache/sandlot-test",                                           // the host's file system
			}
			if kind != "runsc" { // crun, runc: the agent holds its abstract name
				attacks = append(attacks, py(`import socket; socket.socket(socket.AF_UNIX).bind("\0sandlot-agent")`))
			}
			for _, cmd := range attacks {
				if r := sh(t, c, "sudo "+cmd+" 2>/dev/null"); r.ExitCode == 0 {
					t.Errorf("sudo %s succeeded: %q", cmd, r.Stdout)
				}
			}
			// The same commands do what they say where they may: the
			// checks above can fail.
			if r := sh(t, other, "sh -c 'for p in /proc/[0-9]*; do grep -qx sleep $p/comm && exit 0; done; exit 1'"); r.ExitCode != 0 {
				t.Errorf("the process probe finds nothing in its own sandbox: %+v", r)
			}
			if r := sh(t, c, "sudo "+py(libc+`sys.exit(l.getpid() != 1 and 0)`)); r.ExitCode != 0 {
				t.Errorf("python with ctypes as root: %+v", r)
			}
			if err := c.Ping(ctx); err != nil {
				t.Fatalf("agent after the attacks: %v", err)
			}
			// What the agent starts has the default of every signal the
			// agent keeps off itself (1-31): none ignored, none blocked.
			// The agent uses handlers, never SIG_IGN or a mask, which a
			// child would inherit. The real-time signals are left as the
			// daemon's own environment had them (a shell may start the
			// daemon with 32 ignored), so they are not judged here.
			if r := sh(t, c, "grep -E '^Sig(Ign|Blk)' /proc/self/status | tr -d '\\t'"); !defaultStandardSignals(r.Stdout) {
				t.Errorf("a process of the sandbox inherits dispositions: %q %q", r.Stdout, r.Stderr)
			}
			if r := sh(t, other, "cat /home/user/b"); r.Stdout != "b-secret\n" {
				t.Errorf("the other sandbox: %+v", r)
			}
			// sudo's root is the range's base on the host, never host root.
			rng, err := p.rt.IDRange(c.ID())
			if err != nil {
				t.Fatal(err)
			}
			if r := sh(t, c, "sudo sleep 60 >/dev/null 2>&1 & sleep 1; echo started"); r.ExitCode != 0 {
				t.Fatalf("%+v", r)
			}
			var seen bool
			for _, pid := range cgroupPIDs(t, c.ID()) {
				comm, _ := os.ReadFile(filepath.Join("/proc", pid, "comm"))
				if strings.TrimSpace(string(comm)) != "sleep" {
					continue
				}
				seen = true
				uids, _ := procIDs(pid)
				for _, u := range uids {
					if u != strconv.FormatUint(uint64(rng.Base), 10) {
						t.Errorf("sudo's sleep runs as host uids %v, want the range's base %d", uids, rng.Base)
						break
					}
				}
			}
			if !seen {
				t.Error("sudo's process not found from the host")
			}
			// The setuid sudo on the host: a host account cannot even
			// reach it (were it reachable, it would run as the sandbox's
			// root on the host).
			merged := rootMount(t, c.ID())
			fi, err := os.Stat(filepath.Dir(merged))
			if err != nil {
				t.Fatal(err)
			}
			if fi.Mode().Perm() != 0o700 || fi.Sys().(*syscall.Stat_t).Uid != rng.Base {
				t.Errorf("the writable layer's directory: %v, uid %d", fi.Mode(), fi.Sys().(*syscall.Stat_t).Uid)
			}
			cmd := exec.Command(filepath.Join(merged, "usr/bin/sudo"), "-n", "true")
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
			if err := cmd.Start(); err == nil {
				cmd.Wait()
				t.Error("a host account started the sandbox's sudo")
			}
			// The host template has no root, hence no sudo.
			hc := create(t, p, contexts.Spec{Template: HostTemplate})
			if r := sh(t, hc, "bash -l -c 'sudo id -u'"); r.ExitCode == 0 || !strings.Contains(r.Stderr, "sudo") || !strings.Contains(r.Stderr, "no root") {
				t.Errorf("host template: %+v", r)
			}
		})
	}
}

// rootMount is the host path of sandbox id's image root (the overlay).
func rootMount(t *testing.T, id string) string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) > 4 && strings.HasSuffix(f[4], "/roots/"+id+"/root") {
			return f[4]
		}
	}
	t.Fatalf("no image root mounted for %s", id)
	return ""
}

// everySignal lists signals 1-31 for kill -N, KILL and STOP included.
var everySignal = func() string {
	var b strings.Builder
	for sig := 1; sig < 32; sig++ {
		fmt.Fprintf(&b, " %d", sig)
	}
	return b.String()
}()

// defaultStandardSignals reports whether /proc/<pid>/status's SigBlk and
// SigIgn lines (status) show none of signals 1-31 blocked or ignored.
func defaultStandardSignals(status string) bool {
	seen := 0
	for _, l := range strings.Split(strings.TrimSpace(status), "\n") {
		name, hex, ok := strings.Cut(l, ":")
		if !ok || (name != "SigBlk" && name != "SigIgn") {
			return false
		}
		mask, err := strconv.ParseUint(strings.TrimSpace(hex), 16, 64)
		if err != nil || mask&0x7fffffff != 0 {
			return false
		}
		seen++
	}
	return seen == 2
}

func TestDefaultStandardSignals(t *testing.T) {
	for _, tc := range []struct {
		status string
		want   bool
	}{
		{"SigBlk:0000000000000000\nSigIgn:0000000000000000\n", true},
		{"SigBlk:0000000000000000\nSigIgn:0000000080000000\n", true},  // 32, a real-time signal
		{"SigBlk:0000000000000000\nSigIgn:0000000000000001\n", false}, // SIGHUP ignored
		{"SigBlk:0000000000004000\nSigIgn:0000000000000000\n", false}, // SIGTERM blocked
		{"SigIgn:0000000000000000\n", false},
		{"", false},
	} {
		if got := defaultStandardSignals(tc.status); got != tc.want {
			t.Errorf("defaultStandardSignals(%q) = %v, want %v", tc.status, got, tc.want)
		}
	}
}
