package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/sandlot/sandlot/agent"
)

// ignoredAtStart are the signals TestChildrenStartWithDefaultSignals hands
// the agent ignored: the two Go keeps ignored itself (SIGHUP, SIGINT), a
// plain one (SIGUSR1), and real-time ones, 32 (which the Go runtime never
// handles) among them.
var ignoredAtStart = []syscall.Signal{syscall.SIGHUP, syscall.SIGINT, syscall.SIGUSR1, 32, 34, 40, 64}

// TestChildrenStartWithDefaultSignals: an agent started with signals
// ignored (SIG_IGN is inherited across exec) starts its children with the
// default disposition for every one of them, as a fresh login shell has
// them: user code is not handed its launcher's ignored signals. The agent
// itself still survives a SIGHUP it was started ignoring.
func TestChildrenStartWithDefaultSignals(t *testing.T) {
	if bin := os.Getenv("SANDLOT_T_EXEC_IGNORING"); bin != "" {
		// The launcher: ignore, then become the agent.
		for _, sig := range ignoredAtStart {
			setIgnored(t, sig)
		}
		// The agent is handed them ignored (or never starts: dial fails).
		ign := sigIgn(t, "self")
		for _, sig := range ignoredAtStart {
			if ign&mask(sig) == 0 {
				t.Fatalf("the launcher's SigIgn %#x lacks signal %d", ign, int(sig))
			}
		}
		argv := []string{bin, "--socket", os.Getenv("SANDLOT_T_SOCKET"), "--home", os.Getenv("SANDLOT_T_HOME")}
		t.Fatal(syscall.Exec(bin, argv, os.Environ()))
	}
	dir := t.TempDir()
	bin := buildStatic(t, dir)
	sock := filepath.Join(dir, "agent.sock")
	cmd := exec.Command(os.Args[0], "-test.run", "^TestChildrenStartWithDefaultSignals$")
	cmd.Env = append(os.Environ(), "SANDLOT_T_EXEC_IGNORING="+bin, "SANDLOT_T_SOCKET="+sock, "SANDLOT_T_HOME="+filepath.Join(dir, "home"))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	}()
	c := dial(t, sock)
	r, err := c.Exec(context.Background(), agent.ExecParams{Argv: []string{"/bin/cat", "/proc/self/status"}}, nil)
	if err != nil || r.ExitCode != 0 {
		t.Fatalf("exec: %+v, %v", r, err)
	}
	ign := parseSigIgn(t, r.Stdout)
	for _, sig := range ignoredAtStart {
		if ign&mask(sig) != 0 {
			t.Errorf("the child starts with signal %d (%v) ignored (SigIgn %#x)", int(sig), sig, ign)
		}
	}
	// The agent (not PID 1) still meets SIGHUP as one it was started
	// ignoring, as under nohup. A fatal signal's default ends the process
	// before kill returns, so the exec after it finds the agent gone if
	// SIGHUP was put back to the default.
	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	if r, err := c.Exec(context.Background(), agent.ExecParams{Argv: []string{"/bin/true"}}, nil); err != nil || r.ExitCode != 0 {
		t.Fatalf("exec after SIGHUP: %+v, %v (the agent started with SIGHUP ignored did not survive it)", r, err)
	}
}

func mask(sig syscall.Signal) uint64 { return 1 << (uint(sig) - 1) }

// setIgnored sets sig's disposition to SIG_IGN with rt_sigaction itself:
// libc and Go's os/signal refuse 32 and 33.
func setIgnored(t *testing.T, sig syscall.Signal) {
	sa := struct {
		handler, flags, restorer uintptr
		mask                     uint64
	}{handler: 1} // SIG_IGN
	if _, _, e := unix.RawSyscall6(unix.SYS_RT_SIGACTION, uintptr(sig), uintptr(unsafe.Pointer(&sa)), 0, 8, 0, 0); e != 0 {
		t.Fatalf("ignore %d: %v", int(sig), e)
	}
}

func sigIgn(t *testing.T, pid string) uint64 {
	b, err := os.ReadFile("/proc/" + pid + "/status")
	if err != nil {
		t.Fatal(err)
	}
	return parseSigIgn(t, string(b))
}

func parseSigIgn(t *testing.T, status string) uint64 {
	for _, l := range strings.Split(status, "\n") {
		if v, ok := strings.CutPrefix(l, "SigIgn:"); ok {
			n, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatalf("no SigIgn in %q", status)
	return 0
}
