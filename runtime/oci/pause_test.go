package oci

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/runtime"
	"github.com/sandlot/sandlot/runtime/oci/teardown"
)

// counterCmd starts a process that counts in /tmp/c, about 50 times a
// second, detached from the probe's reply.
const counterCmd = `nohup sh -c 'i=0; while :; do i=$((i+1)); echo $i > /tmp/c.new; mv /tmp/c.new /tmp/c; sleep 0.02; done' >/dev/null 2>&1 &`

func readCounter(t *testing.T, p *probeConn) int {
	t.Helper()
	r := p.sh(t, "cat /tmp/c")
	n, err := strconv.Atoi(strings.TrimSpace(r.Out))
	if err != nil {
		t.Fatalf("counter: %q (%d)", r.Out, r.Code)
	}
	return n
}

// TestPauseResume freezes a sandbox with a counting process in it: while
// paused the counter stands still and the sandbox answers nothing; after
// Resume the same process counts on from where it stood (its memory was
// kept), and the sandbox answers again. A paused sandbox can be deleted.
func TestPauseResume(t *testing.T) {
	for _, kind := range testKinds {
		t.Run(kind, func(t *testing.T) {
			r := newRuntime(t, kind)
			ctx := context.Background()
			id, p := startProbe(t, r, runtime.Limits{})
			p.sh(t, counterCmd)
			deadline := time.Now().Add(10 * time.Second)
			for p.sh(t, "test -s /tmp/c").Code != 0 {
				if time.Now().After(deadline) {
					t.Fatal("the counter never started")
				}
				time.Sleep(10 * time.Millisecond)
			}
			pid := strings.TrimSpace(p.sh(t, "pgrep -f 'i=0; while' | head -1").Out)
			// The counter moves only while the sandbox runs, once per 20
			// ms at most: from before c0's read until Pause returns, and
			// from Resume's call until c1 is read. Those spans bound c1-c0.
			ran0 := time.Now()
			c0 := readCounter(t, p)

			if err := r.Resume(ctx, id); !errors.Is(err, errdefs.ErrFailedPrecondition) {
				t.Errorf("resume of a running sandbox: %v, want failed_precondition", err)
			}
			if err := r.Pause(ctx, id); err != nil {
				t.Fatal(err)
			}
			ran := time.Since(ran0)
			st, err := r.State(ctx, id)
			if err != nil || st.Status != runtime.StatusPaused {
				t.Fatalf("state after pause: %+v, %v; want paused", st, err)
			}
			if err := r.Pause(ctx, id); !errors.Is(err, errdefs.ErrFailedPrecondition) {
				t.Errorf("second pause: %v, want failed_precondition", err)
			}
			// A frozen sandbox answers nothing: the command waits in the
			// socket until Resume.
			p.c.SetDeadline(time.Now().Add(2 * time.Second))
			if _, err := p.c.Write([]byte("cat /tmp/c\n")); err != nil {
				t.Fatal(err)
			}
			p.c.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
			if p.sc.Scan() {
				t.Fatalf("a paused sandbox answered %q", p.sc.Text())
			}
			p.sc = newScanner(p.c)
			if st.PID > 0 && kind != KindRunsc {
				// The host sees the file through the init's root: it does
				// not change while the sandbox is frozen.
				f := fmt.Sprintf("/proc/%d/root/tmp/c", st.PID)
				a, errA := os.ReadFile(f)
				time.Sleep(300 * time.Millisecond)
				b, errB := os.ReadFile(f)
				if errA != nil || errB != nil || string(a) != string(b) {
					t.Errorf("counter moved while paused: %q then %q (%v, %v)", a, b, errA, errB)
				}
			}
			time.Sleep(time.Second) // running, the counter would move ~50

			resumed := time.Now()
			if err := r.Resume(ctx, id); err != nil {
				t.Fatal(err)
			}
			p.c.SetDeadline(time.Now().Add(30 * time.Second))
			if !p.sc.Scan() {
				t.Fatalf("no answer after resume: %v", p.sc.Err())
			}
			c1 := readCounter(t, p)
			ran += time.Since(resumed)
			if most := int(ran/(20*time.Millisecond)) + 2; c1 < c0 || c1-c0 > most {
				t.Errorf("counter %d before a 1.3 s pause, %d after, more than the %d it can count in the %s it ran: it should stand still while paused", c0, c1, most, ran.Round(time.Millisecond))
			}
			if got := strings.TrimSpace(p.sh(t, "pgrep -f 'i=0; while' | head -1").Out); got != pid {
				t.Errorf("counting process %q after resume, %q before: the process should be the same", got, pid)
			}
			deadline = time.Now().Add(10 * time.Second)
			for readCounter(t, p) <= c1 {
				if time.Now().After(deadline) {
					t.Fatal("the counter does not move after resume")
				}
				time.Sleep(20 * time.Millisecond)
			}
			if st, err := r.State(ctx, id); err != nil || st.Status != runtime.StatusRunning {
				t.Errorf("state after resume: %+v, %v", st, err)
			}

			// Deleting a paused sandbox removes it and its cgroups.
			if err := r.Pause(ctx, id); err != nil {
				t.Fatal(err)
			}
			if err := r.Delete(ctx, id); err != nil {
				t.Fatalf("delete of a paused sandbox: %v", err)
			}
			for _, d := range teardown.CgroupDirs(id) {
				if _, err := os.Stat(d); err == nil {
					t.Errorf("cgroup %s left behind", d)
				}
			}
			if err := r.Pause(ctx, id); !errors.Is(err, errdefs.ErrNotFound) {
				t.Errorf("pause of a deleted sandbox: %v, want not_found", err)
			}
		})
	}
}

