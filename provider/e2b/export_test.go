package e2b

import "time"

// SetRecoverWaits shortens how long a timed-out run's kernel is given to
// come free and to restart; the returned func restores them.
func SetRecoverWaits(probe, restart time.Duration) func() {
	p, r := recoverWait, restartWait
	recoverWait, restartWait = probe, restart
	return func() { recoverWait, restartWait = p, r }
}
