package contexts

import (
	"testing"
	"time"
)

func TestDemandRate(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	burst := func(n int, every time.Duration) []time.Time {
		var ts []time.Time
		for i := range n {
			ts = append(ts, t0.Add(time.Duration(i)*every))
		}
		return ts
	}
	for _, tc := range []struct {
		name string
		at   []time.Time
		now  time.Time
		want float64
	}{
		{"none", nil, t0, 0},
		{"one", burst(1, 0), t0, 0},
		{"a pair a moment apart reads over a second", burst(2, 10*time.Millisecond), t0.Add(10 * time.Millisecond), 1},
		{"a burst of 11 in 200 ms", burst(11, 20*time.Millisecond), t0.Add(200 * time.Millisecond), 10},
		{"the same burst 5 s on", burst(11, 20*time.Millisecond), t0.Add(5 * time.Second), 2},
		{"past the window", burst(11, 20*time.Millisecond), t0.Add(poolWindow + time.Second), 0},
		{"the ring keeps the newest 32", burst(40, 10*time.Millisecond), t0.Add(390 * time.Millisecond), 31},
		{"steady one a second", burst(10, time.Second), t0.Add(9 * time.Second), 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var d demand
			for _, at := range tc.at {
				d.add(at)
			}
			if got := d.rate(tc.now); got < tc.want-0.01 || got > tc.want+0.01 {
				t.Fatalf("rate = %.3f, want %.3f", got, tc.want)
			}
			if len(tc.at) > 0 && !d.newest().Equal(tc.at[len(tc.at)-1]) {
				t.Fatalf("newest = %v, want %v", d.newest(), tc.at[len(tc.at)-1])
			}
		})
	}
}

func TestPoolTarget(t *testing.T) {
	const mib = 1 << 20
	for _, tc := range []struct {
		name                     string
		size                     int
		rate                     float64
		budget, held, perSandbox int64
		want, limit              int
	}{
		{"idle: its size", 2, 0, 256 * mib, 0, 16 * mib, 2, 16},
		{"a slow trickle: its size", 2, 0.5, 256 * mib, 0, 16 * mib, 2, 16},
		{"a burst: a second of demand", 2, 9.2, 256 * mib, 0, 16 * mib, 10, 16},
		{"a flood: the budget", 2, 100, 256 * mib, 0, 16 * mib, 16, 16},
		{"other pools hold part of the budget", 2, 100, 256 * mib, 160 * mib, 16 * mib, 6, 6},
		{"the budget is spent: its size", 2, 100, 256 * mib, 320 * mib, 16 * mib, 2, -4},
		{"large sandboxes (a desktop): fewer", 1, 100, 256 * mib, 0, 128 * mib, 2, 2},
		{"no budget: its size", 2, 100, -1, 0, 16 * mib, 2, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			limit := poolLimit(tc.budget, tc.held, tc.perSandbox)
			if limit != tc.limit {
				t.Fatalf("poolLimit = %d, want %d", limit, tc.limit)
			}
			if got := poolTarget(tc.size, tc.rate, limit); got != tc.want {
				t.Fatalf("poolTarget = %d, want %d", got, tc.want)
			}
		})
	}
}
