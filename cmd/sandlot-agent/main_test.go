package main

import (
	"context"
	"debug/elf"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/agent/typescript"
	"github.com/sandlot/sandlot/internal/testenv"
)

// TestStaticBinaryServes builds the agent the way the Makefile does and
// checks that it is static (it runs on a sandbox root with no loader of its
// own choosing) and that it serves on the socket given by flags.
func TestStaticBinaryServes(t *testing.T) {
	dir := t.TempDir()
	bin := buildStatic(t, dir)
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
			t.Fatalf("agent binary is dynamically linked (%v)", p.Type)
		}
	}
	f.Close()

	sock := filepath.Join(dir, "run", "agent.sock")
	home := filepath.Join(dir, "home")
	cmd := exec.Command(bin, "--socket", sock, "--home", home)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = cmd.Process.Signal(os.Interrupt)
		_ = cmd.Wait()
	}()
	c := dial(t, sock)
	info, err := c.PingInfo(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if info.Version != agent.Version || info.PID != cmd.Process.Pid {
		t.Fatalf("ping = %+v", info)
	}
	st, err := os.Stat(sock)
	if err != nil || st.Mode().Perm() != 0o666 {
		t.Fatalf("socket mode %v %v", st.Mode(), err)
	}
	if st, err := os.Stat(home); err != nil || !st.IsDir() {
		t.Fatalf("home not created: %v", err)
	}
}

