package guard

import (
	"sync"
	"sync/atomic"
	"time"
)

// DefaultModelBudget is the entity model's time per second across the
// process when Config.ModelBudget is zero: a quarter of a 2-core host.
// The model reads about 30 KB per CPU-second (docs/guard.md, "Speed"), so
// without a bound a sandbox printing names would hold the daemon's CPU.
const DefaultModelBudget = 500 * time.Millisecond

// modelBudget bounds the model's time in each second (a fixed window on
// the clock): past it, windows go to the rules alone (the patterns and the
// entity rules run on every byte regardless), and skipped counts them.
type modelBudget struct {
	per time.Duration // < 0: no bound
	now func() time.Time

	mu    sync.Mutex
	start time.Time
	used  time.Duration

	skipped atomic.Int64
}

func newModelBudget(per time.Duration) *modelBudget {
	if per == 0 {
		per = DefaultModelBudget
	}
	return &modelBudget{per: per, now: time.Now}
}

// take says whether the model may judge one more window now, and when it
// started.
func (b *modelBudget) take() (time.Time, bool) {
	now := b.now()
	if b.per < 0 {
		return now, true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if d := now.Sub(b.start); d >= time.Second || d < 0 {
		b.start, b.used = now, 0
	}
	if b.used >= b.per {
		b.skipped.Add(1)
		return now, false
	}
	return now, true
}

// spend counts the time since start against the current second.
func (b *modelBudget) spend(start time.Time) {
	if b.per < 0 {
		return
	}
	d := max(b.now().Sub(start), 0)
	b.mu.Lock()
	b.used += d
	b.mu.Unlock()
}

// ModelSkipped is how many windows the entity rules judged alone because
// the model's budget for that second was spent (sandlot.guard.model.skipped).
func (g *Guard) ModelSkipped() int64 { return g.budget.skipped.Load() }
