// Command sandlot-agent runs as PID 1 inside every local sandbox and
// serves the agent protocol (package agent) on a unix socket. A
// Kubernetes pod's agent, on the pod channel over TLS, is
// cmd/sandlot-pod-agent: this binary links no TLS.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/agent/pid1"
	"github.com/sandlot/sandlot/agent/server"
)

func main() {
	// Defence in depth: user code runs with the agent's uid, so make the
	// agent non-dumpable (no ptrace, no /proc/1/mem, no core) even when the
	// binary is readable. The runtime's execute-only mount already does
	// this; children regain dumpability at execve.
	if err := pid1.NotDumpable(); err != nil {
		fmt.Fprintln(os.Stderr, "sandlot-agent:", err)
	}
	if len(os.Args) > 1 && os.Args[1] == "pod" {
		fmt.Fprintln(os.Stderr, "sandlot-agent: a pod's agent is sandlot-pod-agent (this one serves local sandboxes and links no TLS)")
		os.Exit(2)
	}
	def := filepath.Join(agent.SocketDir, agent.SocketName)
	if v := os.Getenv("SANDLOT_AGENT_SOCKET"); v != "" {
		def = v
	}
	home := "/home/user"
	if v := os.Getenv("SANDLOT_AGENT_HOME"); v != "" {
		home = v
	}
	socket := flag.String("socket", def, "unix socket to listen on (env SANDLOT_AGENT_SOCKET)")
	flag.StringVar(&home, "home", home, "the user's home: base of relative paths (env SANDLOT_AGENT_HOME)")
	prestart := flag.String("prestart", os.Getenv("SANDLOT_AGENT_PRESTART"), "comma-separated languages whose kernel starts at boot, e.g. python, or ipython: python with IPython imported (env SANDLOT_AGENT_PRESTART)")
	root := flag.Bool("root", false, "the agent runs as root of its sandbox's user namespace: it starts the default user's processes as uid 1000 without capabilities, and root's as itself")
	userFlag := flag.String("user", "", "with --root: the default user's account as NAME:UID:GID, when the template runs as a user of its image other than the sandbox user (uid 1000)")
	sudo := flag.Bool("sudo", false, "with --root: the default user can become root with the image's sudo, so the user's file calls run as root and give what they create to the user (as E2B's envd does)")
	keyFD := flag.Int("key-fd", -1, "read the sandbox's key from this file descriptor (to its end) and require every connection to prove it")
	readyFD := flag.Int("ready-fd", -1, "close this file descriptor once the socket listens (the host waits for that before it connects)")
	outputWindow := flag.Duration("output-window", 0, "how long a call's streamed stdout or stderr waits for more before it goes to the host as one event (0: 5ms; negative: each read is its own event); the call's end sends it at once")
	flag.Parse()
	// Before anything else: the readiness pipe must never reach a child.
	ready := readyPipe(*readyFD)
	var key []byte
	if *keyFD >= 0 {
		var err error
		if key, err = readKey(*keyFD); err != nil {
			fmt.Fprintln(os.Stderr, "sandlot-agent:", err)
			os.Exit(1)
		}
	}
	if *root && os.Geteuid() != 0 {
		fmt.Fprintln(os.Stderr, "sandlot-agent: --root needs uid 0, have", os.Geteuid())
		os.Exit(1)
	}
	var user *server.UserIDs
	if *userFlag != "" {
		var err error
		if user, err = server.ParseUserIDs(*userFlag); err != nil {
			fmt.Fprintln(os.Stderr, "sandlot-agent: --user:", err)
			os.Exit(1)
		}
		if !*root {
			fmt.Fprintln(os.Stderr, "sandlot-agent: --user needs --root")
			os.Exit(1)
		}
	}
	if *sudo && !*root {
		fmt.Fprintln(os.Stderr, "sandlot-agent: --sudo needs --root")
		os.Exit(1)
	}
	var langs []string
	for _, l := range strings.Split(*prestart, ",") {
		if l = strings.TrimSpace(l); l != "" {
			langs = append(langs, l)
		}
	}

	// The agent only multiplexes I/O (kernel and exec pipes wait on the
	// netpoller). More Ps only add thread handoffs and spinning threads that
	// compete with user code for the sandbox's CPUs; one P measured faster
	// on the warm kernel round trip. GOMAXPROCS in the environment wins: the host sets it (agent.RuntimeEnv), so the runtime starts with one P and does not resize here.
	if os.Getenv("GOMAXPROCS") == "" {
		runtime.GOMAXPROCS(1)
	}
	// The reserve is made once a request waits for it (server.Config.Hold),
	// or reserveAfter after listening if none came, whichever is first; no
	// kernel starts before it stands (each runs creator-controlled code as
	// it starts). Made when the agent listens, it held the agent's one P
	// from the host's handshake and the first request for ~2.5 ms of
	// every cold create without prestarted kernels. With kernels to prestart (--prestart) it is made
	// at once: they wait for it, so deferring it would only delay them.
	// The server answers no request but ping before it is complete.
	reserved := make(chan struct{})
	var reserveOnce sync.Once
	reserve := func() {
		reserveOnce.Do(func() {
			go func() {
				pid1.ReserveThreads(pid1.ThreadReserve)
				close(reserved)
			}()
		})
	}
	listening := func() {
		if ready != nil {
			ready.Close() // the host connects now
		}
		if len(langs) > 0 {
			reserve() // prestarted kernels wait for it: nothing to gain by waiting
			return
		}
		time.AfterFunc(reserveAfter, reserve)
	}

	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	ctx, stop, isPID1 := pid1.SignalContext(context.Background())
	defer stop()
	health := ""
	if isPID1 {
		health = server.HealthAddr // PID 1: a sandbox, with a network namespace of its own
	}
	if err := server.Run(ctx, server.Config{Socket: *socket, Key: key, Home: home, Prestart: langs, Root: *root, User: user, Sudo: *sudo, Health: health, Ready: reserved, Hold: reserve, Listening: listening, OutputWindow: *outputWindow, Logger: log}); err != nil {
		fmt.Fprintln(os.Stderr, "sandlot-agent:", err)
		os.Exit(1)
	}
}

// readKey reads the key from fd to its end and closes fd, before any
// other process exists in the sandbox; children never inherit it.
func readKey(fd int) ([]byte, error) {
	f := os.NewFile(uintptr(fd), "key")
	if f == nil {
		return nil, fmt.Errorf("key fd %d: not open", fd)
	}
	return pid1.ReadKey(f, fmt.Sprintf("key fd %d", fd))
}

// readyPipe takes the readiness pipe's write end on fd (none if fd < 0):
// marked close-on-exec at once, so no process the agent starts inherits it
// (the runtime hands it in inheritable), and closed once the agent listens.
func readyPipe(fd int) *os.File {
	if fd < 0 {
		return nil
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETFD, unix.FD_CLOEXEC); err != nil {
		fmt.Fprintf(os.Stderr, "sandlot-agent: ready fd %d: %v\n", fd, err)
		return nil
	}
	return os.NewFile(uintptr(fd), "ready")
}

// reserveAfter is when, after listening, the agent makes its thread
// reserve if no request asked for it first: a sandbox of a warm pool has
// it before it is taken. A cold create's first request comes sooner.
const reserveAfter = 20 * time.Millisecond
