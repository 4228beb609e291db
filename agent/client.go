package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sandlot/sandlot/agent/internal/rawio"
	"github.com/sandlot/sandlot/errdefs"
)

// ClientConfig configures a Client. The zero value is usable.
type ClientConfig struct {
	// SandboxID is returned by ID and names the sandbox in errors.
	SandboxID string
	// MaxCallOutput bounds the streamed output bytes the agent may send for
	// one call before the connection counts as hostile. 0: 64 MiB, or
	// 4×MaxOutput+16 MiB when a call asks for more than 1 MiB per stream.
	MaxCallOutput int64
	// WriteTimeout bounds one frame write; an agent that stops reading is
	// hostile. The deadline is re-armed lazily, so a stalled write fails
	// after between WriteTimeout/2 and WriteTimeout. 0: 30 s.
	WriteTimeout time.Duration
	// Key, when set, is the sandbox's secret: the connection opens with
	// the handshake (HostHandshake), and an agent that cannot prove it
	// holds Key is refused. nil: no handshake (agents started without a
	// key, in tests).
	Key []byte
	// Sealed, with Key, makes the session a sealed one (sealed.go): every
	// message is encrypted and authenticated with keys the handshake
	// derives, so nothing between the host and the agent can read or
	// forge one. For a channel the runtime cannot guarantee (a sandbox
	// whose channel was reopened by a restore); an agent before it
	// closes the connection.
	Sealed bool
	// Logger receives protocol violations. nil discards.
	Logger *slog.Logger
}

// ErrProtocol marks a protocol violation by the agent. The connection is
// closed and every pending call fails with an error wrapping both this and
// errdefs.ErrUnavailable.
var ErrProtocol = errors.New("agent protocol violation")

// ErrNotSent marks a call that failed before any byte of its request was
// written to the connection (the connection was already closed, or the
// write failed having written nothing): the agent never saw it, so the
// call had no effect in the sandbox. It comes with errdefs.ErrUnavailable.
var ErrNotSent = errors.New("request not sent")

// Client is the host side of one connection to a sandlot-agent. Calls are
// safe for concurrent use and multiplexed by id. Every frame from the agent
// is treated as hostile: any violation closes the connection.
type Client struct {
	id       string
	conn     net.Conn
	rw       io.ReadWriter // conn, or its descriptor's raw calls (rawio.ReadWriter)
	cfg      ClientConfig
	log      *slog.Logger
	nextID   atomic.Uint64
	done     chan struct{}
	closeErr error // set before done is closed

	wmu       sync.Mutex // serializes frame writes on conn
	wdeadline time.Time  // write deadline set on conn; under wmu

	// The read side (clientread.go, clientwait.go). fr is read by one
	// goroutine at a time: the read loop, or, where the calls read the
	// connection themselves, the holder of rd.
	fr  *frameReader
	rd  chan struct{} // buffered 1; nil: a read loop reads
	hup *os.File      // the hang-up watch's epoll (clientwait.go); closed by shutdown
	// Where the calls read: a background reader reads instead while a
	// call that streams output is pending, a call was abandoned, or the
	// hang-up watch ended (needReaderLocked). Under mu.
	streaming int           // pending calls with an output callback
	unwatched bool          // the hang-up watch ended (a hang-up, or its failure): a reader stays
	bgOn      bool          // a background reader runs
	bgHeld    chan struct{} // closed once it holds rd
	bgGone    chan struct{} // closed when it stops

	mu        sync.Mutex
	pending   map[uint64]*call    // calls waiting for their response
	abandoned map[uint64]struct{} // calls whose caller gave up; their frames are dropped
	closed    bool
	// lost: the read loop met the connection's end (end of stream, a
	// reset) and closed it, having read every frame the agent wrote.
	lost bool
}

type call struct {
	method string
	out    func(OutputEvent) // may be nil
	budget int64             // streamed bytes left before the agent counts as hostile
	result any               // where the result goes (a pointer), or nil
	resp   chan *reply       // buffered 1: the final response
}

// reply is a call's final response: an error, a result already decoded
// into call.result, or (a frame not in the agent's own layout) the raw
// result still to decode.
type reply struct {
	err     *RPCError
	raw     json.RawMessage
	decoded bool
	notSent bool // the connection ended before the probe ahead of it was answered (WithProbe)
}

