package server

// One host connection: its read loop, the dispatch of each call to its
// handler, and the framed replies and output events written back.

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/agent/internal/rawio"
	"github.com/sandlot/sandlot/agent/kernels"
	"github.com/sandlot/sandlot/errdefs"
)

// conn is one host connection.
type conn struct {
	s      *Server
	c      net.Conn
	rw     io.ReadWriter      // c, or its descriptor's raw calls (rawio.ReadWriter)
	cancel context.CancelFunc // ends the connection and its calls
	wmu    sync.Mutex         // serializes frame writes
	// wdeadline is the write deadline set on c; under wmu.
	wdeadline time.Time

	mu      sync.Mutex
	running map[uint64]context.CancelCauseFunc // calls in flight, for "cancel"

	spare  chan *lineReader // hands the stream to a parked spare reader
	spares atomic.Int32     // spare readers parked
}

func (s *Server) serveConn(ctx context.Context, nc net.Conn) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	c := &conn{s: s, c: nc, rw: rawio.ReadWriter(nc), cancel: cancel, running: map[uint64]context.CancelCauseFunc{}, spare: make(chan *lineReader)}
	var wg sync.WaitGroup
	wg.Add(1)
	go c.readLoop(ctx, newLineReader(c.rw, agent.MaxFrame), &wg)
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
		// Known to a cancel before the next frame is read: a cancel right
		// behind its call, or one sent while the call waits for Ready, ends it.
		cctx, ccancel := c.track(ctx, id)
		select {
		case c.spare <- fr: // a parked spare reads on
		default:
			wg.Add(1)
			go c.readLoop(ctx, fr, wg)
		}
		if !c.s.isReady() {
			c.s.beforeReady()
		}
		// Checked again after the wait: when Ready and the cancel are both
		// there, the wait may return either.
		if !c.s.ready(cctx) || cctx.Err() != nil {
			c.untrack(id, ccancel)
			if ctx.Err() != nil {
				return
			}
			c.reply(id, nil, errf(errdefs.CodeUnavailable, "%s: %v before it started", req.Method, context.Cause(cctx)))
		} else {
			c.serve(cctx, ccancel, id, req)
		}
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

// writeTimeout bounds one frame write.
const writeTimeout = time.Minute

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
		if err := parseRequest(line, &r); err != nil {
			c.writeError(nil, agent.CodeParseError, "parse error: "+err.Error(), errdefs.CodeInvalidArgument)
			continue
		}
		if r.ID == nil {
			c.notification(&r)
			continue
		}
		if r.Method == agent.MethodPing {
			// Inline: the cheapest possible health check.
			var buf [96]byte
			c.write(appendPingReply(buf[:0], *r.ID, time.Since(c.s.started).Milliseconds(), agentPID))
			continue
		}
		return *r.ID, &r, true
	}
}

// isReady says whether Config.Ready is closed (or not set).
func (s *Server) isReady() bool {
	select {
	case <-s.cfg.Ready:
		return true
	default:
		return s.cfg.Ready == nil
	}
}

// beforeReady runs when a request is to wait for Config.Ready: it calls
// Config.Hold, so the agent's thread reserve is made once a request
// waits. It starts nothing: every interpreter runs code the sandbox's
// creator controls as it starts (bash's BASH_ENV, python's .pth files,
// NODE_OPTIONS, R's profiles, JAVA_TOOL_OPTIONS), which could fill the
// pids limit before the reserve stands.
func (s *Server) beforeReady() {
	if s.cfg.Hold != nil {
		s.cfg.Hold()
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

// track makes call id known to the host's "cancel", which ends the
// returned context. The cause tells a detached exec a cancel (which kills
// it) from its connection dropping (which it survives).
func (c *conn) track(ctx context.Context, id uint64) (context.Context, context.CancelCauseFunc) {
	cctx, ccancel := context.WithCancelCause(ctx)
	c.mu.Lock()
	c.running[id] = ccancel
	c.mu.Unlock()
	return cctx, ccancel
}

// untrack forgets call id, once it has ended, and releases its context.
func (c *conn) untrack(id uint64, ccancel context.CancelCauseFunc) {
	c.mu.Lock()
	delete(c.running, id)
	c.mu.Unlock()
	ccancel(nil)
}

// serve runs one call (ctx and cancel from track) and writes its response.
func (c *conn) serve(ctx context.Context, cancel context.CancelCauseFunc, id uint64, req *agent.Request) {
	c.s.trim.begin()
	defer c.s.trim.end() // after the reply
	var q *coalescer     // the call's output, for the calls that stream it
	switch req.Method {
	case agent.MethodRunCode, agent.MethodExec, agent.MethodAttach:
		q = newCoalescer(c, id)
	}
	res, err := c.handle(ctx, req, q)
	c.untrack(id, cancel)
	if q != nil {
		q.close() // its output goes before its reply
	}
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

// handle runs one call; q (set for the calls that stream output) takes
// its output events.
func (c *conn) handle(ctx context.Context, req *agent.Request, q *coalescer) (any, error) {
	s := c.s
	switch req.Method {
	case agent.MethodRunCode:
		var p agent.RunCodeParams
		if !agent.DecodeRunCodeParams(req.Params, &p) { // the host's layout, without reflection
			var err error
			if p, err = decode[agent.RunCodeParams](req.Params); err != nil {
				return nil, err
			}
		}
		r, err := s.kernels.Run(ctx, p, q.emit)
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
		p, err := decode[agent.ReleaseParams](req.Params)
		if err != nil {
			return nil, err
		}
		s.pruneStale.Store(p.Stop)
		return agent.Empty{}, nil
	case agent.MethodRekey:
		p, err := decode[agent.RekeyParams](req.Params)
		if err != nil {
			return nil, err
		}
		if err := s.rekey(c.c, p.Key); err != nil {
			return nil, err
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
		r, err := s.exec(ctx, p, q.emit)
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
		return s.attach(ctx, p, q.emit)
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

func (c *conn) reply(id uint64, res any, err error) {
	if err != nil {
		var ae *appError
		if !errors.As(err, &ae) {
			ae = &appError{code: agent.CodeAppError, category: categoryOf(err), msg: err.Error()}
		}
		c.writeError(&id, ae.code, ae.msg, ae.category)
		return
	}
	frame := make([]byte, 0, 512)
	frame = append(frame, `{"jsonrpc":"2.0","id":`...)
	frame = strconv.AppendUint(frame, id, 10)
	frame = append(frame, `,"result":`...)
	frame, merr := appendResult(frame, res)
	if merr != nil {
		c.writeError(&id, agent.CodeInternalError, "encode result: "+merr.Error(), errdefs.CodeInternal)
		return
	}
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
// The deadline is re-armed only once half of it is used up (a timer
// update per frame otherwise), so a write still gets at least 30 s.
func (c *conn) write(frame []byte) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if now := time.Now(); c.wdeadline.Sub(now) < writeTimeout/2 {
		c.wdeadline = now.Add(writeTimeout)
		_ = c.c.SetWriteDeadline(c.wdeadline)
	}
	if _, err := c.rw.Write(frame); err != nil {
		c.c.Close()
	}
}
