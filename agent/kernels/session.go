package kernels

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/agent/internal/outbuf"
	"github.com/sandlot/sandlot/agent/internal/proc"
)

// session is one running kernel process and the agent's ends of its pipes:
// ctrl (fd 3 in the child) carries commands, res (fd 4) carries results,
// out and err are the child's fd 1 and 2. The read ends are non-blocking
// and are only touched by the goroutine running a call (under kernel.mu),
// which polls them directly: no goroutine per pipe, no channel hop on the
// hot path.
type session struct {
	// ep is an epoll instance over out, err and res, registered with Go's
	// netpoller: a run waits for its kernel without holding an OS thread
	// in a blocking syscall (which costs a thread handoff per wakeup).
	ep   *os.File
	rc   syscall.RawConn
	epfd int
	p    *proc.Process
	ctrl int // write end, non-blocking; owned by ctrlF
	// ctrlF holds ctrl in Go's netpoller: send writes with raw system
	// calls and, when the pipe is full, waits there (see raw.go).
	ctrlF  *os.File
	ctrlRC syscall.RawConn
	out    int // read ends, non-blocking
	err    int
	res    int
	resBuf []byte
	rbuf   []byte // read buffer of wait, reused across runs (runs are serialized)
	dead   bool
	gen    int64 // Manager.lateGen when it started
}

// setNonblock is unix.SetNonblock, replaced by a test that makes it fail.
var setNonblock = unix.SetNonblock

// epollNow is rawEpollNow, replaced by a test that hides a ready pipe
// from a wakeup, as epoll does when the pipe is written after it was
// checked.
var epollNow = rawEpollNow

