package oci

import (
	"context"
	"errors"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// The readiness pipe (runtime.Spec.Ready): crun and runc hand a new
// sandbox's init the write end of a pipe as descriptor 4 (after the key on
// 3), and the init closes it once it listens on its channel. DialWait
// sleeps on the read end instead of trying to connect every few hundred
// µs: the tries took about 1.5 ms of the host's CPU per start on a loaded
// machine, beside the booting sandbox. The pipe only says when to try: a
// connect that follows an early close (anything else in the sandbox cannot
// hold the descriptor: the init is its first process, and marks it
// close-on-exec before it starts any) is checked like any other, and a
// refused one goes back to polling. runsc is not given one: a descriptor
// it passes in (--pass-fd) is a host file of its sentry, and whether the
// init's close releases it there was not tried; its dial keeps polling.

// readyFD is the descriptor the init gets the readiness pipe on.
const readyFD = 4

// readyWait bounds one wait on the pipe: between waits DialWait tries a
// connect, so an init that never closes its end is still reached.
const readyWait = 100 * time.Millisecond

// ReadyFD is the descriptor on which this runtime hands a sandbox created
// with Spec.Ready its readiness pipe, or -1 if it does not (runsc).
func (r *Runtime) ReadyFD() int {
	if r.kind == KindRunsc {
		return -1
	}
	return readyFD
}

// takeReady returns sandbox id's readiness pipe (its read end), nil if it
// has none; the caller closes it.
func (r *Runtime) takeReady(id string) *os.File {
	v, ok := r.ready.LoadAndDelete(id)
	if !ok {
		return nil
	}
	return v.(*os.File)
}

// dropReady closes sandbox id's readiness pipe if nobody took it.
func (r *Runtime) dropReady(id string) {
	if f := r.takeReady(id); f != nil {
		f.Close()
	}
}

// waitReady waits, for at most readyWait and never past ctx, until the
// init closes or writes to its end of the readiness pipe (ready is then
// true) or the init exits (pidfd readable).
func waitReady(ctx context.Context, pipe *os.File, pidfd int) (ready bool) {
	wait := readyWait
	if dl, ok := ctx.Deadline(); ok {
		wait = min(wait, time.Until(dl))
	}
	if wait <= 0 {
		return false
	}
	fds := []unix.PollFd{
		{Fd: int32(pipe.Fd()), Events: unix.POLLIN},
		{Fd: int32(pidfd), Events: unix.POLLIN},
	}
	n, err := unix.Poll(fds, int(wait.Milliseconds())+1)
	if err != nil || n == 0 {
		if err != nil && !errors.Is(err, unix.EINTR) {
			return true // cannot wait on it: polling takes over
		}
		return false
	}
	return fds[0].Revents != 0
}
