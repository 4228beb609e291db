package proc

import (
	"os"
	"os/signal"
	"syscall"
)

// A disposition of SIG_IGN survives execve, so a process started with a
// signal ignored hands it to all it starts. The Go runtime replaces most
// with its own handler (which execve resets to the default in a child),
// but leaves SIGHUP and SIGINT ignored when it finds them so (and SIGTSTP,
// SIGTTIN, SIGTTOU), and never touches the real-time signals os/signal
// refuses (32 and 34 on Linux; 33 too under cgo). User code should start
// as a fresh login shell would, with no signal ignored.

// nsig is the highest signal number on Linux.
const nsig = 64

// resetIgnored makes every signal the agent ignores one its children start
// with at the default, before the first child is forked. A signal os/signal
// can catch is taken to Go's handler and dropped there: execve resets a
// handled signal to SIG_DFL in the child, and the agent goes on meeting it
// as one it ignores (an agent started under nohup outlives a SIGHUP). Only
// one os/signal cannot catch is set to SIG_DFL itself (setDefault), which
// the agent then meets as any process does; the Go runtime uses none of
// them. The agent as PID 1 has taken every signal it can to a handler
// already (agent/pid1.DropSignals).
func resetIgnored() {
	var found []os.Signal
	for sig := 1; sig <= nsig; sig++ {
		if ignored(sig) {
			found = append(found, syscall.Signal(sig))
		}
	}
	if len(found) == 0 {
		return
	}
	// Never read: a signal is dropped when the channel's one slot is full.
	signal.Notify(make(chan os.Signal, 1), found...)
	for _, s := range found {
		if sig := int(s.(syscall.Signal)); ignored(sig) {
			setDefault(sig)
		}
	}
}
