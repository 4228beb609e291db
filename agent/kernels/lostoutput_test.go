package kernels

import (
	"context"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/sandlot/sandlot/agent"
)

// TestOutputWrittenBeforeAResultAloneInItsWakeup: a run whose result
// arrives in a wakeup that did not report its output (epoll checked
// stdout before the kernel wrote it, and the result pipe after) still
// returns that output. Before, the agent took the wakeup's empty output
// pipes as "nothing left", answered a success with no stdout, and the
// next run's discard threw the output away.
func TestOutputWrittenBeforeAResultAloneInItsWakeup(t *testing.T) {
	m := New(Config{Home: t.TempDir()})
	defer m.Close()
	ctx := context.Background()
	for _, tc := range []struct{ lang, code, want string }{
		{agent.Python, "print(41 + 1)", "42\n"},
		{agent.Bash, "echo 42", "42\n"},
	} {
		if _, err := m.Run(ctx, agent.RunCodeParams{Language: tc.lang, Code: "1"}, nil); err != nil {
			t.Fatal(err) // the kernel is up before the wakeups are filtered
		}
		res, err := m.runHidingOutput(ctx, agent.RunCodeParams{Language: tc.lang, Code: tc.code})
		if err != nil {
			t.Fatal(err)
		}
		if res.Stdout != tc.want {
			t.Errorf("%s: stdout %q, want %q (%+v)", tc.lang, res.Stdout, tc.want, res)
		}
	}
}

// runHidingOutput runs p with every wakeup reporting the result pipe only,
// as if each had checked the output pipes before the kernel wrote them.
func (m *Manager) runHidingOutput(ctx context.Context, p agent.RunCodeParams) (*agent.RunCodeResult, error) {
	epollNow = func(epfd int, evs []unix.EpollEvent) (int, error) {
		k, err := rawEpollNow(epfd, evs)
		n := 0
		for _, ev := range evs[:max(k, 0)] {
			if m.isResultFd(ev.Fd) {
				evs[n] = ev
				n++
			}
		}
		return n, err
	}
	defer func() { epollNow = rawEpollNow }()
	return m.Run(ctx, p, nil)
}

// isResultFd reports whether fd is a running kernel's result pipe.
func (m *Manager) isResultFd(fd int32) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, kn := range m.kernels {
		if s := kn.cur.Load(); s != nil && int32(s.res) == fd {
			return true
		}
	}
	return false
}