// Dial connects to the agent socket at socketPath (a path this process
// trusts; sandboxes' channels are dialed by their runtime, see Connect).
func Dial(ctx context.Context, socketPath string, cfg ClientConfig) (*Client, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", socketPath)
	if err != nil {
		return nil, fmt.Errorf("sandbox %s: dial agent: %v: %w", cfg.SandboxID, err, errdefs.ErrUnavailable)
	}
	return Connect(ctx, conn, cfg)
}

// Connect runs the protocol over conn, after the handshake when cfg.Key is
// set (a sealed session with cfg.Sealed). The Client owns conn from now on; on error conn is closed.
func Connect(ctx context.Context, conn net.Conn, cfg ClientConfig) (*Client, error) {
	switch {
	case cfg.Sealed:
		nonceH, nonceA, err := hostProve(ctx, conn, cfg.Key, sealedProofs, nil)
		if err != nil {
			conn.Close()
			return nil, fmt.Errorf("sandbox %s: %w", cfg.SandboxID, err)
		}
		sc, err := newSealedConn(conn, cfg.Key, nonceH, nonceA, true)
		if err != nil {
			conn.Close()
			return nil, fmt.Errorf("sandbox %s: %w", cfg.SandboxID, err)
		}
		conn = sc
	case cfg.Key != nil:
		if err := HostHandshake(ctx, conn, cfg.Key); err != nil {
			conn.Close()
			return nil, fmt.Errorf("sandbox %s: %w", cfg.SandboxID, err)
		}
	}
	return NewClient(conn, cfg), nil
}

// NewClient runs the protocol over conn, which the Client owns from now on.
func NewClient(conn net.Conn, cfg ClientConfig) *Client {
	if cfg.MaxCallOutput <= 0 {
		cfg.MaxCallOutput = 64 << 20
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = 30 * time.Second
	}
	c := &Client{
		id:        cfg.SandboxID,
		conn:      conn,
		rw:        rawio.ReadWriter(conn),
		cfg:       cfg,
		log:       cfg.Logger,
		done:      make(chan struct{}),
		pending:   make(map[uint64]*call),
		abandoned: make(map[uint64]struct{}),
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	c.fr = newFrameReader(c.rw, MaxFrame)
	c.startReading()
	return c
}

// ID returns the sandbox id given in ClientConfig.
func (c *Client) ID() string { return c.id }

// Done is closed when the connection is gone.
func (c *Client) Done() <-chan struct{} { return c.done }

// Err returns why the connection is gone, or nil while it is up.
func (c *Client) Err() error {
	select {
	case <-c.done:
		return c.closeErr
	default:
		return nil
	}
}

// Close drops the connection; the agent and the sandbox keep running.
func (c *Client) Close() error {
	c.shutdown(fmt.Errorf("sandbox %s: client closed: %w", c.id, errdefs.ErrUnavailable))
	return nil
}

// shutdown closes the connection once and fails every pending call with err.
func (c *Client) shutdown(err error) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.closed = true
	c.closeErr = err
	pending := c.pending
	c.pending = nil
	c.abandoned = nil
	c.streaming = 0
	c.mu.Unlock()
	_ = c.conn.Close()
	if c.hup != nil {
		_ = c.hup.Close()
	}
	close(c.done)
	for _, cl := range pending {
		cl.resp <- nil // buffered; nil means "connection gone"
	}
}

