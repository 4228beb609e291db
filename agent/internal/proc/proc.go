// Package proc starts the agent's child processes and reaps every child,
// including orphans reparented to the agent as PID 1 (or subreaper).
//
// One reaper goroutine calls wait4(-1) and hands each status to the
// Process that owns the pid. Nobody else may wait: os/exec's Wait would race
// the reaper, so children are started here with syscall.ForkExec. Start and
// the reaper hold the same mutex, so a child is registered before it can be
// reaped, and a status for an unregistered pid is an orphan's.
package proc

import (
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Process is a started child.
type Process struct {
	Pid    int
	done   chan struct{}
	status syscall.WaitStatus // set before done is closed
}

// Done is closed when the process has been reaped.
func (p *Process) Done() <-chan struct{} { return p.done }

// Status returns the wait status; valid after Done is closed.
func (p *Process) Status() syscall.WaitStatus { return p.status }

// Wait blocks until the process is reaped.
func (p *Process) Wait() syscall.WaitStatus {
	<-p.done
	return p.status
}

// Exited reports whether the process has been reaped.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// SignalGroup signals the process group led by p (children are started as
// group leaders).
// The group outlives its leader while background members live.
func (p *Process) SignalGroup(sig syscall.Signal) error {
	return syscall.Kill(-p.Pid, sig)
}

// Signal signals p only.
func (p *Process) Signal(sig syscall.Signal) error {
	if p.Exited() {
		return syscall.ESRCH
	}
	return syscall.Kill(p.Pid, sig)
}

var (
	mu       sync.Mutex // held across fork+register and across each reap pass
	children = map[int]*Process{}
	once     sync.Once
)

// Attr describes a child. Files become fds 0..len(Files)-1.
type Attr struct {
	Dir   string
	Env   []string
	Files []uintptr
	// Ctty starts the process in a session of its own whose controlling
	// terminal is Files[0] (a pty slave); it leads its process group too.
	Ctty bool
	// Cred, when set, is the child's uid, gid and groups (the agent runs
	// as root of the sandbox and starts user code as someone else); nil:
	// the agent's own.
	Cred *syscall.Credential
}

// Start forks argv[0] (an absolute path) as the leader of a new process
// group and registers it with the reaper.
func Start(argv []string, attr Attr) (*Process, error) {
	once.Do(startReaper)
	mu.Lock()
	defer mu.Unlock()
	pid, err := syscall.ForkExec(argv[0], argv, &syscall.ProcAttr{
		Dir:   attr.Dir,
		Env:   attr.Env,
		Files: attr.Files,
		Sys:   sysAttr(attr.Ctty, attr.Cred),
	})
	if err != nil {
		return nil, err
	}
	p := &Process{Pid: pid, done: make(chan struct{})}
	children[pid] = p
	return p, nil
}

// StartReaper makes the agent a child subreaper (when it is not PID 1) and
// starts reaping. Start calls it too; calling it early reaps orphans sooner.
func StartReaper() { once.Do(startReaper) }

func startReaper() {
	resetIgnored() // before any child: none inherits an ignored signal
	if os.Getpid() != 1 {
		_ = unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
	}
	sigc := make(chan os.Signal, 1)
	signal.Notify(sigc, syscall.SIGCHLD)
	go func() {
		// The ticker is a safety net for a coalesced or lost SIGCHLD.
		t := time.NewTicker(time.Second)
		for {
			reap()
			select {
			case <-sigc:
			case <-t.C:
			}
		}
	}()
}

func reap() {
	mu.Lock()
	defer mu.Unlock()
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if err == syscall.EINTR {
			continue
		}
		if err != nil || pid <= 0 {
			return
		}
		if p, ok := children[pid]; ok {
			delete(children, pid)
			p.status = ws
			close(p.done)
		}
		// Otherwise an orphan: reaping it was the point.
	}
}

func sysAttr(ctty bool, cred *syscall.Credential) *syscall.SysProcAttr {
	if ctty {
		return &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0, Credential: cred}
	}
	return &syscall.SysProcAttr{Setpgid: true, Credential: cred}
}
