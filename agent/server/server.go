// Package server is the in-sandbox side of the agent protocol: it listens on
// a unix socket, serves concurrent connections and calls, runs processes
// (exec), kernels (package kernels) and file operations, and reaps every
// child as PID 1.
package server

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/agent/internal/proc"
	"github.com/sandlot/sandlot/agent/kernels"
	"github.com/sandlot/sandlot/internal/logkey"
)

// Config configures the agent. Zero values are documented per field.
type Config struct {
	// Socket is the unix socket to listen on: a path, or "@name" for an
	// abstract name (the sandbox's own network namespace holds it). "":
	// /run/sandlot/agent.sock.
	Socket string
	// Listen, when set, is a TCP address ("host:port") to serve on
	// instead of Socket: the pod channel (agent/channel.go), the TLS of
	// PodTLS and the bound handshake with the keys in Pod, which must
	// both be set. Key is not used then.
	Listen string
	// Pod holds a pod agent's keys (with Listen or Listener).
	Pod *agent.PodKeys
	// PodTLS wraps each connection of the pod channel in its TLS
	// (agent/podchannel.NewServer; with Listen or Listener). The server
	// is handed it, so the local agent links no TLS.
	PodTLS func(net.Conn) agent.BoundConn
	// Listener, when set, is the TCP listener of the pod channel, already
	// listening (tests); Listen is then ignored.
	Listener net.Listener
	// Key, when set, is the sandbox's secret: every connection must pass
	// the handshake (agent.AgentAccept) before anything is served, so
	// only the host, which holds the key, can drive the agent. nil: no
	// handshake (tests).
	Key []byte
	// Home is the user's home, the base of relative paths and the default
	// working directory. "": /home/user.
	Home string
	// Env is the base environment of processes and kernels. nil: a minimal
	// one (HOME, PATH, LANG, USER, TERM, TMPDIR) plus SANDLOT_* from the
	// agent's own environment, overridden by the sandbox's environment
	// (agent.EnvPrefix variables, prefix removed).
	Env []string
	// Python, Node and Bash override interpreter paths (tests).
	Python, Node, Bash string
	// Prestart lists languages whose default kernel starts with the agent
	// (once Ready is closed, when set) rather than on first use (warm
	// pools). nil: none.
	Prestart []string
	// Root says the agent is root of its sandbox (uid 0 of the sandbox's
	// user namespace, with the runtime's root capabilities there): it then
	// starts the default user's processes and kernels, and does its file
	// calls, with the user's ids (1000) and no capabilities, and those of
	// calls that name root as itself. false: everything runs as the agent,
	// and root is refused.
	Root bool
	// User, with Root, is the default user's account when it is not the
	// sandbox user (uid 1000): a template that runs as another user of
	// its image. Calls naming "user" (or none) run as it; nil: the
	// sandbox user.
	User *UserIDs
	// Sudo, with Root, says the default user can become root (the
	// image's sudo works: runtime.Root.Sudo). The user's file calls then
	// run as root, as E2B's envd does them, and what they create is
	// given to the user; a path the sandbox's code controls leads nowhere
	// the user could not reach with sudo.
	Sudo bool
	// Health, when set, is a TCP address where GET /health answers 200
	// (HealthAddr inside a sandbox, as E2B's code interpreter answers).
	// "": none.
	Health string
	// Ready, when set, holds every request but ping until it is closed
	// (the agent closes it once its thread reserve stands, which must be
	// before any user code runs); listening, the handshake and pings go on
	// meanwhile, so the host's connect does not wait for the reserve.
	Ready <-chan struct{}
	// Hold, when set, is called when a request waits for Ready; the agent
	// makes its thread reserve then rather than between listening and the
	// first request. Nothing starts before Ready: not a run_code's kernel
	// (an interpreter runs creator-controlled code as it starts) nor
	// Prestart's kernels. Called from any goroutine, possibly more than
	// once.
	Hold func()
	// OutputWindow is how long the first pending byte of a call's
	// streamed stdout or stderr waits for more before the call's pending text goes
	// to the host as one event (coalesce.go). 0: DefaultOutputWindow;
	// negative: none, each read is its own event.
	OutputWindow time.Duration
	// Listening, when set, is called once the socket listens.
	Listening func()
	// Logger: nil discards.
	Logger *slog.Logger
}

// Server is a running agent.
type Server struct {
	cfg     Config
	log     *slog.Logger
	started time.Time
	kernels *kernels.Manager
	procs   *procTable
	// detached holds the output of execs whose connection dropped
	// (detach.go).
	detached *detachedTable
	bash     string
	groups   []uint32 // the agent's own supplementary groups, restored after a file call (users.go)
	// owner, in the view of one file call (callAs), is who gets what the
	// call creates; nil: the call's effective ids.
	owner *fileOwner

	// added holds the variables env.set added to cfg.Env (baseEnv),
	// shared by the file calls' views of the server.
	added *addedEnv
	// released tells the accept loop to let go of the channel
	// (release.go).
	released chan struct{}

	// keys holds the key connections must prove, which channel.rekey
	// replaces (rekey.go); shared by the file calls' views of the server.
	keys *keyBox
	// pruneStale: the last release was for a checkpoint that stops the
	// sandbox; the next listen removes the sockets moved aside (moveStale).
	pruneStale *atomic.Bool
	// trim gives the free heap back once no call is in flight (trim.go).
	trim *idleTrim
}

