// Package pid1 is what sandlot-agent and sandlot-pod-agent do as a
// sandbox's PID 1 before they serve: a process the user code cannot
// ptrace (NotDumpable), the sandbox's key read once (ReadKey), signals
// from inside the sandbox that cannot end them (SignalContext), and a
// reserve of OS threads that a fork bomb cannot take from them.
package pid1

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// NotDumpable makes the process non-dumpable: user code runs with the
// agent's uid, and a dumpable agent could be ptraced, or its memory read
// through /proc/<pid>/mem, by it. The runtime's execute-only mount of the
// local agent does this too; a pod's agent has no such mount. Children
// regain dumpability at execve.
func NotDumpable() error {
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fmt.Errorf("prctl(PR_SET_DUMPABLE): %w", err)
	}
	return nil
}

// ThreadReserve is how many OS threads the agent starts before it serves:
// enough for its blocking system calls (the reaper's wait4, file
// operations, forks) to run concurrently without a new thread.
const ThreadReserve = 16

// ReserveThreads makes the Go runtime start n OS threads now and keep them
// idle for later use. User code shares the sandbox's pids limit with the
// agent, and a fork bomb fills it; if the agent then needed a new thread,
// the failed clone would abort the Go runtime and, the agent being PID 1,
// end the sandbox. The runtime never retires idle threads, so the reserve
// lasts for the agent's life.
func ReserveThreads(n int) {
	var started, release sync.WaitGroup
	started.Add(n)
	release.Add(1)
	for range n {
		go func() {
			runtime.LockOSThread() // each parked goroutine holds its own thread
			started.Done()
			release.Wait()
			runtime.UnlockOSThread()
		}()
	}
	started.Wait()
	release.Done()
}

// DropSignals keeps anything inside the sandbox from ending the agent with
// a signal. The kernel delivers a signal sent to PID 1 from inside its own
// namespace only when PID 1 has a handler, and the Go runtime has one for
// every signal, whose default for most is to exit (SIGTERM, SIGINT, SIGHUP)
// or crash (SIGQUIT, SIGABRT, and SIGSEGV or SIGBUS sent with kill). Taking
// them all to a channel that is never read keeps them away from those
// defaults. They are not ignored (SIG_IGN would be inherited by every
// process the agent starts); a handled signal is reset to the default in
// the child. The host ends a sandbox with SIGKILL, which reaches init from
// outside its namespace whatever its handlers.
func DropSignals() {
	var sigs []os.Signal
	for sig := syscall.Signal(1); sig < 32; sig++ {
		switch sig {
		case syscall.SIGKILL, syscall.SIGSTOP, // cannot be caught
			syscall.SIGCHLD, // the reaper's (agent/internal/proc)
			syscall.SIGURG,  // the Go runtime's preemption
			syscall.SIGPROF:
			continue
		}
		sigs = append(sigs, sig)
	}
	signal.Notify(make(chan os.Signal, 1), sigs...)
}

// SignalContext is the agent's run context: as PID 1 (a sandbox or a
// pod) it drops the signals (DropSignals) and ends only with its
// sandbox; otherwise SIGTERM and SIGINT end it. isPID1 says which.
func SignalContext(ctx context.Context) (_ context.Context, stop context.CancelFunc, isPID1 bool) {
	if os.Getpid() == 1 {
		DropSignals()
		return ctx, func() {}, true
	}
	ctx, stop = signal.NotifyContext(ctx, syscall.SIGTERM, syscall.SIGINT)
	return ctx, stop, false
}

// ReadKey reads a sandbox's key from f to its end (at most 4 KiB) and
// closes f; what names f in errors. A key has at least 16 bytes.
func ReadKey(f *os.File, what string) ([]byte, error) {
	defer f.Close()
	key, err := io.ReadAll(io.LimitReader(f, 4096))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if len(key) < 16 {
		return nil, fmt.Errorf("%s: %d bytes, want at least 16", what, len(key))
	}
	return key, nil
}
