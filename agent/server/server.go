// Package server is the in-sandbox side of the agent protocol: it listens on
// a unix socket, serves concurrent connections and calls, runs processes
// (exec), kernels (package kernels) and file operations, and reaps every
// child as PID 1.
package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/agent/internal/proc"
	"github.com/sandlot/sandlot/agent/kernels"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/internal/logkey"
)

// Config configures the agent. Zero values are documented per field.
type Config struct {
	// Socket is the unix socket to listen on: a path, or "@name" for an
	// abstract name (the sandbox's own network namespace holds it). "":
	// /run/sandlot/agent.sock.
	Socket string
	// Listen, when set, is a TCP address ("host:port") to serve on
	// instead of Socket: the pod channel (agent/channel.go), TLS 1.3 with
	// a certificate made at start and the bound handshake with the keys
	// in Pod, which must be set. Key is not used then.
	Listen string
	// Pod holds a pod agent's keys (with Listen or Listener).
	Pod *agent.PodKeys
	// Listener, when set, is the TCP listener of the pod channel, already
	// listening (tests); Listen is then ignored.
	Listener net.Listener
	// Key, when set, is the sandbox's secret: every connection must pass
	// the handshake (agent.AgentHandshake) before anything is served, so
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
	// rather than on first use (warm pools). nil: none.
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
	// Listening, when set, is called once the socket listens (the agent
	// starts its thread reserve then: off the path to listening).
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
	s := &Server{cfg: cfg, log: cfg.Logger, started: time.Now(), procs: newProcTable(), detached: &detachedTable{}, added: &addedEnv{}, released: make(chan struct{}, 1)}
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
		if err := os.Remove(s.cfg.Socket); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, nil, fmt.Errorf("remove stale socket: %w", err)
		}
	}
	ln, err := net.Listen("unix", s.cfg.Socket)
	if err != nil {
		return nil, nil, fmt.Errorf("listen: %w", err)
	}
	if !abstract {
		// uid 1000 inside and root outside both connect.
		if err := os.Chmod(s.cfg.Socket, 0o666); err != nil {
			ln.Close()
			return nil, nil, fmt.Errorf("chmod socket: %w", err)
		}
	}
	accept := func(c net.Conn) (net.Conn, error) {
		if s.cfg.Key != nil {
			if err := agent.AgentHandshake(c, s.cfg.Key); err != nil {
				return nil, err
			}
		}
		return c, nil
	}
	return ln, accept, nil
}

// conn is one host connection.
type conn struct {
	s      *Server
	c      net.Conn
	cancel context.CancelFunc // ends the connection and its calls
	wmu    sync.Mutex         // serializes frame writes

	mu      sync.Mutex
	running map[uint64]context.CancelCauseFunc // calls in flight, for "cancel"

	spare  chan *lineReader // hands the stream to a parked spare reader
	spares atomic.Int32     // spare readers parked
}

func (s *Server) serveConn(ctx context.Context, nc net.Conn) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	c := &conn{s: s, c: nc, cancel: cancel, running: map[uint64]context.CancelCauseFunc{}, spare: make(chan *lineReader)}
	var wg sync.WaitGroup
	wg.Add(1)
	go c.readLoop(ctx, newLineReader(nc, agent.MaxFrame), &wg)
	<-ctx.Done() // the agent stops, or the host hung up (readLoop cancels)
	nc.Close()
	wg.Wait()
}

// readLoop reads requests. To keep a thread handoff off the hot path, a
// request that needs its own goroutine is handled by the goroutine that read
// it, after it hands the rest of the stream to another reader: a parked
// spare (a goroutine that finished an earlier request) when there is one,
// else a new goroutine. Reusing goroutines matters: a fresh one starts with
// a tiny stack and grew it by copying on every request (~20% of the agent's
// CPU on the warm round trip).
func (c *conn) readLoop(ctx context.Context, fr *lineReader, wg *sync.WaitGroup) {
	defer wg.Done()
	for {
		id, req, ok := c.nextCall(fr)
		if !ok {
			return
		}
		select {
		case c.spare <- fr: // a parked spare reads on
		default:
			wg.Add(1)
			go c.readLoop(ctx, fr, wg)
		}
		if !c.s.ready(ctx) {
			return
		}
		c.serve(ctx, id, req)
		// Park as a spare reader, unless enough are parked already.
		if c.spares.Add(1) > maxSpares {
			c.spares.Add(-1)
			return
		}
		select {
		case fr = <-c.spare:
			c.spares.Add(-1)
		case <-ctx.Done():
			c.spares.Add(-1)
			return
		}
	}
}

// maxSpares bounds the goroutines parked per connection after a burst of
// concurrent calls.
const maxSpares = 4