// call sends method(params) and decodes the result into result (which may
// be nil). out receives the call's output notifications.
func (c *Client) call(ctx context.Context, method string, params, result any, out func(OutputEvent), maxOutput int64) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("sandbox %s: %s: %w", c.id, method, err)
	}
	p, err := json.Marshal(params)
	if err != nil {
		return fmt.Errorf("sandbox %s: %s: encode params: %v: %w", c.id, method, err, errdefs.ErrInvalidArgument)
	}
	id := c.nextID.Add(1)
	frame := make([]byte, 0, len(p)+len(method)+48)
	frame = append(frame, `{"jsonrpc":"2.0","id":`...)
	frame = strconv.AppendUint(frame, id, 10)
	frame = append(frame, `,"method":`...)
	frame = strconv.AppendQuote(frame, method)
	frame = append(frame, `,"params":`...)
	frame = append(frame, p...)
	frame = append(frame, "}\n"...)
	if len(frame) > MaxFrame {
		return fmt.Errorf("sandbox %s: %s: request of %d bytes exceeds the frame limit: %w", c.id, method, len(frame), errdefs.ErrInvalidArgument)
	}

	budget := c.cfg.MaxCallOutput
	if maxOutput > 1<<20 {
		budget = max(budget, 4*maxOutput+16<<20)
	}
	cl := &call{method: method, out: out, budget: budget, result: result, resp: make(chan *reply, 1)}
	var probe *call
	head := 0 // bytes of frame before the request's own
	if Probed(ctx) {
		pid := c.nextID.Add(1)
		probe = &call{method: MethodPing, resp: make(chan *reply, 1)}
		pf := make([]byte, 0, len(frame)+64)
		pf = append(pf, `{"jsonrpc":"2.0","id":`...)
		pf = strconv.AppendUint(pf, pid, 10)
		pf = append(pf, `,"method":"`+MethodPing+`","params":{}}`+"\n"...)
		head = len(pf)
		frame = append(pf, frame...)
		defer func() {
			if probe != nil { // not waited for: drop it when it comes
				c.mu.Lock()
				c.abandonLocked(pid)
				c.mu.Unlock()
			}
		}()
		c.mu.Lock()
		if !c.closed {
			c.pending[pid] = probe
		}
		c.mu.Unlock()
	}
	c.mu.Lock()
	if c.closed {
		err := c.closeErr
		c.mu.Unlock()
		return fmt.Errorf("%s: %w: %w", method, ErrNotSent, err)
	}
	c.pending[id] = cl
	var held, gone chan struct{}
	if out != nil && c.rd != nil {
		// Its output is read by a background reader, which holds the
		// reading before the request goes: a call reading for itself
		// never runs another call's callback (clientwait.go).
		c.streaming++
		held, gone = c.needReaderLocked()
	}
	c.mu.Unlock()
	if held != nil {
		select {
		case <-held:
		case <-gone: // it stopped (the connection is gone): the write fails
		}
	}

	if n, err := c.write(frame); err != nil {
		if n <= head {
			return fmt.Errorf("%s: %w: %w", method, ErrNotSent, err)
		}
		return fmt.Errorf("%s: %w", method, err)
	}

	if r, ok := c.await(ctx, cl); ok {
		return c.finish(method, c.probeVerdict(r, &probe), result)
	}
	// The caller gave up. Stop waiting; a response that still arrives is
	// dropped. Work that keeps running in the sandbox is told to stop.
	c.mu.Lock()
	if c.abandonLocked(id) {
		c.mu.Unlock()
		if method == MethodExec || method == MethodRunCode || method == MethodAttach {
			c.notify(MethodCancel, CancelParams{Ref: id})
		}
		return fmt.Errorf("sandbox %s: %s: %w", c.id, method, ctx.Err())
	}
	c.mu.Unlock()
	// The response raced the cancellation (or the connection closed).
	return c.finish(method, <-cl.resp, result)
}

// WithProbe returns a context whose calls send a ping in the same write,
// just ahead of their request. The agent answers a ping inline, before it
// reads the next frame, so when the connection is lost before the ping's
// answer came, the request was never dispatched: the call's error then
// wraps ErrNotSent, as if not one byte had left (not on a sealed session,
// whose relay could drop the answer: probeVerdict). That is the health check
// of a reuse without its round trip: the kill of a sandbox can be
// reported by its runtime while its agent's socket still takes a request
// (the socket closes a moment later, with the request unread).
func WithProbe(ctx context.Context) context.Context {
	return context.WithValue(ctx, probeKey{}, true)
}

type probeKey struct{}

// Probed reports whether ctx was made WithProbe.
func Probed(ctx context.Context) bool { v, _ := ctx.Value(probeKey{}).(bool); return v }

// ProbesInBand reports that calls made WithProbe check the agent in band:
// a caller that finds this method may skip its own ping before such a call.
func (c *Client) ProbesInBand() bool { return true }

