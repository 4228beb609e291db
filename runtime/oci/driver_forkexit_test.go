package oci

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// fakeForkExitEnv runs the test binary as a runtime that detaches as
// `crun run --detach` does, in three processes of one argv: the process
// started (P) starts a child (C) in a session of its own and waits; C
// writes its pid to <dir>/c, waits for <dir>/go to appear, then starts the
// worker (G, in C's session) and exits at once; G writes its pid to
// <dir>/g and goes on working. The variable names dir.
const fakeForkExitEnv = "SANDLOT_OCI_FAKE_FORKEXIT"

const fakeForkExitStage = fakeForkExitEnv + "_STAGE"

func fakeForkExitMain(dir string) {
	self := func(stage string, setsid bool) *exec.Cmd { return reexec(fakeForkExitStage+"="+stage, setsid) }
	switch os.Getenv(fakeForkExitStage) {
	case "":
		c := self("c", true)
		if c.Start() != nil {
			os.Exit(3)
		}
		c.Wait()
		time.Sleep(5 * time.Minute) // crun's first process waits for the worker's word
	case "c":
		if writePIDFile(filepath.Join(dir, "c")) != nil {
			os.Exit(4)
		}
		for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
			if _, err := os.Stat(filepath.Join(dir, "go")); err == nil {
				if self("g", false).Start() != nil {
					os.Exit(5)
				}
				break
			}
		}
	case "g":
		if writePIDFile(filepath.Join(dir, "g")) != nil {
			os.Exit(6)
		}
		time.Sleep(5 * time.Minute)
	}
	os.Exit(0)
}

// writePIDFile writes the process's pid to path, whole or not at all.
func writePIDFile(path string) error {
	if err := os.WriteFile(path+".tmp", []byte(strconv.Itoa(os.Getpid())), 0o600); err != nil {
		return err
	}
	return os.Rename(path+".tmp", path)
}

// reexec is the test binary started again with its own argv and env, and
// env ("KEY=value") added, in a session of its own when setsid: a fake
// runtime's next process.
func reexec(env string, setsid bool) *exec.Cmd {
	c := exec.Command("/proc/self/exe", os.Args[1:]...)
	c.Args[0] = os.Args[0]
	c.Env = append(os.Environ(), env)
	c.SysProcAttr = &syscall.SysProcAttr{Setsid: setsid}
	return c
}

// startFakeRun starts `run --detach` of a sandbox through a driver whose
// runtime is the test binary run as a fake (env, "KEY=value", selects
// which), and kills, when t ends, the fake's processes whose pids
// pidFiles hold: a fatal path leaves none sleeping out its minutes.
func startFakeRun(t *testing.T, env, id string, pidFiles ...string) (driver, *exec.Cmd, context.CancelFunc) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	k, v, _ := strings.Cut(env, "=")
	t.Setenv(k, v)
	killFakesAtEnd(t, env, pidFiles...)
	d := driver{r: &Runtime{stateDir: t.TempDir()}, kind: KindCrun, bin: exe}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	c := d.cmd(ctx, "", "run", "--detach", id)
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	return d, c, cancel
}

// TestCancelEndsRuntimeForkedDuringScan: the detached child of a cancelled
// runtime (crun's, in a session of its own) that forks its worker after a
// scan has listed /proc and exits before the scan reads it leaves the scan
// nothing live to find: the worker was not listed, its parent is a
// zombie. endCancelled took that one clean scan for the end, and the
// worker went on creating the sandbox's cgroups after the create's cleanup
// (empty cgroups left by TestCreateCancelledLeavesNothing, about once in
// 80 runs under load). The worker is met by the next scan.
func TestCancelEndsRuntimeForkedDuringScan(t *testing.T) {
	dir := t.TempDir()
	const id = "sb-0123456789ab"
	d, c, cancel := startFakeRun(t, fakeForkExitEnv+"="+dir, id, filepath.Join(dir, "c"), filepath.Join(dir, "g"))
	child := waitPIDFile(t, filepath.Join(dir, "c"))
	cancel()
	if err := c.Wait(); err == nil {
		t.Fatal("a cancelled runtime reported success")
	}
	// The first scan's listing is taken; then the child forks the worker
	// and exits before the scan reads either.
	list := procPIDs
	t.Cleanup(func() { procPIDs = list })
	var worker int
	procPIDs = func() ([]int, error) {
		pids, err := list()
		if worker == 0 {
			if err := os.WriteFile(filepath.Join(dir, "go"), nil, 0o600); err != nil {
				t.Fatal(err)
			}
			worker = waitPIDFile(t, filepath.Join(dir, "g"))
			for deadline := time.Now().Add(30 * time.Second); alive(child); time.Sleep(time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("the runtime's child %d did not exit", child)
				}
			}
		}
		return pids, err
	}
	if !d.endCancelled(c.Process.Pid, id, time.Now().Add(30*time.Second)) {
		t.Fatal("a process of the cancelled runtime is still live")
	}
	if alive(worker) {
		t.Fatalf("the runtime's worker %d, forked during a scan, outlived the cancel", worker)
	}
}

// TestCancelUnlistedProcIsNotClean: a scan that could not list /proc found
// nothing because it read nothing; endCancelled does not take it for the
// end (it took it for one, as it took a clean scan).
func TestCancelUnlistedProcIsNotClean(t *testing.T) {
	list := procPIDs
	t.Cleanup(func() { procPIDs = list })
	procPIDs = func() ([]int, error) { return nil, syscall.EMFILE }
	d := driver{r: &Runtime{stateDir: t.TempDir()}, kind: KindCrun, bin: "/usr/local/bin/crun-as-shown"}
	// With a listing taken for clean, two scans end it well before the
	// deadline; without, the deadline does.
	if d.endCancelled(1<<22+1, "sb-0123456789ab", time.Now().Add(time.Second)) {
		t.Fatal("scans that could not list /proc were taken for the end of the runtime")
	}
}