// BenchmarkPauseResume measures one Pause and one Resume of a running
// sandbox, per runtime, beside the floor of one runtime invocation (State).
func BenchmarkPauseResume(b *testing.B) {
	for _, kind := range testKinds {
		b.Run(kind, func(b *testing.B) {
			r := newRuntime(b, kind)
			id, _ := startProbe(b, r, runtime.Limits{})
			ctx := context.Background()
			var pause, resume, floor time.Duration
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				// The floor: one runtime invocation (state), interleaved.
				f0 := time.Now()
				if _, err := r.State(ctx, id); err != nil {
					b.Fatal(err)
				}
				floor += time.Since(f0)
				t0 := time.Now()
				if err := r.Pause(ctx, id); err != nil {
					b.Fatal(err)
				}
				t1 := time.Now()
				if err := r.Resume(ctx, id); err != nil {
					b.Fatal(err)
				}
				pause += t1.Sub(t0)
				resume += time.Since(t1)
			}
			b.ReportMetric(float64(pause.Microseconds())/1000/float64(b.N), "pause-ms")
			b.ReportMetric(float64(resume.Microseconds())/1000/float64(b.N), "resume-ms")
			b.ReportMetric(float64(floor.Microseconds())/1000/float64(b.N), "floor-state-ms")
		})
	}
}

// TestPauseOfStopped: a sandbox whose init died around a pause (crun read
// it running, then it was killed) is not found at once by the wait for its
// freeze; that wait used to poll a stopped sandbox for 10 s and end with a
// timeout.
func TestPauseOfStopped(t *testing.T) {
	for _, kind := range testKinds {
		t.Run(kind, func(t *testing.T) {
			r := newRuntime(t, kind)
			ctx := context.Background()
			id, _ := startProbe(t, r, runtime.Limits{})
			if err := r.Kill(ctx, id, 9); err != nil {
				t.Fatal(err)
			}
			waitStatus(t, r, id, runtime.StatusStopped)
			start := time.Now()
			err := r.waitFrozen(ctx, id)
			if !errors.Is(err, errdefs.ErrNotFound) {
				t.Fatalf("the freeze's wait on a stopped sandbox: %v after %s, want not_found", err, time.Since(start).Round(time.Millisecond))
			}
			if err := r.Pause(ctx, id); !errors.Is(err, errdefs.ErrNotFound) {
				t.Errorf("pause of a stopped sandbox: %v, want not_found", err)
			}
		})
	}
}
