package agent

// How a call waits for its reply. On a connection with a descriptor of
// its own (rawio), the calls read the connection themselves: a call that
// finds no one reading takes the reading (rd), reads and routes frames
// until its own reply has come, and hands the reading on. Elsewhere (a
// sealed session, an in-memory pipe) a read loop reads, as before.
//
// Why: a reply a read loop routes wakes the caller's goroutine, and the
// Go scheduler wakes a second thread for it whenever a P is idle, as it
// is between the calls of a warm round trip. Measured with the agent's
// benchmarks on a 2-core VM: 3.0-3.7 host context switches per ping
// through the read loop, against 1.6 when the runtime had one P, and a
// warm python call 25 % faster that way. A caller that reads its own
// reply wakes no one: it was already waiting in the netpoller.
//
// With no call waiting, no one reads. A watch (watchHangup) waits, in
// the netpoller, for the agent to hang up, so Done still closes when the
// agent goes away between calls; it does not wake for frames. A frame
// the agent writes while no call waits (a late reply of a call whose
// caller gave up, its last output) is read by the next call.

import (
	"context"
	"errors"
	"net"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandlot/sandlot/agent/internal/rawio"
)

// startReading starts the read side: the hang-up watch when the calls
// read the connection themselves, else the read loop.
func (c *Client) startReading() {
	if _, ok := c.rw.(*rawio.Conn); ok {
		if ep, err := hangupWatch(c.conn); err == nil {
			c.rd = make(chan struct{}, 1)
			c.hup = ep
			go c.watchHangup(ep)
			return
		}
	}
	go c.readLoop()
}

// await waits for cl's reply; got is false when ctx ended first. Where
// the calls read the connection, a call that finds no one reading reads
// until its own reply has come.
func (c *Client) await(ctx context.Context, cl *call) (r *reply, got bool) {
	done := ctx.Done()
	if c.rd == nil {
		if done == nil { // context.Background and friends: one plain receive
			return <-cl.resp, true
		}
		select {
		case r = <-cl.resp:
			return r, true
		case <-done:
			return nil, false
		}
	}
	select {
	case r = <-cl.resp:
		return r, true
	case c.rd <- struct{}{}:
		r, got = c.readFor(ctx, cl)
		<-c.rd // the next waiting call, or the watch, reads on
		return r, got
	case <-done:
		return nil, false
	}
}

// readFor reads and routes frames until cl's reply has come or ctx ends.
// Precondition: rd is held.
func (c *Client) readFor(ctx context.Context, cl *call) (*reply, bool) {
	if ctx.Done() != nil {
		// A read waits in the netpoller; the end of ctx cuts it short
		// with a deadline in the past.
		stop := context.AfterFunc(ctx, func() { _ = c.conn.SetReadDeadline(time.Unix(1, 0)) })
		defer stop()
	}
	for {
		select {
		case r := <-cl.resp:
			return r, true
		default:
		}
		if ctx.Err() != nil {
			return nil, false
		}
		more, interrupted := c.readOne()
		switch {
		case interrupted:
			// ctx's deadline, or that of a call that read before this
			// one and gave up: cleared, and ctx checked again.
			_ = c.conn.SetReadDeadline(time.Time{})
		case !more:
			// The connection is shut down: every pending call, cl
			// among them, has its nil reply (or its answer, read first).
			return <-cl.resp, true
		}
	}
}

// hangupWatch returns an epoll instance, registered with the netpoller,
// that becomes readable when conn's peer hangs up (EPOLLRDHUP; EPOLLHUP
// and EPOLLERR always count), and not for data.
func hangupWatch(conn net.Conn) (*os.File, error) {
	sc, ok := conn.(syscall.Conn)
	if !ok {
		return nil, errors.New("no descriptor")
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil, err
	}
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, err
	}
	var cerr error
	if err := rc.Control(func(fd uintptr) {
		cerr = unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, int(fd), &unix.EpollEvent{Events: unix.EPOLLRDHUP})
	}); err != nil || cerr != nil {
		_ = unix.Close(epfd)
		return nil, errors.Join(err, cerr)
	}
	if err := unix.SetNonblock(epfd, true); err != nil {
		_ = unix.Close(epfd)
		return nil, err
	}
	return os.NewFile(uintptr(epfd), "agent-hangup"), nil
}

// watchHangup waits for the agent to hang up, then reads what it wrote
// before that (routing it to the calls still waiting) and the end, which
// shuts the connection down. It returns at once when the Client is
// closed (shutdown closes ep).
func (c *Client) watchHangup(ep *os.File) {
	rc, err := ep.SyscallConn()
	if err != nil {
		return
	}
	var evs [1]unix.EpollEvent
	err = rc.Read(func(fd uintptr) bool {
		n, err := unix.EpollWait(int(fd), evs[:], 0)
		return n > 0 || (err != nil && err != unix.EINTR)
	})
	if err != nil {
		return // closed: the Client is shut down
	}
	select {
	case c.rd <- struct{}{}:
	case <-c.done:
		return
	}
	defer func() { <-c.rd }()
	for {
		more, interrupted := c.readOne()
		if !more {
			return
		}
		if interrupted { // a call's deadline, set before it gave up
			_ = c.conn.SetReadDeadline(time.Time{})
		}
	}
}
