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
		epollNow = func(epfd int, evs []unix.EpollEvent) (int, error) {
			// Report only the result pipe: every wakeup happens to
			// have checked the output pipes before they were written.
			var all [8]unix.EpollEvent
			k, err := rawEpollNow(epfd, all[:min(len(all), max(len(evs), 3))])
			n := 0
			for _, ev := range all[:max(k, 0)] {
				if n < len(evs) && m.isResultFd(ev.Fd) {
					evs[n] = ev
					n++
				}
			}
			return n, err
		}
		res, err := m.Run(ctx, agent.RunCodeParams{Language: tc.lang, Code: tc.code}, nil)
		epollNow = rawEpollNow
		if err != nil {
			t.Fatal(err)
		}
		if res.Stdout != tc.want {
			t.Errorf("%s: stdout %q, want %q (%+v)", tc.lang, res.Stdout, tc.want, res)
		}
	}
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
