// Command kubeup runs the test cluster of internal/kubetest for people:
// `make k8s-up` (kubeup start) brings it up in the background and prints
// `export KUBECONFIG=...` on its last line; `make k8s-down` (kubeup stop)
// stops it, which removes everything it made.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/sandlot/sandlot/internal/kubetest"
)

// stateFile tells stop which process runs the cluster, and start that it is up.
var (
	stateFile = filepath.Join(kubetest.DefaultBaseDir, "up.json")
	logFile   = filepath.Join(kubetest.DefaultBaseDir, "up.log")
)

type state struct {
	PID        int    `json:"pid"`
	Kubeconfig string `json:"kubeconfig"`
	Registry   string `json:"registry"`
	Dir        string `json:"dir"`
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: kubeup start|stop|run")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "start":
		err = start()
	case "run":
		err = run()
	case "stop":
		err = stop()
	default:
		err = fmt.Errorf("unknown command %q (start, stop, run)", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "kubeup:", err)
		os.Exit(1)
	}
}

// start runs `kubeup run` detached, with its output in up.log, and waits
// for it to write the state file (or to exit).
func start() error {
	if s, err := readState(); err == nil && alive(s.PID) {
		printExports(s)
		return nil
	}
	if err := os.MkdirAll(kubetest.DefaultBaseDir, 0o700); err != nil {
		return err
	}
	_ = os.Remove(stateFile)
	log, err := os.OpenFile(logFile, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	defer log.Close()
	self, err := os.Executable()
	if err != nil {
		return err
	}
	cmd := exec.Command(self, "run")
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	fmt.Fprintf(os.Stderr, "kubeup: starting the cluster (log: %s)\n", logFile)
	deadline := time.After(6 * time.Minute)
	for {
		if s, err := readState(); err == nil && s.PID == cmd.Process.Pid {
			printExports(s)
			return nil
		}
		select {
		case err := <-exited:
			b, _ := os.ReadFile(logFile)
			return fmt.Errorf("the cluster did not start (%v):\n%s", err, tail(string(b), 30))
		case <-deadline:
			return fmt.Errorf("the cluster is not up after 6 minutes; see %s", logFile)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func printExports(s state) {
	fmt.Printf("# registry for images: %s (plain HTTP); state in %s\n", s.Registry, s.Dir)
	fmt.Printf("export KUBECONFIG=%s\n", s.Kubeconfig)
}

// run holds the cluster until SIGTERM or SIGINT, then stops it.
func run() error {
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer cancel()
	c, err := kubetest.Start(ctx, kubetest.Options{
		LockWait: time.Minute,
		Logf:     func(f string, a ...any) { fmt.Fprintf(os.Stderr, time.Now().Format(time.TimeOnly)+" "+f+"\n", a...) },
	})
	if err != nil {
		return err
	}
	s := state{PID: os.Getpid(), Kubeconfig: c.Kubeconfig, Registry: c.Registry, Dir: c.Dir}
	b, _ := json.Marshal(s)
	if err := os.WriteFile(stateFile, b, 0o600); err != nil {
		_ = c.Stop()
		return err
	}
	<-ctx.Done()
	fmt.Fprintln(os.Stderr, "stopping the cluster")
	_ = os.Remove(stateFile)
	dir := c.Dir
	err = c.Stop()
	if left := kubetest.Leftovers(dir); len(left) > 0 {
		err = errors.Join(err, fmt.Errorf("left on the host: %v", left))
	}
	return err
}

// stop signals the running cluster and waits for it to clean up; with no
// cluster process, it removes whatever a dead one left.
func stop() error {
	if s, err := readState(); err == nil && alive(s.PID) {
		_ = syscall.Kill(s.PID, syscall.SIGTERM)
		deadline := time.Now().Add(4 * time.Minute)
		for alive(s.PID) {
			if time.Now().After(deadline) {
				return fmt.Errorf("the cluster process %d did not stop in 4 minutes; see %s", s.PID, logFile)
			}
			time.Sleep(500 * time.Millisecond)
		}
		b, _ := os.ReadFile(logFile)
		if strings.Contains(tail(string(b), 5), "kubeup:") {
			return fmt.Errorf("stopping:\n%s", tail(string(b), 5))
		}
	}
	_ = os.Remove(stateFile)
	return kubetest.Clean(context.Background(), "", time.Minute)
}

func readState() (state, error) {
	var s state
	b, err := os.ReadFile(stateFile)
	if err != nil {
		return s, err
	}
	return s, json.Unmarshal(b, &s)
}

func alive(pid int) bool {
	return pid > 0 && syscall.Kill(pid, 0) == nil
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