// startSession forks argv with fresh pipes on fds 1..4 and, on 0,
// /dev/null, or a sealed memfd holding stdin when it is set (the java
// kernel's program: its launcher reads a file it can seek, and one the
// sandbox's code cannot rewrite under it). cred, when set, is the
// kernel's uid, gid and groups.
func startSession(argv, env []string, dir string, cred *syscall.Credential, stdin []byte) (*session, error) {
	var fds [4][2]int // ctrl, out, err, res: [read, write]
	var opened []int
	closeAll := func() {
		for _, fd := range opened {
			_ = unix.Close(fd)
		}
	}
	for i := range fds {
		if err := unix.Pipe2(fds[i][:], unix.O_CLOEXEC); err != nil {
			closeAll()
			return nil, fmt.Errorf("pipe: %w", err)
		}
		opened = append(opened, fds[i][0], fds[i][1])
	}
	var null int
	var err error
	if stdin != nil {
		null, err = sealedFile(stdin)
	} else {
		null, err = unix.Open("/dev/null", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	}
	if err != nil {
		closeAll()
		return nil, fmt.Errorf("kernel stdin: %w", err)
	}
	opened = append(opened, null)
	if cred != nil {
		// The r and java drivers open their command and result pipes by
		// name (/dev/fd/3 and 4: neither language can adopt an inherited
		// descriptor), which checks the pipe's owner: it must be the
		// kernel's user, not the agent.
		for _, fd := range []int{fds[0][0], fds[3][1]} {
			if err := unix.Fchown(fd, int(cred.Uid), int(cred.Gid)); err != nil {
				closeAll()
				return nil, fmt.Errorf("kernel pipes: %w", err)
			}
		}
	}
	// Larger pipes mean fewer wakeups under output floods; best effort.
	for _, fd := range []int{fds[1][0], fds[2][0]} {
		_, _ = unix.FcntlInt(uintptr(fd), unix.F_SETPIPE_SZ, 1<<20)
	}
	p, err := proc.Start(argv, proc.Attr{
		Dir:   dir,
		Env:   env,
		Files: []uintptr{uintptr(null), uintptr(fds[1][1]), uintptr(fds[2][1]), uintptr(fds[0][0]), uintptr(fds[3][1])},
		Cred:  cred,
	})
	// The child holds its ends now (or failed to start).
	for _, fd := range []int{null, fds[1][1], fds[2][1], fds[0][0], fds[3][1]} {
		_ = unix.Close(fd)
	}
	if err != nil {
		for _, fd := range []int{fds[0][1], fds[1][0], fds[2][0], fds[3][0]} {
			_ = unix.Close(fd)
		}
		return nil, fmt.Errorf("start %s: %w", argv[0], err)
	}
	s := &session{p: p, ctrl: fds[0][1], out: fds[1][0], err: fds[2][0], res: fds[3][0]}
	// The raw reads and writes (raw.go) are safe on non-blocking
	// descriptors only: a blocking pipe would hang the agent's read, or
	// park its thread, with its P, in a write to a kernel that stopped
	// reading.
	for _, fd := range []int{s.ctrl, s.out, s.err, s.res} {
		if err := setNonblock(fd, true); err != nil {
			s.kill()
			return nil, fmt.Errorf("start %s: pipe: %w", argv[0], err)
		}
	}
	if err := s.initCtrl(); err != nil {
		s.kill()
		return nil, err
	}
	if err := s.initEpoll(); err != nil {
		s.kill()
		return nil, err
	}
	return s, nil
}

// initCtrl hands the (non-blocking) command pipe to Go's netpoller.
// Its I/O goes through ctrlRC, whose raw calls need the descriptor non-blocking.
func (s *session) initCtrl() error {
	s.ctrlF = os.NewFile(uintptr(s.ctrl), "kernel-ctrl")
	rc, err := s.ctrlF.SyscallConn()
	if err != nil {
		return fmt.Errorf("command pipe: %w", err)
	}
	s.ctrlRC = rc
	return nil
}

// sealedFile returns a read-only fd of a memfd holding b, sealed against
// writes, growing and shrinking.
func sealedFile(b []byte) (int, error) {
	fd, err := unix.MemfdCreate("kernel", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return -1, err
	}
	defer unix.Close(fd)
	for off := 0; off < len(b); {
		n, err := unix.Write(fd, b[off:])
		if err != nil {
			return -1, err
		}
		off += n
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_WRITE|unix.F_SEAL_GROW|unix.F_SEAL_SHRINK|unix.F_SEAL_SEAL); err != nil {
		return -1, err
	}
	// A read-only descriptor of its own: the child cannot write through it.
	return unix.Open(fmt.Sprintf("/proc/self/fd/%d", fd), unix.O_RDONLY|unix.O_CLOEXEC, 0)
}

func (s *session) initEpoll() error {
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return fmt.Errorf("epoll: %w", err)
	}
	for _, fd := range []int{s.out, s.err, s.res} {
		if err := unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, fd, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(fd)}); err != nil {
			_ = unix.Close(epfd)
			return fmt.Errorf("epoll add: %w", err)
		}
	}
	if err := setNonblock(epfd, true); err != nil {
		_ = unix.Close(epfd)
		return fmt.Errorf("epoll: %w", err)
	}
	s.epfd = epfd
	s.ep = os.NewFile(uintptr(epfd), "kernel-epoll")
	rc, err := s.ep.SyscallConn()
	if err != nil {
		return fmt.Errorf("epoll conn: %w", err)
	}
	s.rc = rc
	return nil
}

// pollWait waits up to timeout for any of fds (a subset of out, err, res;
// negative ones ignored) to be readable and sets their Revents.
func (s *session) pollWait(fds []unix.PollFd, timeout time.Duration) (int, error) {
	for i := range fds {
		fds[i].Revents = 0
	}
	var evs [3]unix.EpollEvent
	n := 0
	var werr error
	_ = s.ep.SetReadDeadline(time.Now().Add(timeout))
	err := s.rc.Read(func(uintptr) bool {
		k, err := epollNow(s.epfd, evs[:])
		if err != nil && err != unix.EINTR {
			werr = err
			return true
		}
		for _, ev := range evs[:max(k, 0)] {
			for i := range fds {
				if fds[i].Fd == ev.Fd {
					fds[i].Revents = int16(ev.Events)
					n++
				}
			}
		}
		return k > 0
	})
	if werr != nil {
		return 0, werr
	}
	if err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
		return 0, err
	}
	return n, nil
}