// New prepares an agent without listening.
func New(cfg Config) *Server {
	if cfg.Socket == "" {
		cfg.Socket = filepath.Join(agent.SocketDir, agent.SocketName)
	}
	if cfg.Home == "" {
		cfg.Home = "/home/user"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Env == nil {
		cfg.Env = defaultEnv(cfg.Home)
	}
	s := &Server{cfg: cfg, log: cfg.Logger, started: time.Now(), procs: newProcTable(), detached: &detachedTable{}, added: &addedEnv{}, keys: &keyBox{key: cfg.Key}, pruneStale: new(atomic.Bool), released: make(chan struct{}, 1), trim: newIdleTrim(idleTrimAfter, idleTrimMin)}
	s.bash = "/bin/bash"
	if cfg.Bash != "" {
		s.bash = cfg.Bash
	}
	if _, err := os.Stat(s.bash); err != nil {
		s.bash = ""
	}
	if gs, err := unix.Getgroups(); err == nil {
		for _, g := range gs {
			s.groups = append(s.groups, uint32(g))
		}
	}
	s.kernels = kernels.New(kernels.Config{
		Home:   cfg.Home,
		Env:    cfg.Env,
		Python: cfg.Python,
		Node:   cfg.Node,
		Bash:   cfg.Bash,
		Shell:  s.exec,
		User:   s.kernelUser,
		Logger: cfg.Logger,
	})
	return s
}

func defaultEnv(home string) []string {
	env := []string{
		"HOME=" + home,
		"USER=user",
		"LOGNAME=user",
		"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"LANG=C.UTF-8",
		"LC_ALL=C.UTF-8",
		"TERM=xterm-256color",
		"TMPDIR=/tmp",
		"SHELL=/bin/bash",
		"MPLCONFIGDIR=/tmp/.sandlot-mpl",
	}
	user := map[string]string{}
	for _, kv := range os.Environ() {
		if rest, ok := strings.CutPrefix(kv, agent.EnvPrefix); ok {
			if k, v, ok := strings.Cut(rest, "="); ok && k != "" {
				user[k] = v
			}
		} else if strings.HasPrefix(kv, "SANDLOT_") {
			env = append(env, kv)
		}
	}
	return mergeEnv(env, user)
}

// Run listens on cfg.Socket and serves until ctx ends.
func Run(ctx context.Context, cfg Config) error {
	return New(cfg).Serve(ctx)
}

// Serve listens and serves until ctx ends; it then kills the kernels.
func (s *Server) Serve(ctx context.Context) error {
	proc.StartReaper()
	_, statErr := os.Stat(s.cfg.Home)
	_ = os.MkdirAll(s.cfg.Home, 0o755)
	if u := s.cfg.User; errors.Is(statErr, fs.ErrNotExist) && s.cfg.Root && u != nil {
		_ = os.Chown(s.cfg.Home, int(u.UID), int(u.GID)) // the template user's working directory
	}
	ln, accept, err := s.listen()
	if err != nil {
		return err
	}
	if s.cfg.Listening != nil {
		s.cfg.Listening()
	}
	s.log.Info("agent listening", "address", ln.Addr().String(), "pid", os.Getpid())
	if s.cfg.Health != "" {
		go serveHealth(ctx, s.cfg.Health, s.log)
	}
	for _, lang := range s.cfg.Prestart {
		go func() {
			// A kernel runs creator-controlled code as it starts (BASH_ENV,
			// .pth files, NODE_OPTIONS, ...): not before the reserve stands.
			if !s.ready(ctx) {
				return
			}
			if err := s.kernels.Prestart(lang); err != nil {
				s.log.Warn("prestart kernel", logkey.Language, lang, logkey.Err, err)
			}
		}()
	}

	var wg sync.WaitGroup
	for {
		s.serveListener(ctx, ln, accept, &wg)
		if ctx.Err() != nil {
			break
		}
		// Released (release.go): listen again once the host lets us.
		if ln, accept, err = s.relisten(ctx); err != nil {
			break
		}
	}
	wg.Wait()
	s.kernels.Close()
	return nil
}

// listen opens the agent's listener: the unix socket, or the pod
// channel's TCP port. accept authenticates one connection and returns
// the connection to serve, or nil when it is done (an enrollment).
func (s *Server) listen() (net.Listener, func(net.Conn) (net.Conn, error), error) {
	if s.cfg.Listen != "" || s.cfg.Listener != nil {
		return s.listenPod()
	}
	abstract := strings.HasPrefix(s.cfg.Socket, "@")
	if !abstract {
		if err := os.MkdirAll(filepath.Dir(s.cfg.Socket), 0o755); err != nil {
			return nil, nil, fmt.Errorf("socket dir: %w", err)
		}
		if err := moveStale(s.cfg.Socket, s.pruneStale.Load()); err != nil {
			return nil, nil, err
		}
	}
	ln, err := net.Listen("unix", s.cfg.Socket)
	if err != nil {
		return nil, nil, fmt.Errorf("listen: %w", err)
	}
	s.pruneStale.Store(false)
	if !abstract {
		// uid 1000 inside and root outside both connect.
		if err := os.Chmod(s.cfg.Socket, 0o666); err != nil {
			ln.Close()
			return nil, nil, fmt.Errorf("chmod socket: %w", err)
		}
	}
	accept := func(c net.Conn) (net.Conn, error) {
		if key := s.key(); key != nil {
			return agent.AgentAccept(c, key)
		}
		return c, nil
	}
	return ln, accept, nil
}
