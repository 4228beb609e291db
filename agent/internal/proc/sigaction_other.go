//go:build !(amd64 || arm64)

package proc

import (
	"os/signal"
	"syscall"
)

// ignored sees only what os/signal records: SIGHUP and SIGINT found
// ignored at start. The kernel's struct sigaction differs by architecture,
// and the agent ships for amd64 and arm64 only (sigaction.go); elsewhere
// the other signals found ignored stay so for children too.
func ignored(sig int) bool { return sig < 32 && signal.Ignored(syscall.Signal(sig)) }

// setDefault does nothing: see ignored.
func setDefault(int) {}