// TestKeyFD: with --key-fd the agent reads its key from that descriptor
// and serves only a host that proves it; without the key, or with another,
// the connection is refused. Its children do not inherit the descriptor.
func TestKeyFD(t *testing.T) {
	dir := t.TempDir()
	bin := buildStatic(t, dir)
	sock := filepath.Join(dir, "agent.sock")
	key := []byte("0123456789abcdef0123456789abcdef")
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	pw.Write(key)
	pw.Close()
	var st syscall.Stat_t
	if err := syscall.Fstat(int(pr.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	pipe := fmt.Sprintf("pipe:[%d]", st.Ino)
	cmd := exec.Command(bin, "--socket", sock, "--home", filepath.Join(dir, "home"), "--key-fd", "3")
	cmd.ExtraFiles = []*os.File{pr}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pr.Close()
	defer func() {
		_ = cmd.Process.Signal(os.Interrupt)
		_ = cmd.Wait()
	}()
	ctx := context.Background()
	var c *agent.Client
	for i := 0; i < 500; i++ {
		if c, err = agent.Dial(ctx, sock, agent.ClientConfig{SandboxID: "key", Key: key}); err == nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// The agent closed the key's pipe once read: neither it nor a child
	// holds it.
	r, err := c.Exec(ctx, agent.ExecParams{Shell: "sleep 30 & echo $!"}, nil)
	if err != nil || r.ExitCode != 0 {
		t.Fatalf("exec: %+v, %v", r, err)
	}
	for _, pid := range []string{strconv.Itoa(cmd.Process.Pid), strings.TrimSpace(r.Stdout)} {
		fds, _ := filepath.Glob("/proc/" + pid + "/fd/*")
		if len(fds) == 0 {
			t.Errorf("no fds of %s", pid)
		}
		for _, fd := range fds {
			if l, _ := os.Readlink(fd); l == pipe {
				t.Errorf("process %s still holds the key's pipe as %s", pid, fd)
			}
		}
	}
	for _, k := range [][]byte{nil, []byte("another key, 32 bytes long......")} {
		c, err := agent.Dial(ctx, sock, agent.ClientConfig{SandboxID: "key", Key: k})
		if err == nil {
			_, err = c.PingInfo(ctx)
			c.Close()
		}
		if err == nil {
			t.Errorf("key %q: the agent served a host without its key", k)
		}
	}
}

func buildStatic(t *testing.T, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "sandlot-agent")
	build := exec.Command("go", "build", "-trimpath", "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	return bin
}

func dial(t *testing.T, sock string) *agent.Client {
	t.Helper()
	var c *agent.Client
	var err error
	for i := 0; i < 500; i++ {
		if c, err = agent.Dial(context.Background(), sock, agent.ClientConfig{SandboxID: "main-test"}); err == nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestReadOnlyRootAsPID1 runs the static agent the way a sandbox does: PID 1
// of a new pid namespace, uid 1000, the host's / read-only, and only
// /home/user, /tmp and the socket dir writable. The runtime's own container
// tests cover the real OCI setup; this pins the agent's side of it.
func TestReadOnlyRootAsPID1(t *testing.T) {
	bwrap := testenv.RequireBinary(t, "bwrap") // scripts/deps.sh test installs bubblewrap
	dir := t.TempDir()
	bin := buildStatic(t, dir)
	home, run := filepath.Join(dir, "home"), filepath.Join(dir, "run")
	for _, d := range []string{home, run} {
		if err := os.MkdirAll(d, 0o777); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(d, 0o777); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(bwrap,
		"--ro-bind", "/", "/",
		"--tmpfs", "/tmp", "--tmpfs", "/home", "--tmpfs", "/run",
		"--bind", home, "/home/user",
		"--bind", run, agent.SocketDir,
		"--ro-bind", bin, "/tmp/sandlot-agent",
		"--dev", "/dev", "--proc", "/proc",
		"--unshare-pid", "--as-pid-1", "--unshare-user", "--uid", "1000", "--gid", "1000",
		"--die-with-parent", "--chdir", "/home/user",
		"/tmp/sandlot-agent")
	if testing.Verbose() {
		cmd.Stderr = os.Stderr
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	c := dial(t, filepath.Join(run, agent.SocketName))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	info, err := c.PingInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.PID != 1 {
		t.Fatalf("agent pid = %d, want 1", info.PID)
	}
	for _, tc := range []struct{ lang, code, want string }{
		{agent.Python, "import os\nos.getuid(), os.getcwd()", "(1000, '/home/user')"},
		{agent.Python, "import matplotlib.pyplot as plt\nplt.plot([1, 2])\nlen(plt.get_fignums())", "1"},
		{agent.JavaScript, "process.getuid()", "1000"},
		{agent.TypeScript, "const n: number = 2; n * 21", "42"},
	} {
		r, err := typescript.RunCode(ctx, c, agent.RunCodeParams{Language: tc.lang, Code: tc.code}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !r.Success || len(r.Results) == 0 || r.Results[0].Text != tc.want {
			t.Fatalf("%s %q: %+v %+v", tc.lang, tc.code, r, r.Error)
		}
	}
	r, err := c.RunCode(ctx, agent.RunCodeParams{Language: agent.Bash, Code: "touch /usr/sandlot-x"}, nil)
	if err != nil || r.Success {
		t.Fatalf("writing /usr succeeded: %+v %v", r, err)
	}
	// Orphans reparent to the agent as PID 1 and must be reaped.
	if _, err := c.Exec(ctx, agent.ExecParams{Shell: "for i in 1 2 3; do (sleep 0.2 &); done"}, nil); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	e, err := c.Exec(ctx, agent.ExecParams{Shell: "grep -l zombie /proc/[0-9]*/status 2>/dev/null | wc -l; cat /proc/[0-9]*/stat 2>/dev/null | awk '$3 == \"Z\"' | wc -l"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if e.Stdout != "0\n0\n" {
		t.Fatalf("zombies in the sandbox: %q", e.Stdout)
	}
}

// TestNotDumpable runs the agent from a readable binary as uid 1000 (so the
// kernel alone would leave it dumpable) and checks that it made itself
// non-dumpable: /proc/<pid>/mem then belongs to root, not to the agent's
// uid, and a same-uid process cannot ptrace or read it.
func TestNotDumpable(t *testing.T) {
	testenv.RequireRoot(t) // to run the agent as uid 1000
	dir := t.TempDir()
	bin := buildStatic(t, dir)
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o777); err != nil {
			t.Fatal(err)
		}
	}
	sock := filepath.Join(dir, "run", "agent.sock")
	if err := os.MkdirAll(filepath.Dir(sock), 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Dir(sock), 0o777); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--socket", sock, "--home", filepath.Join(dir, "home"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 1000, Gid: 1000}}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}()
	c := dial(t, sock)
	if err := c.Ping(context.Background()); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(fmt.Sprintf("/proc/%d/mem", cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	if uid := st.Sys().(*syscall.Stat_t).Uid; uid != 0 {
		t.Fatalf("/proc/<agent>/mem owned by uid %d: the agent is dumpable", uid)
	}
	// Its children are dumpable again (execve resets it): user code keeps
	// working normally.
	e, err := c.Exec(context.Background(), agent.ExecParams{Shell: "stat -c %u /proc/self/mem"}, nil)
	if err != nil || e.Stdout != "1000\n" {
		t.Fatalf("child /proc/self/mem owner: %+v %v", e, err)
	}
}

// TestImportsNothingFromTheDaemon: the agent links only the protocol
// (agent/...), the error taxonomy (errdefs) and the log keys
// (internal/logkey) of this module.
func TestImportsNothingFromTheDaemon(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	const mod = "github.com/sandlot/sandlot/"
	for _, p := range strings.Fields(string(out)) {
		rest, ok := strings.CutPrefix(p, mod)
		if !ok {
			continue
		}
		if rest != "errdefs" && rest != "internal/logkey" && rest != "agent" && !strings.HasPrefix(rest, "agent/") && rest != "cmd/sandlot-agent" {
			t.Errorf("the agent imports %s", p)
		}
	}
}

// TestPodModeIsThePodAgents: the local agent has no pod mode (it links no
// TLS: deps_test.go); `sandlot-agent pod` names the binary that has it and
// exits 2 rather than serving anything.
func TestPodModeIsThePodAgents(t *testing.T) {
	out, err := exec.Command(testenv.AgentBinary(t), "pod", "--listen", "127.0.0.1:0").CombinedOutput()
	ee, ok := err.(*exec.ExitError)
	if !ok || ee.ExitCode() != 2 || !strings.Contains(string(out), "sandlot-pod-agent") {
		t.Fatalf("sandlot-agent pod: %v: %s", err, out)
	}
}
