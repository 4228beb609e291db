package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/internal/testenv"
)

// TestReadyFD: with --ready-fd the agent closes that descriptor once it
// listens (the host's read end then ends, and one dial connects), and
// neither it nor anything it starts (a prestarted kernel, a shell and its
// children) holds the pipe afterwards: /proc/<pid>/fd of each, and the
// shell's own /proc/self/fd, show no descriptor of it.
func TestReadyFD(t *testing.T) {
	dir := t.TempDir()
	bin := buildStatic(t, dir)
	sock := filepath.Join(dir, "agent.sock")
	key := []byte("0123456789abcdef0123456789abcdef")
	kr, kw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	kw.Write(key)
	kw.Close()
	rr, rw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(int(rr.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	pipe := fmt.Sprintf("pipe:[%d]", st.Ino)
	cmd := exec.Command(bin, "--socket", sock, "--home", filepath.Join(dir, "home"), "--key-fd", "3", "--ready-fd", "4", "--prestart", "python")
	cmd.ExtraFiles = []*os.File{kr, rw}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	kr.Close()
	rw.Close()
	defer func() {
		_ = cmd.Process.Signal(os.Interrupt)
		_ = cmd.Wait()
	}()
	// The read end ends when the last write end closes: the agent's.
	done := make(chan error, 1)
	go func() {
		_, err := io.Copy(io.Discard, rr)
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(60 * time.Second):
		t.Error("the agent never closed its readiness pipe")
	}
	ctx := context.Background()
	c, err := agent.Dial(ctx, sock, agent.ClientConfig{SandboxID: "ready", Key: key})
	if err != nil {
		t.Fatalf("dial right after the pipe ended: %v", err)
	}
	defer c.Close()
	r, err := c.Exec(ctx, agent.ExecParams{Shell: "sleep 30 & echo $!; ls -l /proc/self/fd/ /proc/$$/fd/"}, nil)
	if err != nil || r.ExitCode != 0 {
		t.Fatalf("exec: %+v, %v", r, err)
	}
	if strings.Contains(r.Stdout, pipe) {
		t.Errorf("a shell in the sandbox sees the readiness pipe:\n%s", r.Stdout)
	}
	pids := []string{strconv.Itoa(cmd.Process.Pid), strings.SplitN(r.Stdout, "\n", 2)[0]}
	var kids []string
	for deadline := time.Now().Add(60 * time.Second); len(kids) == 0 && time.Now().Before(deadline); {
		kids = testenv.ChildPIDs(cmd.Process.Pid) // the prestarted kernel
		time.Sleep(20 * time.Millisecond)
	}
	if len(kids) == 0 {
		t.Error("no prestarted kernel among the agent's children")
	}
	pids = append(pids, kids...)
	for _, pid := range pids {
		fds, _ := filepath.Glob("/proc/" + pid + "/fd/*")
		if len(fds) == 0 {
			t.Errorf("no fds of %s", pid)
		}
		for _, fd := range fds {
			if l, _ := os.Readlink(fd); l == pipe {
				t.Errorf("process %s still holds the readiness pipe as %s", pid, fd)
			}
		}
	}
}
