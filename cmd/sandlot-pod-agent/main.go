// Command sandlot-pod-agent is the agent of a Kubernetes pod: PID 1 of a
// pod image (image/podimage puts it there as /usr/local/bin/sandlot-agent,
// run as `sandlot-agent pod`), serving the agent protocol (package agent)
// on the pod channel (agent/channel.go) over TLS (agent/podchannel). It is
// a binary of its own so that the local agent (cmd/sandlot-agent), in
// every local sandbox, links no TLS.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"strconv"
	"strings"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/agent/pid1"
	"github.com/sandlot/sandlot/agent/podchannel"
	"github.com/sandlot/sandlot/agent/server"
)

func main() {
	// No ptrace, no /proc/1/mem, no core for the user code that runs
	// with the agent's uid (1000 in a pod).
	if err := pid1.NotDumpable(); err != nil {
		fmt.Fprintln(os.Stderr, "sandlot-pod-agent:", err)
	}
	args := os.Args[1:]
	if len(args) > 0 && args[0] == "pod" { // the pod image's entrypoint names the mode
		args = args[1:]
	}
	if err := runPod(args); err != nil {
		fmt.Fprintln(os.Stderr, "sandlot-pod-agent:", err)
		os.Exit(1)
	}
}

// runPod is the agent as a pod's entrypoint, on the pod channel. Its key
// is a file of a Secret volume: the sandbox's own (--key-file, a cold
// pod) or its template's pool key (--pool-key-file, a warm pod, which
// serves nothing until one enrollment gives it the sandbox's key and
// configuration).
func runPod(args []string) error {
	fs := flag.NewFlagSet("sandlot-pod-agent", flag.ContinueOnError)
	listen := fs.String("listen", ":"+strconv.Itoa(agent.PodPort), "TCP address of the pod channel")
	keyFile := fs.String("key-file", "/var/run/sandlot/key", "the sandbox's key (a cold pod)")
	poolKeyFile := fs.String("pool-key-file", "", "the pool's key (a warm pod): accept one enrollment, then only the key it delivers; overrides --key-file")
	home := fs.String("home", "/home/user", "the user's home: base of relative paths")
	prestart := fs.String("prestart", "", "comma-separated languages whose kernel starts at boot")
	health := fs.String("health", server.HealthAddr, "TCP address where GET /health answers once the agent listens (the pod's readiness probe); \"\": none")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	var key, pool []byte
	var err error
	if *poolKeyFile != "" {
		pool, err = readKeyFile(*poolKeyFile)
	} else {
		key, err = readKeyFile(*keyFile)
	}
	if err != nil {
		return err
	}
	keys, err := agent.NewPodKeys(key, pool)
	if err != nil {
		return err
	}
	podTLS, err := podchannel.NewServer()
	if err != nil {
		return fmt.Errorf("pod channel: certificate: %w", err)
	}
	var langs []string
	for _, l := range strings.Split(*prestart, ",") {
		if l = strings.TrimSpace(l); l != "" {
			langs = append(langs, l)
		}
	}
	if os.Getenv("GOMAXPROCS") == "" {
		runtime.GOMAXPROCS(1) // as in the local agent: the agent multiplexes I/O
	}
	reserved := make(chan struct{})
	listening := func() {
		go func() {
			pid1.ReserveThreads(pid1.ThreadReserve)
			close(reserved)
		}()
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	ctx, stop, _ := pid1.SignalContext(context.Background())
	defer stop()
	return server.Run(ctx, server.Config{Listen: *listen, Pod: keys, PodTLS: podTLS, Home: *home, Prestart: langs, Health: *health, Ready: reserved, Listening: listening, Logger: log})
}

// readKeyFile reads a key from a Secret volume's file. The file stays
// readable in the pod (a Secret volume cannot be unmounted without
// privileges the pod does not have); docs/security-walls-kubernetes.md says what that
// leaves open.
func readKeyFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("key: %w", err)
	}
	return pid1.ReadKey(f, "key "+path)
}
