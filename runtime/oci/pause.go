package oci

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/runtime"
	"github.com/sandlot/sandlot/runtime/oci/teardown"
)

// Pause implements runtime.Runtime with the runtime's own `pause`: crun
// and runc freeze the container's cgroup (the v1 freezer here, v2's
// cgroup.freeze elsewhere); runsc stops the sandbox's tasks in its sentry
// and freezes the sentry's cgroup. Memory stays where it is, so Resume
// continues every process where it stopped, timers and sockets included.
func (r *Runtime) Pause(ctx context.Context, id string) error {
	return r.pauseOrResume(ctx, id, "pause", runtime.StatusRunning)
}

// Resume implements runtime.Runtime.
func (r *Runtime) Resume(ctx context.Context, id string) error {
	return r.pauseOrResume(ctx, id, "resume", runtime.StatusPaused)
}

// pauseOrResume runs the runtime's sub command; when it fails, the
// sandbox's state says why, in one answer for every runtime (runc says
// "container not running", runsc something else). The state is read only
// then (a runtime invocation is most of the cost), except under crun,
// which refuses neither a second pause nor a resume of a running one.
func (r *Runtime) pauseOrResume(ctx context.Context, id, sub string, from runtime.Status) error {
	if err := runtime.CheckID(id); err != nil {
		return err
	}
	if _, err := os.Stat(r.bundle(id)); err != nil {
		return fmt.Errorf("sandbox %s: %w", id, errdefs.ErrNotFound)
	}
	d := r.driverFor(id)
	if d.kind == KindCrun {
		// crun pauses a paused container and resumes a running one
		// without complaint: its state is checked first.
		st, err := r.State(ctx, id)
		if err != nil {
			return err
		}
		if err := notIn(st, sub, from); err != nil {
			return err
		}
	}
	if _, err := d.output(ctx, sub, id); err != nil {
		st, serr := r.State(ctx, id)
		if serr != nil {
			return serr
		}
		if serr := notIn(st, sub, from); serr != nil {
			return serr
		}
		return fmt.Errorf("%s sandbox %s: %w", sub, id, err)
	}
	if sub != "pause" || d.kind != KindCrun {
		return nil
	}
	return r.waitFrozen(ctx, id)
}

// waitFrozen waits until crun reads sandbox id paused, at most 10 s. crun
// returns from a pause while the freezer may still be FREEZING (busy tasks
// are stopped at their next kernel entry); runc and runsc wait. Waiting
// here too, a paused sandbox runs nothing once Pause returns.
//
// The v1 freezer tries a freeze once per request: a task it could not stop
// then (one in a vfork, say) leaves the cgroup FREEZING for good. Asking
// again, as the kernel's documentation says to, retries it. A sandbox whose
// init died around the pause (crun's state read running before it) reads
// stopped from then on, and is not found at once.
func (r *Runtime) waitFrozen(ctx context.Context, id string) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	asked := time.Now()
	for delay := 200 * time.Microsecond; ; delay = min(delay*2, 20*time.Millisecond) {
		st, err := r.State(ctx, id)
		if err != nil {
			return err
		}
		switch st.Status {
		case runtime.StatusPaused:
			return nil
		case runtime.StatusStopped:
			return notIn(st, "pause", runtime.StatusRunning)
		}
		if time.Since(asked) > 100*time.Millisecond {
			refreeze(id)
			asked = time.Now()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("pause sandbox %s: still %s: %w", id, st.Status, ctx.Err())
		case <-time.After(delay):
		}
	}
}

// notIn says why sub does not apply to a sandbox in state st (nil when it
// is in state from): a stopped one is gone, any other in the wrong state.
func notIn(st *runtime.State, sub string, from runtime.Status) error {
	switch st.Status {
	case from:
		return nil
	case runtime.StatusStopped:
		return fmt.Errorf("sandbox %s is stopped: %w", st.ID, errdefs.ErrNotFound)
	}
	return fmt.Errorf("%s sandbox %s: it is %s: %w", sub, st.ID, st.Status, errdefs.ErrFailedPrecondition)
}

// refreeze asks the v1 freezer of sandbox id to freeze again; elsewhere
// (no freezer.state) nothing is written.
func refreeze(id string) {
	for _, d := range teardown.CgroupDirs(id) {
		f := filepath.Join(d, "freezer.state")
		if _, err := os.Stat(f); err == nil {
			_ = os.WriteFile(f, []byte("FROZEN"), 0)
		}
	}
}
