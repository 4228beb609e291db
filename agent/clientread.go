package agent

// The Client's read side: whoever reads the connection (the calls
// themselves or a read loop, clientwait.go) routes each result and output
// event to the call it belongs to.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/internal/logkey"
)

// violation reports a hostile or broken agent and kills the connection.
func (c *Client) violation(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	c.log.Warn("agent protocol violation", logkey.Sandbox, c.id, logkey.Reason, msg)
	c.shutdown(fmt.Errorf("sandbox %s: %w: %s: %w", c.id, ErrProtocol, msg, errdefs.ErrUnavailable))
}

// readLoop reads and routes frames until the connection ends: the
// reader of a connection whose callers do not read it themselves
// (clientwait.go).
func (c *Client) readLoop() {
	for {
		more, interrupted := c.readOne()
		if !more {
			return
		}
		if interrupted { // a stale deadline (the handshake's): cleared, not a loss
			_ = c.conn.SetReadDeadline(time.Time{})
		}
	}
}

// readOne reads one frame and routes it to its call. more is false once
// the connection has ended (it is shut down). interrupted: a read
// deadline passed before a whole frame came; nothing was lost, and the
// next readOne goes on where this one stopped. Callers hold the reading
// (c.rd) or are the read loop.
func (c *Client) readOne() (more, interrupted bool) {
	line, err := c.fr.next()
	if err != nil {
		switch {
		case errors.Is(err, os.ErrDeadlineExceeded):
			return true, true
		case errors.Is(err, errFrameTooLarge):
			c.violation("frame larger than %d bytes", MaxFrame)
		case errors.Is(err, errSealed):
			// Not the agent's bytes (sealed.go): a violation, not a
			// loss, so no call counts as not sent.
			c.violation("%v", err)
		default:
			c.mu.Lock()
			if !c.closed { // not a read of a connection already shut down
				c.lost = true
			}
			c.mu.Unlock()
			c.shutdown(fmt.Errorf("sandbox %s: agent connection lost: %v: %w", c.id, err, errdefs.ErrUnavailable))
		}
		return false, false
	}
	if len(line) == 0 {
		return true, false
	}
	// The agent's own layouts are parsed once, straight into the
	// caller's type; anything else takes the general path.
	if id, ok := resultHead(line); ok {
		return c.dispatchResult(id, line), false
	}
	if bytes.HasPrefix(line, outputHead) {
		return c.dispatchOutput(line), false
	}
	f, err := DecodeFrame(line)
	if err != nil {
		c.violation("%v", err)
		return false, false
	}
	return c.dispatch(f), false
}

// The agent writes its successful responses and its output notifications
// with these exact heads (agent/server): frames that start so are decoded
// in one pass into their final types. The shape checks are DecodeFrame's.
var (
	respHead   = []byte(`{"jsonrpc":"2.0","id":`)
	resultKey  = []byte(`,"result":`)
	outputHead = []byte(`{"jsonrpc":"2.0","method":"` + NotifyOutput + `","params":`)
)

// resultHead returns N when line starts {"jsonrpc":"2.0","id":N,"result":
// with N a plain decimal that fits a uint64.
func resultHead(line []byte) (uint64, bool) {
	if !bytes.HasPrefix(line, respHead) {
		return 0, false
	}
	rest := line[len(respHead):]
	var id uint64
	i := 0
	for ; i < len(rest) && rest[i] >= '0' && rest[i] <= '9'; i++ {
		if i == 19 { // 20 digits may overflow: leave it to the general path
			return 0, false
		}
		id = id*10 + uint64(rest[i]-'0')
	}
	if i == 0 || !bytes.HasPrefix(rest[i:], resultKey) {
		return 0, false
	}
	return id, true
}

// discardable reports whether line, whose head resultHead read, is
// exactly {"jsonrpc":"2.0","id":N,"result":V} with N in JSON's own form (no
// leading zero) and V one valid JSON value: a response whose result may be
// dropped unread. Anything else (another key after the result, a second
// value, a bad id) takes the general decode and its checks.
func discardable(line []byte) bool {
	rest := line[len(respHead):]
	i := 0
	for i < len(rest) && rest[i] >= '0' && rest[i] <= '9' {
		i++
	}
	if i > 1 && rest[0] == '0' {
		return false
	}
	v := rest[i+len(resultKey):]
	if len(v) < 2 || v[len(v)-1] != '}' {
		return false
	}
	return json.Valid(v[:len(v)-1])
}

// resultFrame is a response decoded with its result going straight into
// the call's result.
type resultFrame struct {
	JSONRPC string    `json:"jsonrpc"`
	ID      *uint64   `json:"id"`
	Method  string    `json:"method"`
	Result  any       `json:"result"` // a pointer to the destination
	Error   *RPCError `json:"error"`
}

