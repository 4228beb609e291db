// Command kubeup runs the test cluster of internal/kubetest for people:
// `make k8s-up` (kubeup start -images bin/images -sandlot bin/sandlot)
// brings it up in the background, installs sandlot with the Helm chart
// (internal/kubetest/install: two replicas, the kubernetes provider, a
// Postgres of its own) from the images `make images` wrote, and prints
// `export KUBECONFIG=...`, `export SANDLOT_URL=... SANDLOT_API_KEY=...` and
// the E2B SDK's variables on its last lines; `make k8s-down` (kubeup stop)
// stops it, which removes everything it made.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sandlot/sandlot/internal/kubetest"
	"github.com/sandlot/sandlot/internal/kubetest/install"
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
	// The install, when kubeup was given images.
	URL         string `json:"url,omitempty"`
	APIKey      string `json:"apiKey,omitempty"`
	PostgresPID int    `json:"postgresPid,omitempty"`
	PostgresDir string `json:"postgresDir,omitempty"`
}

// namespace is where make k8s-up installs sandlot.
const namespace = "sandlot"

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: kubeup start|run [-images DIR -sandlot BIN] | stop")
		os.Exit(2)
	}
	fs := flag.NewFlagSet("kubeup "+os.Args[1], flag.ExitOnError)
	images := fs.String("images", "", "the OCI layouts of make images (sandlot-daemon, sandlot-pod-default): install sandlot from them; none: the cluster alone")
	sandlot := fs.String("sandlot", "", "a sandlot binary for this host (makes the install's tenant)")
	_ = fs.Parse(os.Args[2:])
	var err error
	switch os.Args[1] {
	case "start":
		err = start(os.Args[2:])
	case "run":
		err = run(*images, *sandlot)
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

// lockWait bounds the wait for the machine's cluster lock: the test
// cluster of a test package in another shell runs for minutes.
const lockWait = 30 * time.Minute

// lockLine is the log's line about the lock's holder.
func lockLine(log string) string {
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, "another cluster runs on this machine") {
			return strings.TrimSpace(l)
		}
	}
	return ""
}

// start runs `kubeup run` detached, with its output in up.log, and waits
// for it to write the state file (or to exit).
func start(args []string) error {
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
	cmd := exec.Command(self, append([]string{"run"}, args...)...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	fmt.Fprintf(os.Stderr, "kubeup: starting the cluster (log: %s)\n", logFile)
	// The wait for the machine's lock (another cluster: a test, or another
	// k8s-up), the cluster's start (4 minutes at most) and the install's
	// (pushes, and the replicas Ready within 5 minutes).
	deadline := time.After(lockWait + 15*time.Minute)
	said := false
	for {
		if s, err := readState(); err == nil && s.PID == cmd.Process.Pid {
			printExports(s)
			return nil
		}
		if !said {
			// Say so when the cluster waits for the lock, or the wait
			// looks like a hang.
			if b, _ := os.ReadFile(logFile); strings.Contains(string(b), "another cluster runs on this machine") {
				fmt.Fprintf(os.Stderr, "kubeup: waiting for another cluster on this machine to stop (a test's, or another k8s-up's; up to %s): %s\n", lockWait, lockLine(string(b)))
				said = true
			}
		}
		select {
		case err := <-exited:
			b, _ := os.ReadFile(logFile)
			return fmt.Errorf("the cluster did not start (%v):\n%s", err, tail(string(b), 30))
		case <-deadline:
			return fmt.Errorf("the cluster is not up after 15 minutes; see %s", logFile)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func printExports(s state) {
	fmt.Printf("# registry for images: %s (plain HTTP); state in %s\n", s.Registry, s.Dir)
	fmt.Printf("export KUBECONFIG=%s\n", s.Kubeconfig)
	if s.URL != "" {
		fmt.Printf("# sandlot in namespace %s: two replicas behind the Service; the official E2B SDKs take the E2B_ variables\n", namespace)
		fmt.Printf("export SANDLOT_URL=%s SANDLOT_API_KEY=%s\n", s.URL, s.APIKey)
		fmt.Printf("export E2B_API_URL=%s E2B_SANDBOX_URL=%s E2B_API_KEY=%s\n", s.URL, s.URL, s.APIKey)
	}
}

// run holds the cluster until SIGTERM or SIGINT, then stops it.
func run(images, sandlot string) error {
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer cancel()
	logf := func(f string, a ...any) { fmt.Fprintf(os.Stderr, time.Now().Format(time.TimeOnly)+" "+f+"\n", a...) }
	c, err := kubetest.Start(ctx, kubetest.Options{LockWait: lockWait, Logf: logf})
	if err != nil {
		return err
	}
	s := state{PID: os.Getpid(), Kubeconfig: c.Kubeconfig, Registry: c.Registry, Dir: c.Dir}
	var in *install.Install
	if images != "" {
		in, err = installSandlot(ctx, c, images, sandlot, logf)
		if err != nil {
			_ = c.Stop()
			return fmt.Errorf("install sandlot: %w", err)
		}
		s.URL, s.APIKey = in.URL, in.APIKey
		s.PostgresPID, s.PostgresDir = in.PostgresProcess()
	}
	b, _ := json.Marshal(s)
	if err := os.WriteFile(stateFile, b, 0o600); err != nil {
		in.Close()
		_ = c.Stop()
		return err
	}
	<-ctx.Done()
	fmt.Fprintln(os.Stderr, "stopping the cluster")
	_ = os.Remove(stateFile)
	in.Close()
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
		fmt.Fprintln(os.Stderr, "kubeup: the cluster stopped and left nothing")
		return nil
	}
	// No cluster process: remove whatever a dead one left.
	if s, err := readState(); err == nil {
		install.KillPostgres(s.PostgresPID, s.PostgresDir)
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

// installSandlot installs the chart from make images' layouts in dir.
func installSandlot(ctx context.Context, c *kubetest.Cluster, dir, sandlot string, logf func(string, ...any)) (*install.Install, error) {
	daemon, err := layoutImage(filepath.Join(dir, "sandlot-daemon"))
	if err != nil {
		return nil, err
	}
	pod, err := layoutImage(filepath.Join(dir, "sandlot-pod-default"))
	if err != nil {
		return nil, err
	}
	if sandlot == "" {
		return nil, errors.New("-sandlot: a sandlot binary is needed with -images")
	}
	if _, err := c.Client().CoreV1().Namespaces().Create(ctx, &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{}); err != nil {
		return nil, err
	}
	// The namespace's default service account comes from the controller manager.
	for deadline := time.Now().Add(2 * time.Minute); ; {
		if _, err := c.Client().CoreV1().ServiceAccounts(namespace).Get(ctx, "default", metav1.GetOptions{}); err == nil {
			break
		} else if time.Now().After(deadline) {
			return nil, err
		}
		time.Sleep(200 * time.Millisecond)
	}
	return install.Run(ctx, c, install.Options{Namespace: namespace, Daemon: daemon, Pod: pod, Sandlot: sandlot,
		Replicas: 2, Pool: 1, Logf: logf})
}

// layoutImage is the one image of an OCI layout written by make images.
func layoutImage(dir string) (v1.Image, error) {
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return nil, fmt.Errorf("%s (make images writes it): %w", dir, err)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	if len(m.Manifests) != 1 {
		return nil, fmt.Errorf("%s: %d images, want one", dir, len(m.Manifests))
	}
	return idx.Image(m.Manifests[0].Digest)
}