// nextCall reads frames, answering notifications and pings inline, until
// a call that needs its own goroutine arrives. ok is false when the stream
// ended (the connection is then canceled).
func (c *conn) nextCall(fr *lineReader) (id uint64, req *agent.Request, ok bool) {
	for {
		line, err := fr.next()
		if err != nil {
			if errors.Is(err, errTooLarge) {
				c.writeError(nil, agent.CodeInvalidRequest, "frame too large", errdefs.CodeInvalidArgument)
			}
			c.cancel() // a dropped connection stops its calls
			return 0, nil, false
		}
		if len(line) == 0 {
			continue
		}
		var r agent.Request
		if err := json.Unmarshal(line, &r); err != nil {
			c.writeError(nil, agent.CodeParseError, "parse error: "+err.Error(), errdefs.CodeInvalidArgument)
			continue
		}
		if r.ID == nil {
			c.notification(&r)
			continue
		}
		if r.Method == agent.MethodPing {
			// Inline: the cheapest possible health check.
			c.reply(*r.ID, agent.PingResult{Version: agent.Version, UptimeMs: time.Since(c.s.started).Milliseconds(), PID: os.Getpid()}, nil)
			continue
		}
		return *r.ID, &r, true
	}
}

// ready waits for Config.Ready; false when ctx ended first.
func (s *Server) ready(ctx context.Context) bool {
	if s.cfg.Ready == nil {
		return true
	}
	select {
	case <-s.cfg.Ready:
		return true
	case <-ctx.Done():
		return false
	}
}

// serve runs one call and writes its response.
func (c *conn) serve(ctx context.Context, id uint64, req *agent.Request) {
	// The cause tells a detached exec a cancel (which kills it) from its
	// connection dropping (which it survives).
	cctx, ccancel := context.WithCancelCause(ctx)
	c.mu.Lock()
	c.running[id] = ccancel
	c.mu.Unlock()
	res, err := c.handle(cctx, id, req)
	c.mu.Lock()
	delete(c.running, id)
	c.mu.Unlock()
	ccancel(nil)
	c.reply(id, res, err)
	if err == nil && isRelease(req) {
		c.s.release()
	}
}

func (c *conn) notification(req *agent.Request) {
	if req.Method != agent.MethodCancel {
		return
	}
	var p agent.CancelParams
	if json.Unmarshal(req.Params, &p) != nil {
		return
	}
	c.mu.Lock()
	cancel := c.running[p.Ref]
	c.mu.Unlock()
	if cancel != nil {
		cancel(errCallCancelled)
	}
}

func decode[T any](raw json.RawMessage) (T, error) {
	var v T
	if len(raw) == 0 {
		return v, nil
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		return v, badParams(err)
	}
	return v, nil
}

func (c *conn) handle(ctx context.Context, id uint64, req *agent.Request) (any, error) {
	s := c.s
	switch req.Method {
	case agent.MethodRunCode:
		p, err := decode[agent.RunCodeParams](req.Params)
		if err != nil {
			return nil, err
		}
		r, err := s.kernels.Run(ctx, p, c.emitter(id))
		if err != nil {
			var ke *kernels.Error
			if errors.As(err, &ke) {
				return nil, errf(ke.Category, "%s", ke.Msg)
			}
			return nil, err
		}
		fitRunCode(r)
		return r, nil
	case agent.MethodRelease:
		if s.cfg.Listen != "" || s.cfg.Listener != nil {
			// The pod channel is a TCP port of the pod's: nothing to
			// release, and a listener handed in could not be reopened.
			return nil, errf(errdefs.CodeFailedPrecondition, "channel.release: a pod agent's channel is not released")
		}
		return agent.Empty{}, nil
	case agent.MethodSetEnv:
		p, err := decode[agent.SetEnvParams](req.Params)
		if err != nil {
			return nil, err
		}
		if err := s.setEnv(p.Env); err != nil {
			return nil, err
		}
		return agent.Empty{}, nil
	case agent.MethodKernelRestart:
		p, err := decode[agent.KernelParams](req.Params)
		if err != nil {
			return nil, err
		}
		if err := s.kernels.Restart(p); err != nil {
			var ke *kernels.Error
			if errors.As(err, &ke) {
				return nil, errf(ke.Category, "%s", ke.Msg)
			}
			return nil, err
		}
		return agent.Empty{}, nil
	case agent.MethodExec:
		p, err := decode[agent.ExecParams](req.Params)
		if err != nil {
			return nil, err
		}
		r, err := s.exec(ctx, p, c.emitter(id))
		if err != nil {
			return nil, err
		}
		fitExec(r)
		return r, nil
	case agent.MethodAttach:
		p, err := decode[agent.AttachParams](req.Params)
		if err != nil {
			return nil, err
		}
		return s.attach(ctx, p, c.emitter(id))
	case agent.MethodSignal:
		p, err := decode[agent.SignalParams](req.Params)
		if err != nil {
			return nil, err
		}
		return agent.Empty{}, s.signal(p)
	case agent.MethodStdin:
		p, err := decode[agent.StdinParams](req.Params)
		if err != nil {
			return nil, err
		}
		return agent.Empty{}, s.stdin(ctx, p)
	case agent.MethodProcesses:
		return agent.ProcessList{Processes: s.procs.list()}, nil
	case agent.MethodReadFile:
		return callAs(s, req.Params, (*Server).readFile)
	case agent.MethodWriteFile:
		return callAs(s, req.Params, (*Server).writeFile)
	case agent.MethodEditFile:
		return callAs(s, req.Params, (*Server).editFile)
	case agent.MethodList:
		return callAs(s, req.Params, (*Server).list)
	case agent.MethodStat:
		return callAs(s, req.Params, (*Server).stat)
	case agent.MethodMkdir:
		return callAs(s, req.Params, (*Server).mkdir)
	case agent.MethodRemove:
		return callAs(s, req.Params, (*Server).remove)
	case agent.MethodMove:
		return callAs(s, req.Params, (*Server).move)
	case agent.MethodGlob:
		return callAs(s, req.Params, (*Server).glob)
	case agent.MethodGrep:
		return callAs(s, req.Params, (*Server).grep)
	}
	return nil, &appError{code: agent.CodeMethodNotFound, category: errdefs.CodeInvalidArgument, msg: "unknown method " + strconv.Quote(req.Method)}
}

