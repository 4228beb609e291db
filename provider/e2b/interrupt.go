package e2b

import (
	"context"
	"time"

	"github.com/sandlot/sandlot/internal/logkey"
)

// A timed-out run must not hold its kernel: a local sandbox interrupts the
// cell (SIGINT) and restarts the kernel when it does not answer, before
// the call returns, so the next call on that kernel runs at once. E2B's
// wire has no interrupt call. Its code interpreter interrupts a cell whose
// client hung up, but only once it notices, at its next keepalive write
// (every 5 s), and an interrupt does not stop a cell that ignores it; a
// call sent meanwhile waits behind the cell. So after the hang-up the
// provider sends a probe cell and waits for it within recoverWait: if it
// runs, the kernel is free (and kept its state); if not, the provider
// restarts the code context (POST /contexts/{id}/restart), and when even
// that fails it forgets the context, so the next call makes a new one
// rather than queue behind the old.
var (
	recoverWait = 8 * time.Second
	restartWait = 5 * time.Second
)

// probeCode is a cell that does nothing, in each code interpreter language.
func probeCode(lang string) string {
	switch lang {
	case "python":
		return "pass"
	case "bash":
		return ":"
	case "r":
		return "invisible(NULL)"
	}
	return "0" // js, ts, java: an expression whose value is dropped
}

// recoverKernel frees k after a timed-out run and reports whether its state
// is gone (the kernel restarted). before is k's execution count before
// that run: a probe whose count is no higher than before+1 ran in a kernel
// that started over under the run (the server restarted it), whose
// variables are gone as surely as after a restart of ours.
func (s *Sandbox) recoverKernel(ctx context.Context, lang string, k *kernel, before int) (restarted bool) {
	ctx = context.WithoutCancel(ctx) // bounded below; the caller's call has ended
	pctx, cancel := context.WithTimeout(ctx, recoverWait)
	run, err := s.execute(pctx, k.id, probeCode(lang), nil, 0, nil)
	cancel()
	if err == nil && run.ended {
		s.mu.Lock()
		defer s.mu.Unlock()
		if run.count > 0 && run.count <= before+1 {
			k.count, k.probes = run.count, 1
			return true
		}
		if run.count > 0 {
			k.count = run.count
		}
		k.probes++
		return false
	}
	rctx, cancel := context.WithTimeout(ctx, restartWait)
	defer cancel()
	if err := s.restart(rctx, k); err != nil {
		s.p.log.Warn("e2b: could not restart a timed-out kernel; its next run gets a new code context",
			logkey.Sandbox, s.id, logkey.Err, err)
		s.mu.Lock()
		if s.kernels[k.key] == k {
			delete(s.kernels, k.key)
		}
		s.mu.Unlock()
	}
	return true
}