// unwatch stops watching fd (at EOF: a hung-up pipe would always be ready).
func (s *session) unwatch(fd int32) {
	_ = unix.EpollCtl(s.epfd, unix.EPOLL_CTL_DEL, int(fd), nil)
}

// kill ends the process group and releases the pipes. It waits briefly for
// the reaper so that a restarted kernel does not overlap the old one.
func (s *session) kill() {
	if s.dead { // its descriptors are closed: their numbers may be another's now
		return
	}
	_ = s.p.SignalGroup(syscall.SIGKILL)
	select {
	case <-s.p.Done():
	case <-time.After(2 * time.Second):
	}
	if s.ctrlF != nil {
		_ = s.ctrlF.Close() // it owns ctrl
	} else {
		_ = unix.Close(s.ctrl)
	}
	for _, fd := range []int{s.out, s.err, s.res} {
		_ = unix.Close(fd)
	}
	if s.ep != nil {
		_ = s.ep.Close()
	}
	s.dead = true
}

// discard drops output left over from earlier runs (background writers,
// timers) so it is not attributed to the next run. One poll(2) answers the
// common case (nothing left) without a read per pipe.
func (s *session) discard() {
	fds := []unix.PollFd{{Fd: int32(s.out), Events: unix.POLLIN}, {Fd: int32(s.err), Events: unix.POLLIN}, {Fd: int32(s.res), Events: unix.POLLIN}}
	if n, err := rawPollNow(fds); n <= 0 || err != nil {
		return
	}
	buf := s.buf()
	for i, fd := range []int{s.out, s.err, s.res} {
		if fds[i].Revents == 0 {
			continue
		}
		for j := 0; j < 64; j++ {
			n, err := rawRead(fd, buf[:])
			if n <= 0 || err != nil {
				break
			}
		}
	}
	s.resBuf = s.resBuf[:0]
}

// buf is the session's read buffer, made once: runs are serialized, and a
// fresh 32-64 KiB buffer per run (on the stack, it grew the handler
// goroutine's stack by copying on every request) measured as a fifth of
// the agent's CPU on the warm round trip.
func (s *session) buf() []byte {
	if s.rbuf == nil {
		s.rbuf = make([]byte, 64<<10)
	}
	return s.rbuf
}

// send writes one command. A dead reader shows up as EPIPE. The writes
// are raw (raw.go): a command fits the pipe's buffer unless it is larger
// or the kernel is still reading an earlier one, and then send waits in
// the netpoller, not in a system call, until the kernel reads. A kernel
// that stopped reading holds send as the blocking write did (its caller
// holds the kernel's lock), until a restart's SIGKILL to the kernel's
// group closes the read end (EPIPE).
func (s *session) send(b []byte) error {
	var werr error
	err := s.ctrlRC.Write(func(fd uintptr) bool {
		for len(b) > 0 {
			n, e := rawWrite(int(fd), b)
			switch e {
			case nil:
				b = b[n:]
			case unix.EINTR:
			case unix.EAGAIN:
				return false
			default:
				werr = e
				return true
			}
		}
		return true
	})
	if werr != nil {
		return werr
	}
	return err
}

// tag writes an interrupt's tag to the command pipe, whole or not at all
// (it is below PIPE_BUF, so the write is atomic); it never waits: a full
// pipe (a kernel that stopped reading) leaves the interrupt untagged, which
// the driver takes only while the cell's code runs.
func (s *session) tag(b []byte) {
	_ = s.ctrlRC.Write(func(fd uintptr) bool {
		for {
			if _, e := rawWrite(int(fd), b); e != unix.EINTR {
				return true
			}
		}
	})
}

// driverResult is the result line of the python and node drivers.
type driverResult struct {
	ID       *int64             `json:"id"`
	Results  []agent.RichResult `json:"results"`
	Error    *agent.ExecError   `json:"error"`
	ExitCode int                `json:"exitCode"` // bash
}