// callAs runs a file call as the user its params name: with that user's
// file system credentials, and relative paths resolved against their home.
func callAs[P, R any](s *Server, raw json.RawMessage, f func(*Server, P) (R, error)) (any, error) {
	p, err := decode[P](raw)
	if err != nil {
		return nil, err
	}
	who, err := decode[struct {
		User string `json:"user"`
	}](raw)
	if err != nil {
		return nil, err
	}
	a, err := s.account(who.User)
	if err != nil {
		return nil, err
	}
	view := s
	if a.home != s.cfg.Home || a.sudo {
		v := *s
		v.cfg.Home = a.home
		if a.sudo {
			// As root, giving what the call creates to the user.
			v.owner = &fileOwner{uid: int(a.uid), gid: int(a.gid)}
			a = &account{name: a.name, home: a.home}
		}
		view = &v
	}
	var r R
	if err := s.asAccount(a, func() (err error) { r, err = f(view, p); return err }); err != nil {
		return nil, err
	}
	return r, nil
}

// emitter returns the output callback of call id.
func (c *conn) emitter(id uint64) func(agent.OutputEvent) {
	return func(ev agent.OutputEvent) {
		ev.Ref = id
		b, err := json.Marshal(ev)
		if err != nil {
			return
		}
		frame := make([]byte, 0, len(b)+48)
		frame = append(frame, `{"jsonrpc":"2.0","method":"output","params":`...)
		frame = append(frame, b...)
		frame = append(frame, "}\n"...)
		if len(frame) > agent.MaxFrame {
			return // never send what the host must reject
		}
		c.write(frame)
	}
}

func (c *conn) reply(id uint64, res any, err error) {
	if err != nil {
		var ae *appError
		if !errors.As(err, &ae) {
			ae = &appError{code: agent.CodeAppError, category: categoryOf(err), msg: err.Error()}
		}
		c.writeError(&id, ae.code, ae.msg, ae.category)
		return
	}
	b, merr := json.Marshal(res)
	if merr != nil {
		c.writeError(&id, agent.CodeInternalError, "encode result: "+merr.Error(), errdefs.CodeInternal)
		return
	}
	frame := make([]byte, 0, len(b)+48)
	frame = append(frame, `{"jsonrpc":"2.0","id":`...)
	frame = strconv.AppendUint(frame, id, 10)
	frame = append(frame, `,"result":`...)
	frame = append(frame, b...)
	frame = append(frame, "}\n"...)
	if len(frame) > agent.MaxFrame {
		c.writeError(&id, agent.CodeAppError, "result too large for one frame", errdefs.CodeResourceExhausted)
		return
	}
	c.write(frame)
}

func (c *conn) writeError(id *uint64, code int, msg string, category errdefs.Code) {
	if len(msg) > 8192 {
		msg = msg[:8192]
	}
	resp := agent.Response{JSONRPC: "2.0", ID: id, Error: &agent.RPCError{Code: code, Message: msg}}
	if category != "" {
		resp.Error.Data = &agent.ErrorData{Category: category}
	}
	b, err := json.Marshal(resp)
	if err != nil {
		return
	}
	c.write(append(b, '\n'))
}

// write sends one frame. A host that stops reading for a minute is gone.
func (c *conn) write(frame []byte) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_ = c.c.SetWriteDeadline(time.Now().Add(time.Minute))
	if _, err := c.c.Write(frame); err != nil {
		c.c.Close()
	}
}
