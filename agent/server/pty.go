package server

import (
	"fmt"
	"os"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/errdefs"
)

// stdio is an exec's standard streams: the child's ends (passed as fds 0,
// 1, 2) and the parent's (stdin writer, stdout and stderr readers). With a
// terminal, the child's three are the terminal's slave and the parent's
// are its master, read as one stream (errR nil).
type stdio struct {
	child           []uintptr
	childFiles      []*os.File
	inW, outR, errR *os.File
}

func (s *stdio) closeChild() {
	for _, f := range s.childFiles {
		f.Close()
	}
	s.childFiles = nil
}

func (s *stdio) closeParent() {
	for _, f := range []*os.File{s.inW, s.outR, s.errR} {
		if f != nil {
			f.Close()
		}
	}
}

// openStdio makes the pipes of an exec, or a terminal of size when one is
// asked for.
// cred, when set, is the process's owner, who gets the terminal.
func openStdio(size *agent.PtySize, cred *syscall.Credential) (*stdio, error) {
	if size != nil {
		return openPty(size, cred)
	}
	s := &stdio{}
	var files [6]*os.File
	for i := 0; i < 3; i++ {
		r, w, err := os.Pipe()
		if err != nil {
			for _, f := range files[:2*i] {
				f.Close()
			}
			return nil, errf(errdefs.CodeResourceExhausted, "exec: pipe: %v", err)
		}
		files[2*i], files[2*i+1] = r, w
	}
	s.childFiles = []*os.File{files[0], files[3], files[5]}
	s.inW, s.outR, s.errR = files[1], files[2], files[4]
	for _, f := range s.childFiles {
		s.child = append(s.child, f.Fd())
	}
	return s, nil
}

// openPty opens a terminal pair on the sandbox's devpts: the master from
// /dev/ptmx, unlocked, and its slave by number.
func openPty(size *agent.PtySize, cred *syscall.Credential) (*stdio, error) {
	if size.Cols == 0 || size.Rows == 0 {
		return nil, errf(errdefs.CodeInvalidArgument, "exec: pty size %dx%d: cols and rows must be positive", size.Cols, size.Rows)
	}
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, errf(errdefs.CodeResourceExhausted, "exec: open pty: %v", err)
	}
	n, err := ptyUnlock(master)
	if err != nil {
		master.Close()
		return nil, errf(errdefs.CodeInternal, "exec: pty: %v", err)
	}
	slave, err := os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		master.Close()
		return nil, errf(errdefs.CodeInternal, "exec: open pty slave: %v", err)
	}
	if cred != nil {
		// The terminal belongs to whoever opened it, the agent: give it
		// to the process's user, as login does.
		if err := slave.Chown(int(cred.Uid), int(cred.Gid)); err != nil {
			master.Close()
			slave.Close()
			return nil, errf(errdefs.CodeInternal, "exec: pty owner: %v", err)
		}
	}
	if err := setWinsize(master, size.Cols, size.Rows); err != nil {
		master.Close()
		slave.Close()
		return nil, errf(errdefs.CodeInternal, "exec: pty size: %v", err)
	}
	fd := slave.Fd()
	return &stdio{child: []uintptr{fd, fd, fd}, childFiles: []*os.File{slave}, inW: master, outR: master}, nil
}

func ptyUnlock(master *os.File) (int, error) {
	var n int
	var ierr error
	rc, err := master.SyscallConn()
	if err != nil {
		return 0, err
	}
	err = rc.Control(func(fd uintptr) {
		if ierr = unix.IoctlSetPointerInt(int(fd), unix.TIOCSPTLCK, 0); ierr != nil {
			return
		}
		n, ierr = unix.IoctlGetInt(int(fd), unix.TIOCGPTN)
	})
	if err != nil {
		return 0, err
	}
	return n, ierr
}

func setWinsize(master *os.File, cols, rows uint16) error {
	rc, err := master.SyscallConn()
	if err != nil {
		return err
	}
	var ierr error
	err = rc.Control(func(fd uintptr) {
		ierr = unix.IoctlSetWinsize(int(fd), unix.TIOCSWINSZ, &unix.Winsize{Col: cols, Row: rows})
	})
	if err != nil {
		return err
	}
	return ierr
}

// resize sets the terminal size of process pid (SIGWINCH with a size):
// the kernel signals the terminal's foreground group.
func (s *Server) resize(p agent.SignalParams) error {
	r := s.procs.get(p.PID)
	if r == nil {
		return errf(errdefs.CodeNotFound, "no running process %d", p.PID)
	}
	if !r.pty {
		return errf(errdefs.CodeFailedPrecondition, "process %d has no terminal to resize", p.PID)
	}
	if p.Cols == 0 || p.Rows == 0 {
		return errf(errdefs.CodeInvalidArgument, "resize %d: cols and rows must be positive", p.PID)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stdin == nil {
		return errf(errdefs.CodeFailedPrecondition, "process %d: terminal closed", p.PID)
	}
	if err := setWinsize(r.stdin, p.Cols, p.Rows); err != nil {
		return errf(errdefs.CodeInternal, "resize %d: %v", p.PID, fmt.Errorf("%w", err))
	}
	return nil
}
