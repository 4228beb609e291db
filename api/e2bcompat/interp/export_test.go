package interp

import "time"

// SetExecuteTimings sets how long /execute waits before sending its
// headers and between keepalive lines, until the returned func restores
// them.
func SetExecuteTimings(header, keepalive time.Duration) (restore func()) {
	h, k := headerDelay, interpKeepaliveEvery
	headerDelay, interpKeepaliveEvery = header, keepalive
	return func() { headerDelay, interpKeepaliveEvery = h, k }
}