// probeVerdict is r, the call's reply; *probe, when set, is the ping sent
// ahead of it, cleared once looked at. A connection that the read loop
// found ended (r nil) before the ping was answered marks the call
// ErrNotSent; a Close, a protocol violation or a sealed session does not.
func (c *Client) probeVerdict(r *reply, probe **call) *reply {
	p := *probe
	if p == nil {
		return r
	}
	*probe = nil
	if r != nil {
		return r // answered after the ping, in order: the ping's reply is in p.resp or was dropped
	}
	// The connection is gone: shutdown delivered to every pending call,
	// so p.resp holds the ping's answer or nil. Only a loss the read loop
	// met counts: it had read every frame the agent wrote before it, the
	// ping's answer included; a Close here may leave that answer unread.
	// On a sealed session the end of the stream may be a relay's
	// (sealed.go): it can drop the ping's answer, though the agent read
	// the request and may have run it, and close cleanly at a record's
	// boundary. Nothing there tells that from a loss, so the call is not
	// marked: it fails unavailable.
	c.mu.Lock()
	lost := c.lost && !c.cfg.Sealed
	c.mu.Unlock()
	if pr := <-p.resp; pr == nil && lost {
		return &reply{notSent: true}
	}
	return r
}

func (c *Client) finish(method string, r *reply, result any) error {
	if r == nil {
		return fmt.Errorf("%s: %w", method, c.closeErr)
	}
	if r.notSent {
		return fmt.Errorf("%s: %w: %w", method, ErrNotSent, c.closeErr)
	}
	if r.err != nil {
		return c.rpcError(method, r.err)
	}
	if result == nil || r.decoded {
		return nil
	}
	if err := json.Unmarshal(r.raw, result); err != nil {
		c.violation("bad %s result: %v", method, err)
		return fmt.Errorf("%s: %w", method, c.closeErr)
	}
	return nil
}

// rpcError maps an agent error back to its errdefs category.
func (c *Client) rpcError(method string, e *RPCError) error {
	var sentinel error
	switch {
	case e.Data != nil && e.Data.Category != "":
		sentinel = errdefs.FromCode(e.Data.Category)
	case e.Code == CodeInvalidParams || e.Code == CodeMethodNotFound || e.Code == CodeInvalidRequest:
		sentinel = errdefs.ErrInvalidArgument
	default:
		sentinel = errdefs.ErrInternal
	}
	msg := e.Message
	if len(msg) > 4096 {
		msg = msg[:4096]
	}
	err := fmt.Errorf("sandbox %s: %s: %s: %w", c.id, method, msg, sentinel)
	if errdefs.IsClientFault(err) {
		// The agent's own message was written for the caller ("working
		// directory /x does not exist", "read /x: permission denied", the
		// OS's reason last); the sandbox id and the method before it are
		// the log's. Its words are kept whole: the agent never appends a
		// category, and a reason like "permission denied" is the message's
		// point, not a category word to trim.
		err = errdefs.Public(err, msg)
	}
	return err
}

func (c *Client) notify(method string, params any) {
	p, err := json.Marshal(params)
	if err != nil {
		return
	}
	frame := make([]byte, 0, len(p)+64)
	frame = append(frame, `{"jsonrpc":"2.0","method":`...)
	frame = strconv.AppendQuote(frame, method)
	frame = append(frame, `,"params":`...)
	frame = append(frame, p...)
	frame = append(frame, "}\n"...)
	_, _ = c.write(frame)
}

// write sends one whole frame and reports how many of its bytes reached
// the connection. A failed or stalled write kills the connection.
func (c *Client) write(frame []byte) (int, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	select {
	case <-c.done:
		return 0, c.closeErr
	default:
	}
	// Re-arming the deadline costs a timer update per frame; refresh it
	// only once half of it is used up, so a write still gets at least
	// WriteTimeout/2.
	if now := time.Now(); c.wdeadline.Sub(now) < c.cfg.WriteTimeout/2 {
		c.wdeadline = now.Add(c.cfg.WriteTimeout)
		_ = c.conn.SetWriteDeadline(c.wdeadline)
	}
	n, err := c.rw.Write(frame)
	if err != nil {
		c.shutdown(fmt.Errorf("sandbox %s: write to agent: %v: %w", c.id, err, errdefs.ErrUnavailable))
		return n, c.closeErr
	}
	return n, nil
}