// outcome of waiting for one run.
type outcome struct {
	res         *driverResult // nil when the kernel died or was killed
	timedOut    bool
	canceled    bool
	interrupted bool // an interrupt was sent
	killed      bool
	exit        syscall.WaitStatus
}

// waitSpec tells wait how to treat a run.
type waitSpec struct {
	id        int64
	deadline  time.Time
	grace     time.Duration  // after the interrupt, before the kill
	interrupt syscall.Signal // 0: kill at the deadline
	tag       bool           // the interrupt is tagged in the command pipe (interruptTag)
	// started: the kernel writes startedLine(id) on its result pipe as the
	// cell's code starts (R), and drops an interrupt that came sooner; the
	// interrupt waits for that line (the grace runs from the deadline).
	started bool
	cancel  <-chan struct{}
	stdout  *outbuf.Buffer
	stderr  *outbuf.Buffer
	emit    func(stream, data string) // may be nil
}

const maxResultLine = 2 * agent.MaxFrame

// wait polls the session's pipes until the result of spec.id arrives, the
// kernel dies, or the deadline (plus grace) passes. Output read before the
// result is collected (and streamed); after the result line the pipes are
// drained without blocking, which is complete because the driver writes
// all output before its result.
func (s *session) wait(spec waitSpec) outcome {
	var o outcome
	fds := []unix.PollFd{
		{Fd: int32(s.res), Events: unix.POLLIN},
		{Fd: int32(s.out), Events: unix.POLLIN},
		{Fd: int32(s.err), Events: unix.POLLIN},
	}
	buf := s.buf()
	var killAt time.Time
	began := !spec.started // the cell said it started: it may be interrupted
	held := false          // an interrupt is due and waits for began
	var startedAt *bool
	if spec.started {
		startedAt = &began
	}
	for {
		timeout := 100 * time.Millisecond
		now := time.Now()
		if !o.interrupted && !spec.deadline.IsZero() {
			if d := spec.deadline.Sub(now); d < timeout {
				timeout = max(d, 0)
			}
		}
		if !killAt.IsZero() {
			if d := killAt.Sub(now); d < timeout {
				timeout = max(d, 0)
			}
		}
		n, err := s.pollWait(fds, timeout)
		if err != nil {
			o.killed = true
			s.kill()
			return o
		}
		if n > 0 {
			// Output first: it was written before any result in the same wakeup.
			s.readOutput(&fds[1], buf, spec.stdout, spec.emit, agent.Stdout)
			s.readOutput(&fds[2], buf, spec.stderr, spec.emit, agent.Stderr)
			if fds[0].Revents != 0 {
				r, eof, bad := s.readResult(buf, spec.id, startedAt)
				if r != nil {
					// Drained always: the wakeup's view is no snapshot.
					// epoll checks its pipes one after another, so it can
					// find stdout empty and then the result the kernel
					// wrote after its output, and this run's output would
					// be left for the next run's discard (a success with
					// no stdout, about once in 400,000 warm calls). The
					// driver writes its output before its result, so one
					// poll now finds all of it.
					s.drain(buf, spec)
					o.res = r
					return o
				}
				if eof || bad {
					s.unwatch(fds[0].Fd)
					fds[0].Fd = -1
				}
			}
		}
		if fds[0].Fd < 0 || s.p.Exited() {
			// Kernel gone (exit in user code, crash, closed fd 4).
			s.drain(buf, spec)
			o.killed = true
			s.kill()
			o.exit = s.p.Status()
			return o
		}
		now = time.Now()
		select {
		case <-spec.cancel:
			if !o.canceled {
				o.canceled = true
				spec.deadline = now // interrupt now
			}
		default:
		}
		if !o.interrupted && !spec.deadline.IsZero() && !now.Before(spec.deadline) {
			o.timedOut = !o.canceled
			o.interrupted = true
			if spec.interrupt == 0 {
				s.drain(buf, spec)
				o.killed = true
				s.kill()
				return o
			}
			held = true
			killAt = now.Add(spec.grace)
		}
		if held && began {
			held = false
			if spec.tag {
				s.tag(interruptTag(spec.id))
			}
			_ = s.p.SignalGroup(spec.interrupt)
		}
		if !killAt.IsZero() && !now.Before(killAt) {
			s.drain(buf, spec)
			o.killed = true
			s.kill()
			return o
		}
	}
}

