package ports

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// What a WebSocket server in a sandbox sends (RFC 6455) reaches the
// client as messages that passed the guard: each text or binary message
// through its own redactor (a message is judged whole, as a file is;
// a value split across two messages is judged in two pieces), re-framed
// as the redactor releases it, so the client gets the same messages with
// findings masked. Control frames keep their kind; their payload (at most
// 125 bytes) passes a binary redactor, which keeps its length. What the
// client sends goes to the sandbox as it is: it does not leave a sandbox.
//
// The route asked for no extension (guardRequest), so a frame with a
// reserved bit (a compressed message) is a protocol violation, as are a
// masked server frame, a reserved opcode, a fragmented or oversized
// control frame and a continuation outside a message: the connection is
// closed.

// wsConn is the sandbox's side of an upgraded connection: reads are the
// guarded frames, writes go to the sandbox unchanged.
type wsConn struct {
	io.ReadWriteCloser
	g *wsGuard
}

func (c *wsConn) Read(p []byte) (int, error) { return c.g.Read(p) }

func newWSGuard(rwc io.ReadWriteCloser, message func(binary bool) Redactor) *wsConn {
	return &wsConn{ReadWriteCloser: rwc, g: &wsGuard{src: bufio.NewReader(rwc), message: message}}
}

// wsPiece bounds how much of a frame's payload is read (and held) at
// once: a frame may announce up to 2^63 bytes.
const wsPiece = 32 << 10

// WebSocket opcodes.
const (
	wsContinuation = 0x0
	wsText         = 0x1
	wsBinary       = 0x2
	wsClose        = 0x8
	wsPing         = 0x9
	wsPong         = 0xa
)

var errWSProtocol = errors.New("ports: the sandbox's WebSocket broke the protocol")

// wsGuard turns the server's frames into guarded frames.
type wsGuard struct {
	src     *bufio.Reader
	message func(binary bool) Redactor
	out     []byte // guarded frames not read yet
	err     error

	// The data message in progress: its redactor (nil between messages),
	// opcode, and whether a frame of it went out yet.
	red     Redactor
	opcode  byte
	started bool
	// The frame in progress: payload bytes left, whether it ends its
	// message, and what the guard released of it so far.
	left int64
	fin  bool
	held []byte
}

func (w *wsGuard) Read(p []byte) (int, error) {
	for len(w.out) == 0 && w.err == nil {
		w.err = w.step()
	}
	if len(w.out) == 0 {
		return 0, w.err
	}
	n := copy(p, w.out)
	w.out = w.out[n:]
	return n, nil
}

// step reads one frame header, or the next piece of a data frame's
// payload, and queues what the guard releases.
func (w *wsGuard) step() error {
	if w.left > 0 {
		piece := make([]byte, min(w.left, wsPiece))
		if _, err := io.ReadFull(w.src, piece); err != nil {
			return unexpected(err)
		}
		w.left -= int64(len(piece))
		w.held = append(w.held, w.red.Write(piece)...)
		switch {
		case w.left == 0:
			w.frameEnd()
		case len(w.held) >= wsPiece:
			w.emit(w.held, false) // a long frame goes out in pieces
			w.held = nil
		}
		return nil
	}
	var h [2]byte
	if _, err := io.ReadFull(w.src, h[:]); err != nil {
		return err // io.EOF between frames: the sandbox closed
	}
	fin, rsv, opcode := h[0]&0x80 != 0, h[0]&0x70, h[0]&0x0f
	if rsv != 0 || h[1]&0x80 != 0 {
		return fmt.Errorf("%w: a reserved bit or a masked frame", errWSProtocol)
	}
	n, err := w.length(h[1] & 0x7f)
	if err != nil {
		return err
	}
	switch opcode {
	case wsClose, wsPing, wsPong:
		if !fin || n > 125 {
			return fmt.Errorf("%w: a fragmented or oversized control frame", errWSProtocol)
		}
		payload := make([]byte, n)
		if _, err := io.ReadFull(w.src, payload); err != nil {
			return unexpected(err)
		}
		w.control(opcode, payload)
		return nil
	case wsText, wsBinary:
		if w.red != nil {
			return fmt.Errorf("%w: a new message inside a fragmented one", errWSProtocol)
		}
		w.red, w.opcode, w.started = w.message(opcode == wsBinary), opcode, false
		if w.red == nil {
			w.red = passRedactor{}
		}
	case wsContinuation:
		if w.red == nil {
			return fmt.Errorf("%w: a continuation outside a message", errWSProtocol)
		}
	default:
		return fmt.Errorf("%w: reserved opcode %#x", errWSProtocol, opcode)
	}
	w.left, w.fin = n, fin
	if n == 0 {
		w.frameEnd()
	}
	return nil
}

// frameEnd sends what the guard released of the frame just read as one
// frame, with the rest of the message when the frame ended it: a message
// of frames up to wsPiece keeps its frames.
func (w *wsGuard) frameEnd() {
	out := w.held
	w.held = nil
	if w.fin {
		w.emit(append(out, w.red.Flush()...), true)
		w.red = nil
		return
	}
	w.emit(out, false)
}

// length reads a frame's payload length.
func (w *wsGuard) length(l7 byte) (int64, error) {
	switch l7 {
	case 126:
		var b [2]byte
		if _, err := io.ReadFull(w.src, b[:]); err != nil {
			return 0, unexpected(err)
		}
		return int64(binary.BigEndian.Uint16(b[:])), nil
	case 127:
		var b [8]byte
		if _, err := io.ReadFull(w.src, b[:]); err != nil {
			return 0, unexpected(err)
		}
		n := binary.BigEndian.Uint64(b[:])
		if n > 1<<62 {
			return 0, fmt.Errorf("%w: a frame of %d bytes", errWSProtocol, n)
		}
		return int64(n), nil
	}
	return int64(l7), nil
}

// emit queues data as the next frame of the message in progress; an
// empty frame only when it ends the message.
func (w *wsGuard) emit(data []byte, fin bool) {
	if len(data) == 0 && !fin {
		return
	}
	op := byte(wsContinuation)
	if !w.started {
		op = w.opcode
	}
	w.started = true
	w.out = appendFrame(w.out, op, fin, data)
}

// control queues a control frame whose payload passed the guard with its
// length kept (a close frame's status code is two binary bytes).
func (w *wsGuard) control(opcode byte, payload []byte) {
	if r := w.message(true); r != nil && len(payload) > 0 {
		out := append(r.Write(payload), r.Flush()...)
		if len(out) == len(payload) {
			payload = out
		} else {
			payload = payload[:0] // never more than was sent, never unread
		}
	}
	w.out = appendFrame(w.out, opcode, true, payload)
}

// appendFrame appends an unmasked frame (a server's) to b.
func appendFrame(b []byte, opcode byte, fin bool, payload []byte) []byte {
	h0 := opcode
	if fin {
		h0 |= 0x80
	}
	switch n := len(payload); {
	case n < 126:
		b = append(b, h0, byte(n))
	case n <= 0xffff:
		b = append(b, h0, 126)
		b = binary.BigEndian.AppendUint16(b, uint16(n))
	default:
		b = append(b, h0, 127)
		b = binary.BigEndian.AppendUint64(b, uint64(n))
	}
	return append(b, payload...)
}

func unexpected(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

type passRedactor struct{}

func (passRedactor) Write(p []byte) []byte { return p }
func (passRedactor) Flush() []byte         { return nil }
