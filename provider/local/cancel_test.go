package local

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/internal/testenv"
	"github.com/sandlot/sandlot/runtime/oci"
)

// TestCreateCancelledLeavesNothing cancels creates at many points (the
// caller's context cancelled 0-60 ms after the call, then once more in the
// middle of the runtime's run of a create that is known to be under way)
// and checks that each leaves nothing behind once it has returned: no
// cgroup, no process of the sandbox (in its cgroup, or a runtime process
// naming it), no bundle, no runtime state, no mount of the state dir, no
// id range held. A create cancelled inside `crun run` used to leave its
// sandbox: the runtime's half-written state made `crun delete` fail and
// the sandbox's cgroup stayed busy.
func TestCreateCancelledLeavesNothing(t *testing.T) {
	for _, kind := range []string{"crun", "runc"} {
		t.Run(kind, func(t *testing.T) { testCreateCancelled(t, kind) })
	}
}

func testCreateCancelled(t *testing.T, kind string) {
	// The daemon's warnings (a cleanup that failed) go with what is left.
	var logs testenv.Buffer
	p := newProviderWith(t, Config{Runtime: kind, Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	var mu sync.Mutex
	var ids []string
	ended := map[string]createEnd{} // by sandbox id
	p.createHook = func(id string) {
		mu.Lock()
		ids = append(ids, id)
		mu.Unlock()
	}
	var delays []time.Duration
	for ms := 0; ms <= 60; ms += 2 {
		delays = append(delays, time.Duration(ms)*time.Millisecond)
	}
	for i := 0; i < 10; i++ { // finer steps where the runtime runs
		delays = append(delays, 8*time.Millisecond+time.Duration(i)*1500*time.Microsecond)
	}
	// Then cancels inside the runtime's run: as soon as its state
	// directory for the sandbox appears, and a little after.
	const inRun = -1
	for i := 0; i < 20; i++ {
		delays = append(delays, inRun-time.Duration(i%5)*200*time.Microsecond)
	}
	failed := 0
	for _, d := range delays {
		ctx, cancel := context.WithCancel(context.Background())
		var timer *time.Timer
		if d >= 0 {
			timer = time.AfterFunc(d, cancel)
		} else {
			after := -(d - inRun)
			p.createHook = func(id string) {
				mu.Lock()
				ids = append(ids, id)
				mu.Unlock()
				go cancelInRun(ctx, cancel, filepath.Join(p.stateDir, kind, id), after)
			}
		}
		mu.Lock()
		before := len(ids)
		mu.Unlock()
		sb, err := p.Create(ctx, contexts.Spec{})
		if timer != nil {
			timer.Stop()
		}
		cancel()
		mu.Lock()
		if len(ids) > before { // creates run one at a time: the last id is this one's
			ended[ids[len(ids)-1]] = createEnd{at: time.Now(), delay: d, err: err}
		}
		mu.Unlock()
		if err == nil { // done before the cancel: not what is under test
			sb.Close()
			if err := p.Destroy(context.Background(), sb.ID()); err != nil {
				t.Fatalf("destroy: %v", err)
			}
			continue
		}
		failed++
	}
	if failed == 0 {
		t.Fatal("no create was cancelled")
	}
	mu.Lock()
	defer mu.Unlock()
	// Killed processes are reaped by the host's PID 1, maybe lazily.
	var left []string
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		left = leftOf(t, p, ids, ended)
		if len(left) == 0 || time.Now().After(deadline) {
			break
		}
	}
	if len(left) > 0 {
		t.Errorf("after %d creates (%d cancelled), left:\n%s\ndaemon warnings:\n%s", len(ids), failed, strings.Join(left, "\n"), logs.String())
	}
}

// cancelInRun cancels a create after its runtime's state directory dir
// has appeared (the runtime's run is under way), and after more.
func cancelInRun(ctx context.Context, cancel func(), dir string, after time.Duration) {
	for ctx.Err() == nil {
		if _, err := os.Stat(dir); err == nil {
			if after > 0 {
				time.Sleep(after)
			}
			cancel()
			return
		}
		time.Sleep(20 * time.Microsecond)
	}
}

// createEnd is how a create of the test ended: when it returned, the
// cancel's delay (negative: in the runtime's run) and its error.
type createEnd struct {
	at    time.Time
	delay time.Duration
	err   error
}

func (e createEnd) String() string {
	if e.at.IsZero() {
		return "create not returned"
	}
	return fmt.Sprintf("create cancelled at %v returned %s ago: %v", e.delay, time.Since(e.at).Round(time.Millisecond), e.err)
}

// leftOf lists what sandboxes ids left on the host: each process with its
// argv, each cgroup with the processes it lists and how long after its
// create returned it was made (its ctime), each state entry, with how its
// create ended.
func leftOf(t *testing.T, p *Provider, ids []string, ended map[string]createEnd) []string {
	var left []string
	procs, _ := filepath.Glob("/proc/[0-9]*")
	for _, pr := range procs {
		cg, _ := os.ReadFile(pr + "/cgroup")
		cmd, _ := os.ReadFile(pr + "/cmdline")
		for _, id := range ids {
			if bytes.Contains(cg, []byte("/sandlot/"+id)) || bytes.Contains(cmd, []byte(id)) {
				left = append(left, fmt.Sprintf("process %s of %s: %q (%s)", filepath.Base(pr), id, bytes.ReplaceAll(cmd, []byte{0}, []byte{' '}), ended[id]))
			}
		}
		if mi, err := os.ReadFile(pr + "/mountinfo"); err == nil && bytes.Contains(mi, []byte(p.stateDir)) {
			left = append(left, fmt.Sprintf("process %s sees a mount of the state dir", filepath.Base(pr)))
		}
	}
	ctls, _ := os.ReadDir("/sys/fs/cgroup")
	for _, c := range ctls {
		for _, id := range ids {
			d := filepath.Join("/sys/fs/cgroup", c.Name(), "sandlot", id)
			var st unix.Stat_t
			if unix.Stat(d, &st) == nil {
				procs, _ := os.ReadFile(filepath.Join(d, "cgroup.procs"))
				var made string
				at := time.Unix(st.Ctim.Unix())
				switch e := ended[id]; {
				case e.at.IsZero():
					made = "made at " + at.Format("15:04:05.000")
				case at.After(e.at):
					made = fmt.Sprintf("made %v after its create returned", at.Sub(e.at))
				default:
					made = "made before its create returned"
				}
				left = append(left, fmt.Sprintf("cgroup %s (processes %q; %s; %s)", d, strings.Fields(string(procs)), made, ended[id]))
			}
		}
	}
	for _, sub := range []string{"bundles", p.Runtime().Name()} {
		ents, _ := os.ReadDir(filepath.Join(p.stateDir, sub))
		for _, e := range ents {
			left = append(left, fmt.Sprintf("%s/%s (%s)", sub, e.Name(), ended[e.Name()]))
		}
	}
	if n, err := p.Runtime().(*oci.Runtime).HeldIDRanges(); err != nil || n != 0 {
		left = append(left, fmt.Sprintf("id ranges held: %d (%v)", n, err))
	}
	return left
}
