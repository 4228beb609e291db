package main

import (
	"context"
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/sandlot/sandlot/agent"
)

// TestStaticBinaryServes builds the agent the way the Makefile does and
// checks that it is static (it runs on a sandbox root with no loader of its
// own choosing) and that it serves on the socket given by flags.
func TestStaticBinaryServes(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "sandlot-agent")
	build := exec.Command("go", "build", "-trimpath", "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
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
	var c *agent.Client
	for i := 0; i < 500; i++ {
		if c, err = agent.Dial(context.Background(), sock, agent.ClientConfig{SandboxID: "main-test"}); err == nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
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
