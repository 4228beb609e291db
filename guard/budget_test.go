package guard

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// slowModel is a model that takes step of a fake clock per window and
// counts its calls.
type slowModel struct {
	mu    sync.Mutex
	now   time.Time
	step  time.Duration
	calls int
}

func (m *slowModel) Recognize(string) []Span {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls++
	m.now = m.now.Add(m.step)
	return nil
}

func (m *slowModel) Info() ModelInfo { return ModelInfo{Name: "slow"} }

func (m *slowModel) clock() time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.now
}

// TestModelBudget: output made of names the rules cannot decide (the model
// reads about 30 KB per CPU-second) cannot make the daemon spend more than
// the model's budget per second: past it, the windows are judged by the
// rules alone, and the patterns still run. Before the budget, every one of
// the 2,000 lines went to the model, a second of CPU per 30 KB a sandbox
// printed.
func TestModelBudget(t *testing.T) {
	m := &slowModel{now: time.Unix(1e9, 0), step: 10 * time.Millisecond}
	g := newTestGuard(t, Config{Model: m, ModelBudget: 200 * time.Millisecond})
	g.budget.now = m.clock
	var b strings.Builder
	for i := 0; i < 2000; i++ {
		fmt.Fprintf(&b, "line %d: Brennan Quigley and Sorcha Tuohy\n", i)
	}
	b.WriteString("mail ops.abc@exemplar.ie\n")
	got := g.Text(context.Background(), "t", b.String())
	// The fake clock moves only with the model: within its one second the
	// budget allows 200 ms / 10 ms = 20 windows (one more may start before
	// the last one's time is counted).
	if m.calls > 21 {
		t.Fatalf("the model judged %d windows in one second of a 200 ms budget", m.calls)
	}
	if m.calls == 0 {
		t.Fatal("the model was never asked")
	}
	if strings.Contains(got, "ops.abc@exemplar.ie") {
		t.Fatal("past the budget the patterns did not run")
	}
	if g.ModelSkipped() == 0 {
		t.Fatal("ModelSkipped counted nothing")
	}
	// A new second, a new budget.
	m.mu.Lock()
	m.now = m.now.Add(2 * time.Second)
	before := m.calls
	m.mu.Unlock()
	g.Text(context.Background(), "t", "Brennan Quigley and Sorcha Tuohy\n")
	if m.calls == before {
		t.Fatal("the budget did not renew")
	}
}

// TestModelBudgetOff: a negative budget leaves the model unbounded.
func TestModelBudgetOff(t *testing.T) {
	m := &slowModel{now: time.Unix(1e9, 0), step: 10 * time.Millisecond}
	g := newTestGuard(t, Config{Model: m, ModelBudget: -1})
	g.budget.now = m.clock
	g.Text(context.Background(), "t", strings.Repeat("Brennan Quigley and Sorcha Tuohy\n", 50))
	if m.calls < 50 {
		t.Fatalf("an unbounded model judged %d of 50 lines", m.calls)
	}
}
