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

// takePendingLocked removes call id from the pending calls.
func (c *Client) takePendingLocked(id uint64) (*call, bool) {
	cl, ok := c.pending[id]
	if ok {
		delete(c.pending, id)
		if cl.out != nil && c.rd != nil {
			c.streaming--
		}
	}
	return cl, ok
}

// abandonLocked moves pending call id to the abandoned ones, whose frames
// are dropped when they come; false when it was no longer pending. A
// background reader reads them (needReaderLocked): the agent may still
// write a reply and the last output, which nobody would read before the
// next call, and the agent counts a host that stops reading for a minute
// as gone.
func (c *Client) abandonLocked(id uint64) bool {
	if _, ok := c.takePendingLocked(id); !ok {
		return false
	}
	c.abandoned[id] = struct{}{}
	c.needReaderLocked()
	return true
}

// readerWantedLocked reports whether a background reader is to read: a
// call that streams output is pending (its callback runs in the reader,
// as it did in the read loop, and never in another call's goroutine), a
// call was abandoned, or the hang-up watch has ended (the agent hung up:
// the reader reads to the end; or the watch failed).
func (c *Client) readerWantedLocked() bool {
	return !c.closed && (c.streaming > 0 || len(c.abandoned) > 0 || c.unwatched)
}

// needReaderLocked starts a background reader when one is wanted and none
// runs, and cuts short the read of the call that reads now, which then
// hands the reading over. It returns the running reader's signals (nil
// when none runs).
func (c *Client) needReaderLocked() (held, gone chan struct{}) {
	if c.rd == nil || !c.readerWantedLocked() {
		return nil, nil
	}
	if !c.bgOn {
		c.bgOn = true
		c.bgHeld, c.bgGone = make(chan struct{}), make(chan struct{})
		go c.readBehind(c.bgHeld, c.bgGone)
		_ = c.conn.SetReadDeadline(time.Unix(1, 0))
	}
	return c.bgHeld, c.bgGone
}

// readBehind is the background reader: it takes the reading and reads
// while readerWantedLocked holds, which only a frame it reads (the reply
// of the last streaming or abandoned call) or the connection's end can
// change.
func (c *Client) readBehind(held, gone chan struct{}) {
	// stopLocked ends this reader; the check that it is no longer
	// wanted and the end are one step under mu, so a call that wants a
	// reader after it starts another.
	stopLocked := func() {
		c.bgOn = false
		close(gone)
	}
	select {
	case c.rd <- struct{}{}:
	case <-c.done:
		c.mu.Lock()
		stopLocked()
		c.mu.Unlock()
		return
	}
	close(held)
	_ = c.conn.SetReadDeadline(time.Time{}) // the cut meant for the call that read
	for {
		c.mu.Lock()
		if !c.readerWantedLocked() {
			stopLocked()
			c.mu.Unlock()
			<-c.rd
			return
		}
		c.mu.Unlock()
		more, interrupted := c.readOne()
		switch {
		case !more:
			c.mu.Lock()
			stopLocked()
			c.mu.Unlock()
			<-c.rd
			return
		case interrupted: // a deadline set for a call that read before
			_ = c.conn.SetReadDeadline(time.Time{})
		}
	}
}

// await waits for cl's reply; got is false when ctx ended first. Where
// the calls read the connection, a call that finds no one reading reads
// until its own reply has come, unless a background reader reads.
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
	for {
		c.mu.Lock()
		on, gone := c.bgOn, c.bgGone
		c.mu.Unlock()
		if on {
			select {
			case r = <-cl.resp:
				return r, true
			case <-gone:
				continue
			case <-done:
				return nil, false
			}
		}
		select {
		case r = <-cl.resp:
			return r, true
		case c.rd <- struct{}{}:
			r, got, yielded := c.readFor(ctx, cl)
			if yielded {
				continue
			}
			return r, got
		case <-done:
			return nil, false
		}
	}
}

// readFor reads and routes frames until cl's reply has come or ctx ends,
// or yields the reading to a background reader that started. It is
// called holding rd, and releases it.
func (c *Client) readFor(ctx context.Context, cl *call) (r *reply, got, yielded bool) {
	defer func() { <-c.rd }() // the next waiting call, or a background reader, reads on
	if ctx.Done() != nil {
		// A read waits in the netpoller; the end of ctx cuts it short
		// with a deadline in the past.
		stop := context.AfterFunc(ctx, func() { _ = c.conn.SetReadDeadline(time.Unix(1, 0)) })
		defer stop()
	}
	for {
		select {
		case r := <-cl.resp:
			return r, true, false
		default:
		}
		if ctx.Err() != nil {
			return nil, false, false
		}
		c.mu.Lock()
		on := c.bgOn
		c.mu.Unlock()
		if on {
			return nil, false, true
		}
		more, interrupted := c.readOne()
		switch {
		case interrupted:
			// ctx's deadline, a background reader's start, or the
			// deadline of a call that read before this one and gave
			// up: cleared, and all three checked again.
			_ = c.conn.SetReadDeadline(time.Time{})
		case !more:
			// The connection is shut down: every pending call, cl
			// among them, has its nil reply (or its answer, read first).
			return <-cl.resp, true, false
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

// watchHangup waits for the agent to hang up; then the background reader
// reads what the agent wrote before that (routing it to the calls still
// waiting) and the end, which shuts the connection down. Should the
// watch itself fail, that reader reads from then on, as the read loop
// did. It returns at once when the Client is closed (shutdown closes ep).
func (c *Client) watchHangup(ep *os.File) {
	var evs [1]unix.EpollEvent
	rc, err := ep.SyscallConn()
	if err == nil {
		err = rc.Read(func(fd uintptr) bool {
			n, err := unix.EpollWait(int(fd), evs[:], 0)
			return n > 0 || (err != nil && err != unix.EINTR)
		})
	}
	c.mu.Lock()
	c.unwatched = true
	c.needReaderLocked()
	c.mu.Unlock()
}