// dispatchResult routes a frame whose head (resultHead) says it is the
// result of call id, decoding it once. It reports false when the
// connection was closed because of it.
func (c *Client) dispatchResult(id uint64, line []byte) bool {
	c.mu.Lock()
	cl, ok := c.takePendingLocked(id)
	dropped := false
	if !ok {
		_, dropped = c.abandoned[id]
	}
	if dropped {
		delete(c.abandoned, id)
	}
	c.mu.Unlock()
	if (!ok || cl.result == nil) && discardable(line) {
		// Nothing to decode into (the ping riding ahead of a request, a
		// call without a result, a dropped call): the frame is only
		// checked, without the general decode (its reflection was the
		// daemon's largest cost per warm call after the syscalls).
		switch {
		case ok:
			cl.resp <- &reply{decoded: true}
		case !dropped:
			c.violation("response for unknown or finished call %d", id)
			return false
		}
		return true
	}
	var dst any = new(json.RawMessage) // validated, not kept
	if ok && cl.result != nil {
		dst = cl.result
		// A run_code result in the agent's own layout skips reflection
		// (runcodedecode.go); any other goes through encoding/json.
		if rc, isRC := dst.(*RunCodeResult); isRC && decodeRunCodeFrame(line, id, rc) {
			cl.resp <- &reply{decoded: true}
			return true
		}
	}
	rf := resultFrame{Result: dst}
	err := json.Unmarshal(line, &rf)
	var bad string
	switch {
	case err != nil:
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && ok {
			bad = fmt.Sprintf("bad %s result: %v", cl.method, err)
		} else {
			bad = fmt.Sprintf("bad frame: %v", err)
		}
	case rf.JSONRPC != "2.0":
		bad = fmt.Sprintf("bad frame: jsonrpc %q", rf.JSONRPC)
	case rf.ID == nil || *rf.ID != id || rf.Method != "":
		bad = "bad frame: neither a response nor a notification"
	case rf.Error != nil:
		bad = "bad frame: response needs exactly one of result and error"
	case !ok && !dropped:
		bad = fmt.Sprintf("response for unknown or finished call %d", id)
	}
	if bad != "" {
		c.violation("%s", bad)
		if ok {
			cl.resp <- nil // no longer pending: fail it here
		}
		return false
	}
	if ok {
		cl.resp <- &reply{decoded: true}
	}
	return true
}

// outputFrame is an output notification decoded in one pass.
type outputFrame struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      *uint64         `json:"id"`
	Method  string          `json:"method"`
	Params  OutputEvent     `json:"params"`
	Result  json.RawMessage `json:"result"`
	Error   *RPCError       `json:"error"`
}

// dispatchOutput routes a frame whose head says it is an output
// notification. It reports false when the connection was closed.
func (c *Client) dispatchOutput(line []byte) bool {
	var of outputFrame
	if err := json.Unmarshal(line, &of); err != nil {
		c.violation("bad frame: %v", err)
		return false
	}
	switch {
	case of.JSONRPC != "2.0":
		c.violation("bad frame: jsonrpc %q", of.JSONRPC)
		return false
	case of.ID != nil || of.Method != NotifyOutput:
		c.violation("bad frame: neither a response nor a notification")
		return false
	case len(of.Result) > 0 || of.Error != nil:
		c.violation("bad frame: notification with result or error")
		return false
	}
	return c.output(&of.Params)
}

// dispatch routes one decoded frame. It reports false when the connection
// was closed because of it.
func (c *Client) dispatch(f *Frame) bool {
	if f.Method != "" {
		if f.Method != NotifyOutput {
			return true // unknown notifications are ignored (forward compatible)
		}
		var ev OutputEvent
		if err := json.Unmarshal(f.Params, &ev); err != nil {
			c.violation("bad output params: %v", err)
			return false
		}
		return c.output(&ev)
	}
	id := *f.ID
	c.mu.Lock()
	cl, ok := c.takePendingLocked(id)
	if _, dropped := c.abandoned[id]; !ok && dropped {
		delete(c.abandoned, id)
		c.mu.Unlock()
		return true
	}
	c.mu.Unlock()
	if !ok {
		c.violation("response for unknown or finished call %d", id)
		return false
	}
	cl.resp <- &reply{err: f.Error, raw: f.Result}
	return true
}

// output routes one output notification to its call. It reports false
// when the connection was closed because of it.
func (c *Client) output(ev *OutputEvent) bool {
	n := int64(len(ev.Data))
	if ev.Result != nil {
		n += richSize(ev.Result)
	}
	c.mu.Lock()
	cl, ok := c.pending[ev.Ref]
	if !ok {
		_, dropped := c.abandoned[ev.Ref]
		c.mu.Unlock()
		if dropped {
			return true
		}
		c.violation("output for unknown or finished call %d", ev.Ref)
		return false
	}
	cl.budget -= n
	over := cl.budget < 0
	c.mu.Unlock()
	if over {
		c.violation("call %d streamed more output than allowed", ev.Ref)
		return false
	}
	if cl.out != nil {
		cl.out(*ev)
	}
	return true
}

func richSize(r *RichResult) int64 {
	return int64(len(r.Text) + len(r.HTML) + len(r.Markdown) + len(r.SVG) + len(r.PNG) +
		len(r.JPEG) + len(r.LaTeX) + len(r.JSON) + len(r.JavaScript))
}
