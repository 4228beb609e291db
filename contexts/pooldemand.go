package contexts

import (
	"math"
	"time"
)

// A warm pool of fixed size drains in a burst of creates: each one takes a
// warm sandbox at the speed of a call, and the pool makes them back one at
// a time at the speed of a cold create. So a pool grows ahead of demand:
// it holds as many warm sandboxes as were taken in about the last second,
// within a memory budget, and falls back to its size once acquisitions
// stop for poolIdle.

const (
	// poolRecent is how many acquisition times a pool keeps.
	poolRecent = 32
	// poolSpan is the shortest span the rate is measured over, so a pair
	// of creates a moment apart does not read as a flood.
	poolSpan = time.Second
	// poolHorizon is how much demand a grown pool holds: the acquisitions
	// expected over this long at the recent rate.
	poolHorizon = time.Second
	// poolWindow is how far back an acquisition counts toward the rate.
	poolWindow = 30 * time.Second
	// poolIdle is how long a grown pool keeps its extra sandboxes after
	// the last acquisition; then it trims back to its size.
	poolIdle = 30 * time.Second
	// poolFillers is how many warm sandboxes a grown pool makes at once
	// (a pool at its size makes one at a time: the machine is small).
	poolFillers = 2
	// poolRefillDelay is how long after a take the refill waits while the
	// pool still holds a warm sandbox (poolKickAfter).
	poolRefillDelay = 25 * time.Millisecond
	// poolWaitFirst bounds a create's wait for a sandbox being made before
	// the pool has made one (poolWaitBound).
	poolWaitFirst = 5 * time.Second
)

// poolWaitBound is how long a create waits for a warm sandbox being made
// when none is ready: twice what a creation took lately (fillTime), then
// it makes its own; 0: none has been made yet, poolWaitFirst.
func poolWaitBound(fillTime time.Duration) time.Duration {
	if fillTime <= 0 {
		return poolWaitFirst
	}
	return 2 * fillTime
}

// movingAverage folds d into avg (0: none yet), weighing the past 3 to 1.
func movingAverage(avg, d time.Duration) time.Duration {
	if avg <= 0 {
		return d
	}
	return (3*avg + d) / 4
}

// demand is the recent acquisitions (takes and misses) of one pool.
// Guarded by Manager.mu.
type demand struct {
	at   [poolRecent]time.Time // a ring, newest at (next-1)
	next int
	n    int
}

// add records an acquisition at t.
func (d *demand) add(t time.Time) {
	d.at[d.next] = t
	d.next = (d.next + 1) % poolRecent
	d.n = min(d.n+1, poolRecent)
}

// newest is the last acquisition's time (zero: none).
func (d *demand) newest() time.Time {
	if d.n == 0 {
		return time.Time{}
	}
	return d.at[(d.next+poolRecent-1)%poolRecent]
}

// rate is the acquisitions per second at now: those of the last
// poolWindow, less one, over the time from the oldest of them to now (at
// least poolSpan). It falls as time passes with no acquisition.
func (d *demand) rate(now time.Time) float64 {
	count := 0
	var oldest time.Time
	for i := 0; i < d.n; i++ {
		t := d.at[(d.next+poolRecent-1-i)%poolRecent]
		if now.Sub(t) > poolWindow {
			break
		}
		count, oldest = count+1, t
	}
	if count < 2 {
		return 0
	}
	span := max(now.Sub(oldest), poolSpan)
	return float64(count-1) / span.Seconds()
}

// poolTarget is how many warm sandboxes a pool of size keeps at rate
// (acquisitions per second): the demand of poolHorizon, never below size
// and at most limit (what the memory budget leaves it; below size: size).
func poolTarget(size int, rate float64, limit int) int {
	want := int(math.Ceil(rate * poolHorizon.Seconds()))
	return max(size, min(want, limit))
}

// poolLimit is the most warm sandboxes of perSandbox bytes one pool may
// hold: what the budget leaves once the other pools' sandboxes (held
// bytes) are counted. budget <= 0 gives no room to grow.
func poolLimit(budget, held, perSandbox int64) int {
	if budget <= 0 || perSandbox <= 0 {
		return 0
	}
	return int((budget - held) / perSandbox)
}