func (s *session) readOutput(pfd *unix.PollFd, buf []byte, ob *outbuf.Buffer, emit func(string, string), stream string) {
	if pfd.Revents == 0 || pfd.Fd < 0 {
		return
	}
	n, err := rawRead(int(pfd.Fd), buf)
	if n > 0 {
		kept := ob.Write(buf[:n])
		if emit != nil && kept != "" {
			emit(stream, kept)
		}
		return
	}
	if err == unix.EAGAIN || err == unix.EINTR {
		return
	}
	s.unwatch(pfd.Fd)
	pfd.Fd = -1 // EOF or error: stop polling it (a negative fd is ignored)
}

// drain reads what is left in the output pipes without blocking.
func (s *session) drain(buf []byte, spec waitSpec) {
	fds := []unix.PollFd{{Fd: int32(s.out), Events: unix.POLLIN}, {Fd: int32(s.err), Events: unix.POLLIN}}
	if n, err := rawPollNow(fds); n == 0 && err == nil {
		s.flush(spec)
		return
	}
	for _, x := range []struct {
		fd     int
		ob     *outbuf.Buffer
		stream string
	}{{s.out, spec.stdout, agent.Stdout}, {s.err, spec.stderr, agent.Stderr}} {
		for i := 0; i < 1024; i++ { // bounded: a writer that keeps writing cannot hold us
			n, _ := rawRead(x.fd, buf)
			if n <= 0 {
				break
			}
			kept := x.ob.Write(buf[:n])
			if spec.emit != nil && kept != "" {
				spec.emit(x.stream, kept)
			}
		}
		if tail := x.ob.Flush(); tail != "" && spec.emit != nil {
			spec.emit(x.stream, tail)
		}
	}
}

func (s *session) flush(spec waitSpec) {
	if tail := spec.stdout.Flush(); tail != "" && spec.emit != nil {
		spec.emit(agent.Stdout, tail)
	}
	if tail := spec.stderr.Flush(); tail != "" && spec.emit != nil {
		spec.emit(agent.Stderr, tail)
	}
}

// readResult reads from the result pipe and returns the result for id when
// a complete line for it has arrived. Lines for other ids (late results of
// abandoned runs) are skipped. eof reports a closed pipe; bad an oversized
// line.
func (s *session) readResult(buf []byte, id int64, started *bool) (r *driverResult, eof, bad bool) {
	for {
		n, err := rawRead(s.res, buf)
		if n > 0 {
			s.resBuf = append(s.resBuf, buf[:n]...)
		}
		if n == 0 && err == nil {
			eof = true
			break
		}
		if err != nil {
			if err != unix.EAGAIN && err != unix.EINTR {
				eof = true
			}
			break
		}
	}
	for {
		i := bytes.IndexByte(s.resBuf, '\n')
		if i < 0 {
			break
		}
		line := s.resBuf[:i+1]
		if started != nil && bytes.Equal(line, startedLine(id)) {
			*started = true
			s.resBuf = s.resBuf[i+1:]
			continue
		}
		line = line[:i]
		var dr driverResult
		var jerr error
		if !decodePlainResult(line, &dr) {
			jerr = json.Unmarshal(line, &dr)
		}
		s.resBuf = s.resBuf[i+1:]
		if jerr == nil && dr.ID != nil && *dr.ID == id {
			if len(s.resBuf) == 0 {
				s.resBuf = nil
			}
			return &dr, false, false
		}
	}
	if len(s.resBuf) > maxResultLine {
		return nil, eof, true
	}
	return nil, eof, false
}
